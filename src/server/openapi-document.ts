import type { Credential } from '../common/route-access.js';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import type { OpenAPIObject } from '@nestjs/swagger';
import { getMetadataStorage } from 'class-validator';
import { missingReferenceMessage } from '../common/documented-rules.js';

type ValidationMetadata = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[number];
import { ISO_WITH_OFFSET } from '../common/dates.js';
import { ERROR_STATUS, type ErrorCode, GENERIC_ERROR_STATUS } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { describeRegistry } from '../lists/filter.js';
import { FILTER_NODE_SCHEMAS, LIST_SEARCH_KEY } from '../lists/list.openapi.js';
import { API_ERRORS_KEY, type ApiErrorDoc, SPARSE_MODELS } from '../common/openapi.js';
import { IDEMPOTENCY_HEADER, IDEMPOTENT_METHODS } from '../idempotency/idempotency.decorators.js';
import { LIST_SPEC_KEY, listQueryParameters, type ListSpec } from '../lists/list.js';
import type { RouteInfo } from './route-table.js';
import { classesWithRules } from '../patches/class-validator.js';
import { THROTTLER_SKIP } from '../patches/throttler.js';

const MAX_ID = 2147483647;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

const DEFAULT_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (malformed body or a value that breaks a rule); `details` names each field',
  401: 'No valid token: missing, malformed, unknown, expired or revoked (WWW-Authenticate: Bearer)',
  403: 'The token lacks the permission this route needs',
  404: 'No record with this id (a path id that is not a whole number from 1 to 2147483647 names no record either)',
  405: 'The path exists, but not with this method (Allow lists the methods)',
  409: 'Conflict with the current state of a record',
  413: 'The request body is larger than the configured limit',
  415: 'The request body is in a media type this route does not take',
  416: 'Range not satisfiable',
  429: 'Rate limit exceeded (Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset)',
  503: 'The database or the job queue is unavailable; retry after Retry-After seconds',
};

const RESPONSE_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  416: 'RangeNotSatisfiable',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
};

const HEADERS: Record<number, Record<string, object>> = {
  401: { 'WWW-Authenticate': { schema: { type: 'string' } } },
  405: { Allow: { schema: { type: 'string' } } },
  429: {
    'Retry-After': { schema: { type: 'integer' } },
    'X-RateLimit-Limit': { schema: { type: 'integer' } },
    'X-RateLimit-Remaining': { schema: { type: 'integer' } },
    'X-RateLimit-Reset': { schema: { type: 'integer' } },
  },
  503: { 'Retry-After': { schema: { type: 'integer' } } },
};

const genericCode = (status: number): ErrorCode[] =>
  (Object.entries(GENERIC_ERROR_STATUS) as [ErrorCode, number][]).filter(([, s]) => s === status).map(([c]) => c);

/** The error body for one status: ApiErrorBody with `code` narrowed to the codes of that status. */
function errorSchema(status: number, codes: ErrorCode[]) {
  return {
    allOf: [
      { $ref: '#/components/schemas/ApiErrorBody' },
      {
        type: 'object',
        required: ['error'],
        properties: {
          error: {
            type: 'object',
            required: ['code', 'status'],
            properties: { code: { type: 'string', enum: codes }, status: { type: 'integer', enum: [status] } },
          },
        },
      },
    ],
  };
}

function errorResponse(status: number, description: string, codes: ErrorCode[]) {
  return {
    description,
    ...(HEADERS[status] ? { headers: HEADERS[status] } : {}),
    content: { 'application/json': { schema: errorSchema(status, codes) } },
  };
}

const ERROR_SCHEMAS = {
  ApiErrorDetail: {
    type: 'object',
    required: ['field', 'message'],
    description:
      'One problem: the field (dotted path for nested properties, or a query parameter) and what is wrong; some carry more (e.g. existingId on 409).',
    properties: { field: { type: 'string' }, message: { type: 'string' }, existingId: { type: 'integer' } },
    additionalProperties: true,
  },
  ApiErrorBody: {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    description: 'Every error answer (decisions §4).',
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'status'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
          message: { type: 'string' },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          details: { type: 'array', items: { $ref: '#/components/schemas/ApiErrorDetail' } },
          requestId: { type: 'string', description: 'Sent with 500 answers: the id to find the failure in the logs.' },
        },
      },
    },
  },
};

type Schema = Record<string, unknown> & { type?: string; properties?: Record<string, Schema>; items?: Schema; required?: string[]; $ref?: string };
type Operation = {
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema; description?: string }[];
  requestBody?: unknown;
  responses: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
  'x-permission'?: string;
  'x-also-requires'?: string[];
};

