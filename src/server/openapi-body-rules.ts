/**
 * Request bodies in the OpenAPI document as the server checks them: class-validator's rules of each
 * body class as JSON Schema (applyRule, tightenBodySchemas), the rules beyond the schema listed for
 * the 400 answer (bodyRules), NUL refused in every string (refuseNul), the search bodies of lists and
 * JSON bodies without the files of their multipart twins.
 */
import type { OpenAPIObject } from '@nestjs/swagger';
import { getMetadataStorage } from 'class-validator';
import { ISO_WITH_OFFSET } from '../common/dates.js';
import { missingReferenceMessage } from '../common/documented-rules.js';
import type { ListSpec } from '../lists/list-spec.js';
import { classesWithRules } from '../patches/class-validator.js';
import { type BodyClass, type Operation, type Schema, refName } from './openapi-schema.js';

type ValidationMetadata = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[number];

/** A string without NUL characters (NoNul): what PostgreSQL text can hold. */
const NO_NUL_PATTERN = '^[^\\u0000]*$';
/** Both: no NUL, and a character other than white space (what trim() leaves). */
const NOT_BLANK_NO_NUL_PATTERN = '^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$';

const appendDescription = (schema: Schema, text: string) => {
  const current = typeof schema.description === 'string' ? schema.description : '';
  if (!current.includes(text)) schema.description = current ? `${current}\n\n${text}` : text;
};

/**
 * What one class-validator rule says in JSON Schema terms, written onto the property's schema (or
 * its items' for `each` rules). Every rule the validation pipe applies is here, so a client
 * generated from the document sends only what the pipe takes; the contract suite checks the
 * document against this metadata.
 */
function applyRule(prop: Schema, m: ValidationMetadata): void {
  const target = m.each && prop.items ? prop.items : prop;
  const c = (m.constraints ?? []) as unknown[];
  switch (m.name ?? m.type) {
    case 'isInt':
      target.type = 'integer';
      break;
    case 'isString':
      if (!target.type && !target.oneOf && !target.allOf && !target.$ref) target.type = 'string';
      break;
    case 'isBoolean':
      target.type = 'boolean';
      break;
    case 'isNotEmpty':
      if (target.type === 'string' && !((target.minLength as number) >= 1)) target.minLength = 1;
      break;
    case 'isIsoDateTime':
      target.type = 'string';
      target.format = 'date-time';
      target.pattern = ISO_WITH_OFFSET.source;
      break;
    case 'isCalendarDate':
      target.type = 'string';
      target.format = 'date';
      target.pattern = '^\\d{4}-\\d{2}-\\d{2}$';
      break;
    case 'isEmail':
      target.format = 'email';
      break;
    case 'isPhone':
      // libphonenumber decides (a number without +country is read as a US number): no regular
      // expression says exactly the same, so the format is named and described.
      target.type = 'string';
      target.format = 'phone';
      appendDescription(target, 'A phone number that parses (E.164 such as +14155550100, or a US number without the country code).');
      break;
    case 'matches': {
      const re = c[0];
      const source = re instanceof RegExp ? re.source : String(re);
      const flags = re instanceof RegExp ? re.flags : typeof c[1] === 'string' ? c[1] : '';
      // JSON Schema patterns take no flags: a case-insensitive expression is described instead.
      if (flags.includes('i')) appendDescription(target, `Matches /${source}/${flags}.`);
      else target.pattern = source;
      break;
    }
    case 'isIn':
      target.enum = [...(c[0] as unknown[])];
      break;
    case 'isNotIn':
      target.not = { enum: [...(c[0] as unknown[])] };
      break;
    case 'min':
      target.minimum = c[0];
      break;
    case 'max':
      target.maximum = c[0];
      break;
    case 'minLength':
      target.minLength = c[0];
      break;
    case 'maxLength':
      target.maxLength = c[0];
      break;
    case 'arrayNotEmpty':
      if (!((prop.minItems as number) >= 1)) prop.minItems = 1;
      break;
    case 'arrayMinSize':
      prop.minItems = c[0];
      break;
    case 'arrayMaxSize':
      prop.maxItems = c[0];
      break;
    case 'isArray':
      prop.type = 'array';
      break;
    case 'isObject':
      if (!prop.$ref && !prop.allOf) prop.type = 'object';
      break;
    case 'isDecimal':
      target.type = 'number';
      target['x-max-decimal-places'] = c[0];
      appendDescription(target, `At most ${String(c[0])} decimal places.`);
      break;
    case 'noNul':
      target['x-no-nul'] = true;
      break;
    case 'documentedNotBlank':
      target['x-not-blank'] = true;
      break;
    case 'documentedRule':
      target['x-rules'] = [...new Set([...((target['x-rules'] as string[] | undefined) ?? []), String(c[0])])];
      appendDescription(target, `Checked beyond this schema (400 otherwise): ${String(c[0])}.`);
      break;
    case 'referencesRecord':
      target['x-references'] = String(c[0]);
      appendDescription(target, `The id of an existing ${String(c[0])}: a 400 whose detail says "${missingReferenceMessage(String(c[0]), '<id>')}" otherwise.`);
      break;
  }
}

