/**
 * Request bodies are documented as the server checks them, so that a client or a fuzzer generated
 * from the OpenAPI document sends only what the server takes.
 *
 * 1. Every class-validator rule of every documented body class (read from the built DTO modules,
 *    the same metadata the validation pipe runs on) has its counterpart in the body's schema:
 *    patterns, formats, enums, ranges, lengths, and the rules no schema can say (cross-field rules,
 *    references to other records), which must be described (`x-rules`, `x-references`).
 * 2. Schema-valid bodies (fast-check, checked with ajv against the document before they are sent)
 *    for every JSON body operation a token calls: the server may refuse one with a 400 only for a
 *    rule the document describes beyond the schema, with the detail naming a described property.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { getMetadataStorage } from 'class-validator';
import { ROOT, startApp, type TestApp } from './support/app.js';
import { anchored, type DocAjv, docAjv, type Schema, schemaArbitraries } from './support/openapi-doc.js';
import { adminToken } from './support/fixtures.js';

type Operation = {
  parameters?: { name: string; in: string; schema?: Schema }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  security?: Record<string, string[]>[];
  responses: Record<string, unknown>;
};
type Doc = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };
type ErrorBody = { error?: { code?: string; message?: string; details?: { field: string; message: string }[] } };

const BODY_METHODS = ['post', 'put', 'patch'] as const;

describe('request bodies in the OpenAPI document', () => {
  let app: TestApp;
  let admin: string;
  let doc: Doc;
  let ajv: DocAjv;
  const fixtures: Record<string, number> = {};

  beforeAll(async () => {
    app = await startApp({ role: 'api', env: { RATE_LIMIT_ENTERPRISE: '1000000' } });
    admin = await adminToken(app);
    doc = (await app.http.get('/api/docs-json')).body as Doc;
    ajv = docAjv(doc.components, ['phone']);
    const create = async (path: string, body: object) => {
      const res = await app.http.post(path).set('Authorization', admin).send(body);
      if (res.status !== 201) throw new Error(`fixture ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return (Object.values(res.body)[0] as { id: number }).id;
    };
    fixtures.contacts = await create('/api/contacts/new', { name: 'Fixture', email: 'fixture@example.com' });
    fixtures.companies = await create('/api/companies/new', { name: 'Fixture company' });
    fixtures.campaigns = await create('/api/campaigns/new', { name: 'Fixture campaign' });
    fixtures.segments = await create('/api/segments/new', { name: 'Fixture segment', type: 'static' });
    fixtures.deals = await create('/api/deals/new', { title: 'Fixture deal', value: 10, contact_id: fixtures.contacts });
    fixtures.activities = await create('/api/activities/new', { type: 'call', subject: 'Fixture', contact_id: fixtures.contacts });
    fixtures.categories = await create('/api/categories/new', { title: 'Fixture category', bundle: 'global' });
    fixtures['point-groups'] = await create('/api/point-groups/new', { name: 'Fixture group', minimumPoints: 0, maximumPoints: 10 });
    fixtures.fields = await create('/api/fields/contact/new', { label: 'Fixture field', type: 'text' });
    fixtures.reports = await create('/api/reports/new', { name: 'Fixture report', type: 'sales' });
    fixtures['text-messages'] = await create('/api/text-messages/new', { content: 'Hi', recipient: '+14155550100' });
    fixtures.workflows = await create('/api/workflows/new', { name: 'Fixture workflow', trigger: { type: 'manual' }, steps: [{ key: 'end', type: 'exit' }] });
  }, 180_000);
  afterAll(async () => app?.stop());

  const resolve = (schema: Schema | undefined): Schema => {
    if (!schema) return {};
    if (schema.$ref) return resolve(doc.components.schemas[schema.$ref.split('/').pop()!]);
    if (schema.allOf?.length === 1 && !schema.properties) return resolve(schema.allOf[0]);
    return schema;
  };

  it('declares every class-validator rule of each body class in its schema', async () => {
    // The built DTO modules register their rules in this process's class-validator storage.
    const files = (readdirSync(join(ROOT, 'dist'), { recursive: true }) as string[]).filter((f) => f.endsWith('.dto.js'));
    type Class = Parameters<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[0];
    const classes = new Map<string, Class>();
    for (const f of files) {
      const mod = (await import(pathToFileURL(join(ROOT, 'dist', f)).href)) as Record<string, unknown>;
      for (const v of Object.values(mod)) if (typeof v === 'function' && v.name) classes.set(v.name, v);
    }
    const bodies = new Set<string>();
    for (const item of Object.values(doc.paths))
      for (const m of BODY_METHODS)
        for (const c of Object.values(item[m]?.requestBody?.content ?? {})) if (c.schema?.$ref) bodies.add(c.schema.$ref.split('/').pop()!);
    // Nested bodies (a property whose schema is another body class).
    for (const name of [...bodies])
      for (const p of Object.values(doc.components.schemas[name]?.properties ?? {})) {
        const ref = (p.$ref ?? p.allOf?.[0]?.$ref)?.split('/').pop();
        if (ref) bodies.add(ref);
      }

    const storage = getMetadataStorage();
    const problems: string[] = [];
    let checked = 0;
    for (const name of bodies) {
      const cls = classes.get(name);
      const schema = doc.components.schemas[name];
      if (!cls || !schema) continue;
      for (const m of storage.getTargetValidationMetadatas(cls, '', true, false)) {
        const prop = schema.properties?.[m.propertyName];
        const where = `${name}.${m.propertyName} ${m.name ?? m.type}`;
        if (!prop) {
          problems.push(`${where}: property not in the schema`);
          continue;
        }
        const s = m.each && prop.items ? prop.items : prop;
        const c = (m.constraints ?? []) as unknown[];
        const expectIt = (ok: boolean, what: string) => {
          checked++;
          if (!ok) problems.push(`${where}: the schema does not say ${what} (${JSON.stringify({ ...s, description: undefined })})`);
        };
        switch (m.name ?? m.type) {
          case 'matches':
            expectIt(s.pattern === (c[0] as RegExp).source, `pattern ${String(c[0])}`);
            break;
          case 'isEmail':
            expectIt(s.format === 'email', 'format email');
            break;
          case 'isIsoDateTime':
            expectIt(s.format === 'date-time' && !!s.pattern, 'format date-time with the offset pattern');
            break;
          case 'isCalendarDate':
            expectIt(s.format === 'date', 'format date');
            break;
          case 'isPhone':
            expectIt(s.format === 'phone', 'format phone');
            break;
          case 'isIn':
            expectIt(JSON.stringify(s.enum) === JSON.stringify(c[0]), `enum ${JSON.stringify(c[0])}`);
            break;
          case 'isNotIn':
            expectIt(JSON.stringify(s.not?.enum) === JSON.stringify(c[0]), `not one of ${JSON.stringify(c[0])}`);
            break;
          case 'min':
            expectIt(s.minimum === c[0], `minimum ${String(c[0])}`);
            break;
          case 'max':
            expectIt(s.maximum === c[0], `maximum ${String(c[0])}`);
            break;
          case 'minLength':
            expectIt(s.minLength === c[0], `minLength ${String(c[0])}`);
            break;
          case 'maxLength':
            expectIt(s.maxLength === c[0], `maxLength ${String(c[0])}`);
            break;
          case 'arrayMaxSize':
            expectIt(prop.maxItems === c[0], `maxItems ${String(c[0])}`);
            break;
          case 'arrayMinSize':
            expectIt(prop.minItems === c[0], `minItems ${String(c[0])}`);
            break;
          case 'arrayNotEmpty':
            expectIt((prop.minItems ?? 0) >= 1, 'minItems 1');
            break;
          case 'isInt':
            expectIt(s.type === 'integer', 'type integer');
            break;
          case 'isBoolean':
            expectIt(s.type === 'boolean', 'type boolean');
            break;
          case 'isNotEmpty':
            expectIt(s.type !== 'string' || (s.minLength ?? 0) >= 1, 'minLength 1');
            break;
          case 'isDecimal':
            expectIt(s.type === 'number' && s['x-max-decimal-places'] === c[0], `at most ${String(c[0])} decimals`);
            break;
          case 'noNul':
            // The NUL-free pattern, or a pattern/format/enum that leaves no room for NUL.
            expectIt(!!(s.pattern || s.format || s.enum) && (!s.pattern || !new RegExp(s.pattern).test('a\u0000')), 'that NUL is refused');
            break;
          case 'documentedNotBlank':
            expectIt(!!s.pattern && !new RegExp(s.pattern).test(' \t ') && new RegExp(s.pattern).test(' x '), 'that a blank text is refused');
            break;
          case 'documentedRule':
            expectIt((s['x-rules'] ?? []).includes(String(c[0])), `the rule "${String(c[0])}"`);
            break;
          case 'referencesRecord':
            expectIt(s['x-references'] === c[0], `that it names a ${String(c[0])}`);
            break;
          case 'isString':
            expectIt(s.type === 'string' || !!s.oneOf || !!s.$ref || !!s.allOf, 'type string');
            break;
          case 'isArray':
            expectIt(prop.type === 'array', 'type array');
            break;
          case 'isObject':
            expectIt(prop.type === 'object' || !!prop.$ref || !!prop.allOf, 'type object');
            break;
          // No schema keyword: optional (the schema's required list), present, nested (the $ref), allowed.
          case 'isOptional':
          case 'conditionalValidation':
          case 'isDefined':
          case 'nestedValidation':
          case 'whitelistValidation':
            break;
          default:
            problems.push(`${where}: a rule the document does not know how to declare (teach common/openapi.ts applyRule and this test)`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(300);
  }, 120_000);

  /** Values the schema allows: strings of any script, blank and NUL where no pattern refuses them. */
  const { valueArb } = schemaArbitraries({
    resolve,
    ids: () => Object.values(fixtures),
    text: (s) => {
      if (s.format === 'email') return fc.emailAddress();
      if (s.format === 'phone') return fc.constantFrom('+14155550100', '+442071838750', '(415) 555-0100');
      if (s.pattern) return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length <= (s.maxLength ?? 1e9));
      return fc.oneof(
        { weight: 4, arbitrary: fc.string({ unit: 'grapheme', minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 40, 40) }) },
        { weight: 1, arbitrary: fc.constantFrom(' ', '  \t', 'a\u0000b', '\u0000') },
      );
    },
    places: (s) => s['x-max-decimal-places'] ?? 6,
  });

  const described = (s: Schema | undefined) => [s, s?.items].some((x) => x && (x['x-rules']?.length || x['x-references']));

  /**
   * The schema of a detail's field (`audience.segmentId`, `fields.plan`, `fields.1`) inside a body
   * schema; a described property explains what is below it (the keys of `fields`, the items of a list).
   */
  function propertyAt(body: Schema | undefined, field: string): Schema | undefined {
    let s: Schema | undefined = resolve(body);
    for (const part of field.split('.')) {
      if (!s || described(s)) return s;
      // The rules of a nested body's property sit beside its $ref (`{ allOf: [$ref], x-rules }`).
      const raw: Schema | undefined = /^\d+$/.test(part) && s.items ? s.items : s.properties?.[part];
      s = raw && described(raw) ? raw : raw ? resolve(raw) : undefined;
    }
    return s;
  }

  it('takes schema-valid bodies, refusing one only for a rule the document describes beyond the schema', async () => {
    const failures: string[] = [];
    const seen = new Set<string>();
    const tally = { operations: 0, sent: 0, accepted: 0, describedRefusals: 0, notSchemaValid: 0 };
    const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
      BODY_METHODS.filter((m) => item[m]?.requestBody?.content?.['application/json'] && (item[m].security ?? []).some((s) => 'bearer' in s)).map((m) => ({
        path,
        method: m,
        op: item[m],
      })),
    );
    for (const { path, method, op } of operations) {
      tally.operations++;
      const bodySchema = op.requestBody!.content!['application/json'].schema ?? {};
      const validate = ajv.compile(anchored(bodySchema));
      const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
        if (name === 'object' || name === 'segment') return 'contact';
        const resource = path.split('/')[2];
        return String(name === 'contactId' ? fixtures.contacts : (fixtures[resource] ?? 1));
      });
      await fc.assert(
        fc.asyncProperty(valueArb(bodySchema), async (body) => {
          if (!validate(body)) {
            tally.notSchemaValid++;
            return;
          }
          tally.sent++;
          const res = await app.http[method](url).set('Authorization', admin).set('Content-Type', 'application/json').send(JSON.stringify(body));
          if (res.status < 300) tally.accepted++;
          if (res.status !== 400) return;
          const details = (res.body as ErrorBody).error?.details ?? [];
          const badRequest = (op.responses['400'] ?? {}) as { description?: string };
          const unexplained = details.filter((d) => {
            // A rule of the operation rather than of one property, named in its 400 description.
            if ((badRequest.description ?? '').includes(`\`${d.field}\`:`)) return false;
            const prop = propertyAt(bodySchema, d.field);
            if (!described(prop)) return true;
            const target = prop?.['x-references'] ?? prop?.items?.['x-references'];
            // A missing referenced record answers with the one message the document gives.
            return (
              target !== undefined &&
              !(prop?.['x-rules']?.length || prop?.items?.['x-rules']?.length) &&
              !new RegExp(`^${target} \\d+ does not exist$`).test(d.message)
            );
          });
          if (!details.length || unexplained.length) {
            const key = `${method.toUpperCase()} ${path} ${(unexplained.length ? unexplained : [{ field: '-' }]).map((d) => d.field).join(',')}`;
            if (seen.has(key)) return;
            seen.add(key);
            failures.push(
              `${method.toUpperCase()} ${url} ${JSON.stringify(body).slice(0, 300)} → 400 ${(res.body as ErrorBody).error?.message?.slice(0, 300) ?? ''}`,
            );
          } else tally.describedRefusals++;
        }),
        { numRuns: 25, seed: 26 },
      );
    }
    // What this sweep covers, for the record (the test fails on failures only).
    process.stdout.write(`schema-valid body sweep: ${JSON.stringify(tally)}\n`);
    expect(failures.slice(0, 60)).toEqual([]);
    expect(tally.operations).toBeGreaterThan(40);
  }, 900_000);
});