/** A string without NUL characters (NoNul): what PostgreSQL text can hold. */
const NO_NUL_PATTERN = '^[^\\u0000]*$';
/** Both: no NUL, and a character other than white space (what trim() leaves). */
const NOT_BLANK_NO_NUL_PATTERN = '^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$';

/** The component name a local `$ref` points to. */
const refName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);

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
function tightenBodySchemas(schemas: Record<string, Schema>, bodyClasses: Set<Function>): void {
  const storage = getMetadataStorage();
  const classes = new Set<Function>([...bodyClasses, ...classesWithRules()]);
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
function bodyRules(schemas: Record<string, Schema>, schema: Schema | undefined, prefix = '', seen = new Set<Schema>()): string[] {
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
function refuseNul(schema: Schema | undefined, schemas: Record<string, Schema>, seen = new Set<Schema>()): void {
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
function searchBodySchema(base: Schema, spec: ListSpec): Schema {
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
function jsonBodiesWithoutFiles(document: OpenAPIObject, schemas: Record<string, Schema>): void {
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

function readArgs(r: RouteInfo): { data?: string; pipes?: unknown[] }[] {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, r.controller, r.handlerName) ?? {}) as Record<string, { data?: string; pipes?: unknown[] }>;
  return Object.values(args);
}

/**
 * Makes the document say what the server does, from the same route metadata the server runs on:
 * every operation lists each error status it can answer with the real error schema, path ids are
 * 32-bit positive integers, lists declare their parameters from their ListSpec, request bodies say
 * what the validation pipe refuses. Runs once over the document SwaggerModule built.
 */
/** The OpenAPI security requirement of each credential kind (route-access.ts). */
const SECURITY_BY_CREDENTIAL: Record<Credential, Record<string, string[]>[]> = {
  none: [],
  token: [{ bearer: [] }],
  'token-or-basic': [{ bearer: [] }, { basic: [] }],
  'metrics-token': [{ bearer: [] }],
  'sms-signature': [{ smsSignature: [] }],
  session: [],
  'signed-link': [{ signedLink: [] }],
};

const IDEMPOTENCY_PARAMETER = {
  name: IDEMPOTENCY_HEADER,
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first answer (2xx or 4xx) to this key, account, method and path is kept 24 h and replayed with `Idempotent-Replayed: true`; ' +
    'the same key with another body is a 422, while the first is still running a 409 with Retry-After. Not accepted on multipart/form-data uploads.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9_:-]{1,255}$' },
};

/** Writes a token calls (the same rule the idempotency guard applies). */
function takesIdempotencyKey(r: RouteInfo): boolean {
  return (
    IDEMPOTENT_METHODS.has(r.method) &&
    r.path.startsWith('/api/') &&
    (r.credential === 'token' || r.credential === 'token-or-basic' || r.credential === 'metrics-token')
  );
}

export function completeOpenApi(document: OpenAPIObject, routes: RouteInfo[]): void {
  document.components ??= {};
  const schemas = (document.components.schemas ??= {}) as Record<string, Schema>;
  Object.assign(schemas, ERROR_SCHEMAS, FILTER_NODE_SCHEMAS);
  for (const name of SPARSE_MODELS) {
    const full = schemas[name] as Schema | undefined;
    if (!full) continue;
    const copy = JSON.parse(JSON.stringify(full)) as Schema;
    copy.required = copy.properties && 'id' in copy.properties ? ['id'] : [];
    copy.description = `${name} with only the properties chosen by \`fields\` (all when not given); id is always there.`;
    schemas[`${name}Sparse`] = copy;
  }
  const responses = (document.components.responses ??= {}) as Record<string, unknown>;
  for (const [status, name] of Object.entries(RESPONSE_NAMES)) {
    responses[name] = errorResponse(Number(status), DEFAULT_DESCRIPTIONS[Number(status)], genericCode(Number(status)));
  }

  const bodyClasses = new Set<Function>();
  for (const r of routes) {
    const types = (Reflect.getMetadata('design:paramtypes', r.controller.prototype, r.handlerName) ?? []) as unknown[];
    for (const t of types) if (typeof t === 'function') bodyClasses.add(t);
    const apiParams = (Reflect.getMetadata('swagger/apiParameters', r.controller.prototype[r.handlerName]) ?? []) as { in?: string; type?: unknown }[];
    for (const p of apiParams) if (p.in === 'body' && typeof p.type === 'function') bodyClasses.add(p.type);
  }
  tightenBodySchemas(schemas, bodyClasses);
  jsonBodiesWithoutFiles(document, schemas);
  for (const item of Object.values(document.paths) as Record<string, Operation>[])
    for (const op of Object.values(item))
      for (const c of Object.values((op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content ?? {}))
        refuseNul(c.schema, schemas);

  for (const r of routes) {
    const openApiPath = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = (document.paths[openApiPath] as Record<string, Operation> | undefined)?.[r.method.toLowerCase()];
    if (!op) continue;
    const handler = r.controller.prototype[r.handlerName] as Function;

    // Who may call it, from the same route table as GET /api/endpoints.
    op['x-permission'] = r.permission;
    const also = r.alsoRequires.length ? ` and ${r.alsoRequires.map((p) => `\`${p}\``).join(', ')}` : '';
    if (r.alsoRequires.length) op['x-also-requires'] = [...r.alsoRequires];
    op.description = `${op.description ? op.description + '\n\n' : ''}Permission: \`${r.permission}\`${also}`;
    const readsAuthorization = (op.parameters ?? []).some((p) => p.in === 'header' && p.name.toLowerCase() === 'authorization');
    if (readsAuthorization) {
      // The route reads the Authorization header itself (OAuth client authentication): HTTP Basic, optional.
      // OpenAPI ignores header parameters named Authorization, so it is a security requirement instead.
      op.parameters = (op.parameters ?? []).filter((p) => !(p.in === 'header' && p.name.toLowerCase() === 'authorization'));
      op.security = [{}, { basic: [] }];
    } else {
      op.security = SECURITY_BY_CREDENTIAL[r.credential];
    }

    // Path ids: IdPipe takes 1..2147483647, anything else is a 404.
    const idParams = new Set(
      readArgs(r)
        .filter((a) => (a.pipes ?? []).some((p) => p === IdPipe || p instanceof IdPipe))
        .flatMap((a) => (a.data ? [a.data] : [])),
    );
    for (const p of op.parameters ?? []) {
      if (p.in === 'path' && idParams.has(p.name)) p.schema = { type: 'integer', format: 'int32', minimum: 1, maximum: MAX_ID };
    }

    // List parameters, from the ListSpec the service validates with.
    const spec = Reflect.getMetadata(LIST_SPEC_KEY, handler) as ListSpec | undefined;
    if (spec) {
      const names = new Set((op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name));
      op.parameters = [...(op.parameters ?? []), ...listQueryParameters(spec).filter((p) => !names.has(p.name))];
    }

    const searchSpec = Reflect.getMetadata(LIST_SEARCH_KEY, handler) as ListSpec | undefined;
    if (searchSpec) {
      const json = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content?.['application/json'];
      const base = json?.schema?.$ref ? schemas[refName(json.schema.$ref)] : undefined;
      if (json && base) json.schema = searchBodySchema(base, searchSpec);
      const fields = describeRegistry(searchSpec.filterable ?? {});
      op.description = `${op.description ?? ''}\n\nFilterable fields: ${fields || 'none'}${searchSpec.dynamicFilterDoc ? `; ${searchSpec.dynamicFilterDoc}` : ''}.`;
    }

    // The error answers the route metadata implies.
    const errors = new Map<number, ApiErrorDoc>();
    const add = (status: number, description = DEFAULT_DESCRIPTIONS[status]) => {
      if (!errors.has(status)) errors.set(status, { status, description });
    };
    const isBodyRoute = BODY_METHODS.has(r.method);
    if (isBodyRoute) {
      add(400);
      add(413);
      add(
        415,
        `${DEFAULT_DESCRIPTIONS[415]} (${Object.keys((op.requestBody as { content?: object } | undefined)?.content ?? { 'application/json': 1 }).join(', ')})`,
      );
    }
    if (spec || searchSpec) {
      add(
        400,
        'Invalid list parameters (unknown parameter, value out of range, orderBy not in the list, a filter with an unknown field, an operator the field does not take, a bad value or a broken limit, a cursor of another list or another walk); `details` names each parameter',
      );
    }
    // Every query parameter a route declares is checked (and the query string's text is, for every route): a bad one is a 400.
    if ((op.parameters ?? []).some((p) => p.in === 'query')) {
      add(
        400,
        'Invalid query parameter (unknown, malformed, out of range or not one of its values; or text that is not UTF-8 or holds NUL); `details` names it',
      );
    }
    if ((op.parameters ?? []).some((p) => p.in === 'path')) add(404);
    if (r.permission !== 'public') {
      add(401);
      if (r.permission !== 'authenticated') add(403);
    }
    // Idempotency-Key (common/idempotency.ts): every write a token calls takes one.
    if (takesIdempotencyKey(r)) {
      const names = new Set((op.parameters ?? []).map((p) => `${p.in}:${p.name.toLowerCase()}`));
      if (!names.has('header:idempotency-key')) op.parameters = [...(op.parameters ?? []), IDEMPOTENCY_PARAMETER];
      add(400, r.method === 'DELETE' ? 'The Idempotency-Key header is malformed' : undefined);
      add(409, 'Conflict with the current state of a record, or a request with the same Idempotency-Key is still running (retry after Retry-After)');
      errors.set(422, { status: 422, description: 'The Idempotency-Key was already used with a different request', codes: ['idempotency_key_mismatch'] });
    }
    const skipThrottle = [handler, r.controller].some((t) => Reflect.getMetadata(THROTTLER_SKIP + 'default', t) === true);
    if (!skipThrottle) add(429);
    // Every request may reach the database (the token lookup, the route's own queries).
    add(503);
    // Error answers declared on the route with @ApiResponse (e.g. the download's 404 and 416).
    for (const [status, res] of Object.entries(op.responses)) {
      const s = Number(status);
      if (s < 400) continue;
      const schema = Object.values(res.content ?? {})[0]?.schema;
      const isOwnBody = schema && !(schema as { $ref?: string }).$ref?.endsWith('/ApiErrorBody');
      if (isOwnBody) continue; // e.g. /health's 503 answers its status document
      errors.set(s, { status: s, description: res.description || DEFAULT_DESCRIPTIONS[s] || '' });
    }
    for (const e of (Reflect.getMetadata(API_ERRORS_KEY, handler) ?? []) as ApiErrorDoc[]) errors.set(e.status, e);
    // The body's rules beyond the schema (cross-field rules, references to other records) are 400s too.
    const bodySchemas = Object.values((op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content ?? {});
    const rules = [...new Set(bodySchemas.flatMap((c) => bodyRules(schemas, c.schema)))];
    if (rules.length) {
      const bad = errors.get(400) ?? { status: 400, description: DEFAULT_DESCRIPTIONS[400] };
      errors.set(400, { ...bad, description: `${bad.description}. Beyond what the body schema says, also when: ${rules.join('; ')}` });
    }

    for (const e of [...errors.values()].sort((a, b) => a.status - b.status)) {
      const existing = op.responses[String(e.status)];
      const ownSchema = Object.values(existing?.content ?? {})[0]?.schema as { $ref?: string } | undefined;
      if (existing && ownSchema && !ownSchema.$ref?.endsWith('/ApiErrorBody')) continue;
      const codes = e.codes ?? genericCode(e.status);
      const standard = !e.codes && e.description === DEFAULT_DESCRIPTIONS[e.status] && RESPONSE_NAMES[e.status];
      op.responses[String(e.status)] = standard
        ? ({ $ref: `#/components/responses/${RESPONSE_NAMES[e.status]}` } as never)
        : errorResponse(e.status, e.description, codes);
    }
  }
  mergeSameTemplates(document);
}

/**
 * Paths that differ only in the names of their parameters (`/api/fields/{segment}` and
 * `/api/fields/{id}`) are one path to OpenAPI: the operations join the path with the most of them,
 * their parameters renamed by position.
 */
function mergeSameTemplates(document: OpenAPIObject): void {
  const names = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const shapes = new Map<string, string[]>();
  for (const path of Object.keys(document.paths)) {
    const shape = path.replace(/\{[^}]+\}/g, '{}');
    shapes.set(shape, [...(shapes.get(shape) ?? []), path]);
  }
  for (const group of shapes.values()) {
    if (group.length < 2) continue;
    const count = (p: string) => Object.keys(document.paths[p]).length;
    const target = group.reduce((a, b) => (count(b) > count(a) ? b : a));
    const into = document.paths[target] as Record<string, Operation>;
    for (const path of group.filter((p) => p !== target)) {
      const from = document.paths[path] as Record<string, Operation>;
      if (Object.keys(from).some((m) => m in into)) continue;
      const rename = new Map(names(path).map((n, i) => [n, names(target)[i]]));
      for (const [method, op] of Object.entries(from)) {
        for (const p of op.parameters ?? []) {
          const renamed = p.in === 'path' ? rename.get(p.name) : undefined;
          if (renamed !== undefined) p.name = renamed;
        }
        into[method] = op;
      }
      delete document.paths[path];
    }
  }
}