/** Request bodies, as the global validation pipe checks them (class-validator metadata of the DTO classes). */
export function tightenBodySchemas(schemas: Record<string, Schema>, bodyClasses: Iterable<BodyClass>): void {
  const storage = getMetadataStorage();
  const classes = new Set<BodyClass>([...bodyClasses, ...classesWithRules()]);
  for (const cls of classes) {
    const schema = schemas[cls.name];
    if (!schema?.properties) continue;
    const metas: ValidationMetadata[] = storage.getTargetValidationMetadatas(cls, '', true, false);
    if (!metas.length) continue;
    // whitelist + forbidNonWhitelisted: an unknown property is a 400.
    schema.additionalProperties = false;
    for (const m of metas) {
      const prop = schema.properties[m.propertyName];
      if (prop) applyRule(prop, m);
    }
    // NoNul and NotBlank: a pattern where no other pattern or format already says what the string holds.
    for (const prop of Object.values(schema.properties)) {
      for (const s of [prop, prop.items].filter((x): x is Schema => !!x)) {
        const noNul = s['x-no-nul'] === true;
        const notBlank = s['x-not-blank'] === true;
        delete s['x-no-nul'];
        delete s['x-not-blank'];
        if (s.pattern || s.format || s.enum || !(noNul || notBlank)) continue;
        s.pattern = notBlank ? (noNul ? NOT_BLANK_NO_NUL_PATTERN : '\\S') : NO_NUL_PATTERN;
      }
    }
  }
}

/**
 * The rules beyond the schema a body carries (its own properties' and its nested bodies'), as
 * `path: rule` lines for the operation's 400 description.
 */
export function bodyRules(schemas: Record<string, Schema>, schema: Schema | undefined, prefix = '', seen = new Set<Schema>()): string[] {
  const resolved = schema?.$ref ? schemas[refName(schema.$ref)] : schema;
  if (!resolved || seen.has(resolved)) return [];
  seen.add(resolved);
  const out: string[] = [];
  for (const [name, raw] of Object.entries(resolved.properties ?? {})) {
    const prop = (raw.allOf as Schema[] | undefined)?.length === 1 ? (raw.allOf as Schema[])[0] : raw;
    const path = `${prefix}${name}`;
    for (const s of [prop, prop.items].filter((x): x is Schema => !!x)) {
      const target = s['x-references'];
      if (typeof target === 'string') out.push(`\`${path}\` names a ${target} that does not exist ("${missingReferenceMessage(target, '<id>')}")`);
      for (const r of (s['x-rules'] as string[] | undefined) ?? []) out.push(`\`${path}\`: ${r}`);
    }
    if (prop.$ref) out.push(...bodyRules(schemas, prop, `${path}.`, seen));
  }
  return out;
}

/**
 * The request-text check (request-text.middleware.ts) refuses a NUL in any string of any body: every
 * string a request body can hold says so, unless a pattern, format or enum already does.
 */
