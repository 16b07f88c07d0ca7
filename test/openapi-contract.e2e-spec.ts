/**
 * The API reference tells the truth: requests generated from the OpenAPI document
 * itself (fast-check over every operation's path, query, body and credentials) must be answered with a
 * status the document lists for that operation, with a body that validates (ajv) against the schema
 * documented for that status. Beside the sweep: every path answers its undocumented methods with 405
 * and an Allow header naming exactly the documented ones, and every list accepts exactly the
 * parameters and orderBy values it documents.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { startApp, type TestApp } from './support/app.js';
import { anchored, type DocAjv, docAjv, type Schema, schemaArbitraries } from './support/openapi-doc.js';
import { adminToken, tokenFor } from './support/fixtures.js';

type Parameter = { name: string; in: string; required?: boolean; schema?: Schema };
type Response = { $ref?: string; description?: string; content?: Record<string, { schema?: Schema }> };
type Operation = {
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses: Record<string, Response>;
  security?: Record<string, string[]>[];
};
type Doc = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema>; responses: Record<string, Response> } };

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

describe('the OpenAPI document against the running server', () => {
  let app: TestApp;
  let admin: string;
  let narrow: string;
  let doc: Doc;
  let ajv: DocAjv;
  const fixtures: Record<string, number> = {};
  /** A webhook for its deliveries list only (kept out of fixtures, so the generated requests never send to it). */
  let webhookFixture = 0;
  const validators = new Map<string, ReturnType<DocAjv['compile']>>();

  beforeAll(async () => {
    app = await startApp({
      role: 'api',
      env: { RATE_LIMIT_ANONYMOUS: '1000000', RATE_LIMIT_ENTERPRISE: '1000000', RATE_LIMIT_BASIC: '1000000', OAUTH_RATE_LIMIT_PER_MINUTE: '100000' },
    });
    admin = await adminToken(app);
    narrow = await tokenFor(app, 'notifications:read', { user: 'narrow@example.com', plan: 'enterprise' });
    doc = (await app.http.get('/api/docs-json')).body as Doc;
    ajv = docAjv(doc.components);

    const create = async (path: string, body: object) => {
      const res = await app.http.post(path).set('Authorization', admin).send(body);
      if (res.status !== 201) throw new Error(`fixture ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return (Object.values(res.body)[0] as { id: number }).id;
    };
    fixtures.contacts = await create('/api/contacts/new', { name: 'Fixture', email: 'fixture@example.com' });
    fixtures.campaigns = await create('/api/campaigns/new', { name: 'Fixture campaign' });
    fixtures.companies = await create('/api/companies/new', { name: 'Fixture company', domain: 'fixture-company.example' });
    fixtures.segments = await create('/api/segments/new', { name: 'Fixture segment', type: 'static' });
    fixtures.deals = await create('/api/deals/new', { title: 'Fixture deal', value: 10, contact_id: fixtures.contacts });
    fixtures.activities = await create('/api/activities/new', { type: 'call', subject: 'Fixture', contact_id: fixtures.contacts });
    fixtures.categories = await create('/api/categories/new', { title: 'Fixture category', bundle: 'global' });
    fixtures['point-groups'] = await create('/api/point-groups/new', { name: 'Fixture group', minimumPoints: 0, maximumPoints: 10 });
    fixtures.fields = await create('/api/fields/contact/new', { label: 'Fixture field', type: 'text' });
    fixtures.reports = await create('/api/reports/new', { name: 'Fixture report', type: 'sales', schedule: 'daily' });
    fixtures['text-messages'] = await create('/api/text-messages/new', { content: 'Hi', recipient: '+14155550100' });
    fixtures.workflows = await create('/api/workflows/new', { name: 'Fixture workflow', trigger: { type: 'manual' }, steps: [{ key: 'end', type: 'exit' }] });
    // The sweep may revoke this one (DELETE /api/account/tokens/{id}), never the tokens the suite uses.
    fixtures.account = await create('/api/account/tokens/new', { name: 'Fixture token', permissions: ['contacts:read'] });
    // A public address literal (no name to resolve), inactive: nothing is ever sent to it.
    webhookFixture = await create('/api/webhooks/new', { url: 'https://192.0.43.10/fixture', events: ['deal.won'], isActive: false });
  });
  afterAll(async () => app?.stop());

  const operations = () => Object.entries(doc.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => ({ path, method: m, op: item[m] })));

  function resolve(schema: Schema | undefined): Schema {
    if (!schema) return {};
    if (schema.$ref) return resolve(doc.components.schemas[schema.$ref.split('/').pop()!]);
    return schema;
  }

  function responseOf(op: Operation, status: number): Response | undefined {
    const r = op.responses[String(status)] ?? op.responses.default;
    return r?.$ref ? doc.components.responses[r.$ref.split('/').pop()!] : r;
  }

  /** Checks one answer against the document; returns what is wrong, or null. */
  function check(path: string, method: string, op: Operation, res: { status: number; body: unknown; headers: Record<string, string> }): string | null {
    const documented = responseOf(op, res.status);
    if (!documented)
      return `status ${res.status} is not documented (documented: ${Object.keys(op.responses).join(', ')}): ${JSON.stringify(res.body).slice(0, 300)}`;
    const content = documented.content ?? {};
    const json = content['application/json'];
    if (!json) return null; // documented without a JSON body (a file, a 304, text metrics)
    if (!(res.headers['content-type'] ?? '').startsWith('application/json'))
      return `status ${res.status} documented as application/json, got ${res.headers['content-type']}`;
    if (!json.schema) return null;
    const key = `${method} ${path} ${res.status}`;
    let validate = validators.get(key);
    if (!validate) {
      validate = ajv.compile(anchored(json.schema));
      validators.set(key, validate);
    }
    if (!validate(res.body)) {
      return `status ${res.status} body does not match the documented schema: ${ajv.errorsText(validate.errors)}; body ${JSON.stringify(res.body).slice(0, 300)}`;
    }
    return null;
  }

  const templateMatches = (template: string, url: string) =>
    new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$').test(url);

  const fixtureIds = () => Object.values(fixtures);

  /** Values of a schema: mostly what it allows, sometimes what it refuses (both must answer as documented). */
  const { valueArb, objectArb } = schemaArbitraries({
    resolve,
    ids: fixtureIds,
    allOf: true,
    text: (s) => {
      if (s.format === 'email') return fc.emailAddress().filter((e) => e.length <= (s.maxLength ?? 254));
      if (s.format === 'binary') return fc.constant('file');
      if (s.pattern) return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? 1e9));
      return fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 40, 40) });
    },
    places: () => 2,
  });

  /** A body: usually documented, sometimes with an unknown property, a wrong type or not an object at all. */
  function bodyArb(schema: Schema | undefined): fc.Arbitrary<unknown> {
    const s = resolve(schema);
    const valid = s.properties ? objectArb(s, 0) : valueArb(s);
    return fc.oneof(
      { weight: 6, arbitrary: valid },
      {
        weight: 1,
        arbitrary: fc
          .tuple(valid, fc.string({ minLength: 1, maxLength: 10 }), fc.jsonValue())
          .map(([b, k, v]) => (b && typeof b === 'object' ? { ...b, [`x${k}`]: v } : b)),
      },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    );
  }

  function pathParamArb(path: string, p: Parameter): fc.Arbitrary<string> {
    const s = resolve(p.schema);
    if (s.oneOf?.length) return fc.oneof(...s.oneOf.map((alt) => pathParamArb(path, { ...p, schema: alt })));
    if (s.type === 'integer') {
      const resource = path.split('/')[2]?.replace('_', '-');
      const own = p.name === 'contactId' ? fixtures.contacts : p.name === 'campaignId' ? fixtures.campaigns : fixtures[resource ?? ''];
      return fc.oneof(
        { weight: 4, arbitrary: fc.constant(String(own ?? 1)) },
        { weight: 1, arbitrary: fc.integer({ min: s.minimum ?? 1, max: s.maximum ?? 2147483647 }).map(String) },
      );
    }
    if (s.enum?.length) return fc.constantFrom(...s.enum.map(String));
    return fc.string({ minLength: 1, maxLength: 12 }).map((v) => encodeURIComponent(v));
  }

  function queryArb(op: Operation): fc.Arbitrary<Record<string, string>> {
    const params = (op.parameters ?? []).filter((p) => p.in === 'query');
    if (!params.length) return fc.constant({});
    const valid = fc.record(
      Object.fromEntries(
        params.map((p) => [
          p.name,
          valueArb(p.schema)
            .filter((v) => v !== null)
            .map((v) => String(v)),
        ]),
      ),
      { requiredKeys: [] },
    );
    // Out of the documented range now and then: the 400 must be documented too.
    const hostile = fc
      .tuple(valid, fc.constantFrom(...params.map((p) => p.name)), fc.constantFrom('0', '-1', '999999999', 'x', ''))
      .map(([q, k, v]) => ({ ...q, [k]: v }));
    return fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: hostile }) as fc.Arbitrary<Record<string, string>>;
  }

  function authArb(op: Operation): fc.Arbitrary<string | null> {
    const needsBearer = (op.security ?? []).some((s) => 'bearer' in s);
    if (!needsBearer) return fc.constantFrom<string | null>(null, null, 'Basic Zm9vOmJhcg==');
    return fc.oneof(
      { weight: 6, arbitrary: fc.constant<string | null>(admin) },
      { weight: 1, arbitrary: fc.constant<string | null>(null) },
      { weight: 1, arbitrary: fc.constant<string | null>('Bearer sf_not-a-token-000000000000000000') },
      { weight: 1, arbitrary: fc.constant<string | null>(narrow) },
    );
  }

  it('documents the error answers of every operation with the error schema', () => {
    const problems: string[] = [];
    for (const { path, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      const secured = (op.security ?? []).some((s) => 'bearer' in s);
      if (secured && !responseOf(op, 401)) problems.push(`${where}: no 401`);
      if ((op.parameters ?? []).some((p) => p.in === 'path') && !responseOf(op, 404)) problems.push(`${where}: no 404`);
      if (op.requestBody && !(responseOf(op, 400) && responseOf(op, 413) && responseOf(op, 415))) problems.push(`${where}: a body but not 400, 413 and 415`);
      if (!responseOf(op, 503)) problems.push(`${where}: no 503`);
      for (const p of op.parameters ?? []) {
        if (p.in === 'header' && p.name.toLowerCase() === 'authorization') problems.push(`${where}: declares an Authorization header parameter`);
        if (p.in === 'path' && /^(id|.*Id)$/.test(p.name)) {
          const s = resolve(p.schema);
          // An integer id, or (GET /api/fields/{id}) an integer id or an object name.
          const id = (s.oneOf ?? [s]).map(resolve).find((a) => a.type === 'integer');
          if (!id || id.minimum !== 1 || id.maximum !== 2147483647) problems.push(`${where}: path id ${p.name} is ${JSON.stringify(s)}`);
        }
      }
      for (const [status, r] of Object.entries(op.responses)) {
        if (Number(status) < 400 || (path === '/health' && status === '503')) continue;
        const res = responseOf(op, Number(status))!;
        const types = Object.keys(res.content ?? {});
        if (types.length !== 1 || types[0] !== 'application/json') problems.push(`${where} ${status}: error content ${types.join(', ') || 'none'}`);
        const text = JSON.stringify(res.content?.['application/json']?.schema ?? {});
        if (!text.includes('ApiErrorBody')) problems.push(`${where} ${status}: not the error schema (${r.$ref ?? text.slice(0, 80)})`);
      }
    }
    expect(problems).toEqual([]);
    const error = doc.components.schemas.ApiErrorBody.properties!.error;
    expect(error.required).toEqual(['code', 'message', 'status']);
    expect(error.properties!.code.enum).toEqual(
      expect.arrayContaining(['validation_failed', 'not_found', 'conflict', 'rate_limited', 'unavailable', 'invalid_client']),
    );
  });

  it('request bodies say what the validation refuses: no unknown properties, integers, non-empty strings, date-times with an offset', () => {
    const deal = resolve({ $ref: '#/components/schemas/CreateDealDto' });
    expect(deal.additionalProperties).toBe(false);
    expect(deal.properties!.contact_id.type).toBe('integer');
    expect(deal.properties!.value.type).toBe('number');
    expect(deal.properties!.title.minLength).toBe(1);
    expect(new RegExp(deal.properties!.closed_at.pattern!).test('2026-11-21T10:15:00+00:00')).toBe(true);
    expect(new RegExp(deal.properties!.closed_at.pattern!).test('2026-11-21T10:15:00')).toBe(false);
    const contact = resolve({ $ref: '#/components/schemas/UpdateContactDto' });
    expect(contact.additionalProperties).toBe(false);
  });

  it('each path answers its undocumented methods with 405 and an Allow header naming the documented ones', async () => {
    const failures: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      const documented = METHODS.filter((m) => item[m]);
      const url = path.replace(/\{([^}]+)\}/g, (_, name: string) =>
        name === 'object' ? 'contact' : name === 'alias' ? 'x' : name === 'segment' ? 'contact' : '1',
      );
      for (const m of METHODS.filter((x) => !documented.includes(x))) {
        // `/api/assets/1:x` is also an id under `/api/assets/{id}`, `/api/fields/contact` under `/api/fields/{id}`: that operation answers.
        const servedElsewhere = Object.entries(doc.paths).some(([other, o]) => other !== path && o[m] && templateMatches(other, url));
        if (servedElsewhere) continue;
        const res = await app.http[m](url).set('Authorization', admin);
        const allow = (res.headers.allow ?? '').split(/,\s*/).filter(Boolean).sort();
        if (res.status !== 405 || (res.body as { error?: { code?: string } }).error?.code !== 'method_not_allowed')
          failures.push(`${m.toUpperCase()} ${url}: ${res.status}`);
        else {
          // Every documented operation whose path template matches this URL (`/api/notifications/read-all` is also an {id}).
          const expected = [
            ...new Set(
              Object.entries(doc.paths)
                .filter(([t]) => templateMatches(t, url))
                .flatMap(([, o]) => METHODS.filter((x) => o[x]).map((x) => x.toUpperCase())),
            ),
          ].sort();
          if (JSON.stringify(allow) !== JSON.stringify(expected)) failures.push(`${m.toUpperCase()} ${url}: Allow ${allow} but documented ${expected}`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('every list accepts exactly the parameters it documents, and each documented orderBy and filter value', async () => {
    const lists = operations().filter(({ method, op }) => method === 'get' && (op.parameters ?? []).some((p) => p.in === 'query' && p.name === 'orderBy'));
    expect(lists.length).toBeGreaterThanOrEqual(14);
    const failures: string[] = [];
    for (const { path, op } of lists) {
      const url = path
        .replace('/api/fields/{id}', '/api/fields/contact')
        .replace('/api/webhooks/{id}', `/api/webhooks/${webhookFixture}`)
        .replace('{id}', String(fixtures.campaigns));
      const documented = (op.parameters ?? []).filter((p) => p.in === 'query');
      const refused = await app.http.get(url).query({ undocumentedParameter: '1' }).set('Authorization', admin);
      const allowed =
        /allowed: (.*)$/.exec((refused.body as { error?: { details?: { message: string }[] } }).error?.details?.[0]?.message ?? '')?.[1]?.split(', ') ?? [];
      if (refused.status !== 400) failures.push(`GET ${url}?undocumentedParameter=1: ${refused.status}`);
      if (!documented.some((p) => p.name === 'search')) {
        // The name is known to every list, but a list without search refuses a search term.
        const search = await app.http.get(url).query({ search: 'x' }).set('Authorization', admin);
        if (search.status !== 400) failures.push(`GET ${url}?search=x: ${search.status}, yet the document has no search`);
        allowed.splice(allowed.indexOf('search'), allowed.includes('search') ? 1 : 0);
      }
      if (JSON.stringify([...allowed].sort()) !== JSON.stringify(documented.map((p) => p.name).sort())) {
        failures.push(`GET ${url}: the server takes ${allowed.join(', ')}; the document says ${documented.map((p) => p.name).join(', ')}`);
      }
      for (const p of documented) {
        for (const value of resolve(p.schema).enum ?? (resolve(p.schema).type === 'boolean' ? [true, false] : [])) {
          const res = await app.http
            .get(url)
            .query({ [p.name]: String(value) })
            .set('Authorization', admin);
          if (res.status !== 200) failures.push(`GET ${url}?${p.name}=${value}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
          else {
            const problem = check(path, 'get', op, res);
            if (problem) failures.push(`GET ${url}?${p.name}=${value}: ${problem}`);
          }
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('generated requests are answered with a documented status and a body matching the documented schema', async () => {
    const failures: string[] = [];
    // Deletes last, so that the other operations meet the fixtures.
    const ops = operations().sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'));
    for (const { path, method, op } of ops) {
      const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
      const pathArb = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, pathParamArb(path, p)]))) as fc.Arbitrary<Record<string, string>>;
      const content = op.requestBody?.content ?? {};
      const mediaType = content['application/json'] ? 'application/json' : Object.keys(content)[0];
      const body = mediaType ? bodyArb(content[mediaType].schema) : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(pathArb, queryArb(op), body, authArb(op), async (params, query, payload, auth) => {
          const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => params[name]);
          let req = app.http[method](url).query(query);
          if (auth) req = req.set('Authorization', auth);
          if (mediaType === 'multipart/form-data') {
            for (const [k, v] of Object.entries((payload as Record<string, unknown>) ?? {})) {
              if (k === 'file') req = req.attach('file', Buffer.from('hello contract'), 'contract.txt');
              else if (v !== null && v !== undefined && typeof v !== 'object') req = req.field(k, String(v));
            }
          } else if (mediaType && payload !== undefined) {
            req = req.set('Content-Type', 'application/json').send(JSON.stringify(payload));
          }
          const res = await req;
          const problem = check(path, method, op, res);
          if (problem)
            failures.push(
              `${method.toUpperCase()} ${url}?${new URLSearchParams(query)} ${payload === undefined ? '' : JSON.stringify(payload).slice(0, 200)} → ${problem}`,
            );
        }),
        { numRuns: 12, seed: 17 },
      );
    }
    expect(failures.slice(0, 40)).toEqual([]);
  }, 600_000);
});