export function refuseNul(schema: Schema | undefined, schemas: Record<string, Schema>, seen = new Set<Schema>()): void {
  const s = schema?.$ref ? schemas[refName(schema.$ref)] : schema;
  if (!s || typeof s !== 'object' || seen.has(s)) return;
  seen.add(s);
  if (s.type === 'string' && !s.pattern && !s.format && !s.enum) s.pattern = NO_NUL_PATTERN;
  if (s.pattern === '\\S') s.pattern = NOT_BLANK_NO_NUL_PATTERN;
  for (const p of Object.values(s.properties ?? {})) refuseNul(p, schemas, seen);
  for (const key of ['items', 'additionalProperties', 'not'] as const) {
    const child = s[key];
    if (child && typeof child === 'object') refuseNul(child as Schema, schemas, seen);
  }
  for (const key of ['oneOf', 'anyOf', 'allOf'] as const) for (const child of (s[key] as Schema[] | undefined) ?? []) refuseNul(child, schemas, seen);
}

const addRule = (prop: Schema, text: string) => {
  prop['x-rules'] = [...((prop['x-rules'] as string[] | undefined) ?? []), text];
  appendDescription(prop, `Checked beyond this schema (400 otherwise): ${text}.`);
};

/**
 * `POST /api/<resource>/search`'s body for one list: ListSearchDto with the list's own orderBy
 * values and sparse properties (the same spec parseListQuery checks), and the rules that depend on
 * the list (its filter fields, its cursors) described.
 */
export function searchBodySchema(base: Schema, spec: ListSpec): Schema {
  const s = JSON.parse(JSON.stringify(base)) as Schema;
  const p = (s.properties ??= {});
  if (p.orderBy) p.orderBy.enum = Object.keys(spec.sortable);
  if (p.orderByDir) p.orderByDir.pattern = '^(?:[aA][sS][cC]|[dD][eE][sS][cC])$';
  if (p.filter) {
    addRule(
      p.filter,
      spec.filterable ? 'the fields, operators and values the operation lists as filterable; the text form in its grammar' : 'not taken by this list',
    );
  }
  if (p.after) {
    addRule(
      p.after,
      spec.filterable
        ? 'the `next` of an earlier answer of this list with the same orderBy, orderByDir, filter and search, or ""; not with page > 1'
        : 'not taken by this list',
    );
  }
  if (p.count && !spec.filterable) addRule(p.count, 'not taken by this list');
  if (p.search && !spec.searchExpression) addRule(p.search, 'not taken by this list (it has no search)');
  if (p.fields?.items) {
    if (!spec.properties) addRule(p.fields, 'not taken by this list');
    else if (spec.dynamicFilterDoc)
      addRule(p.fields.items, `one of ${['id', ...spec.properties.filter((x) => x !== 'id')].join(', ')}, or fields.<alias> of a custom field`);
    else p.fields.items.enum = ['id', ...spec.properties.filter((x) => x !== 'id')];
  }
  return s;
}

/**
 * A route taking JSON and multipart/form-data documents one body class for both; a JSON body cannot
 * carry a file (a `file` property in JSON is an unknown property), so its JSON schema is the class
 * without its binary properties.
 */
export function jsonBodiesWithoutFiles(document: OpenAPIObject, schemas: Record<string, Schema>): void {
  for (const item of Object.values(document.paths) as Record<string, Operation>[])
    for (const op of Object.values(item)) {
      const json = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content?.['application/json'];
      const ref = json?.schema?.$ref;
      const base = ref ? schemas[refName(ref)] : undefined;
      const files = Object.entries(base?.properties ?? {})
        .filter(([, p]) => p.format === 'binary')
        .map(([name]) => name);
      if (!json || !base || !files.length) continue;
      const copy = JSON.parse(JSON.stringify(base)) as Schema;
      for (const name of files) if (copy.properties) delete copy.properties[name];
      copy.required = (copy.required ?? []).filter((r) => !files.includes(r));
      json.schema = copy;
    }
}
