/**
 * Hostile input over every route the server lists in GET /api/endpoints: an authorization matrix,
 * hostile path ids, property-based fuzzing (fast-check) of bodies built from the OpenAPI request
 * schemas and of list parameters, and raw protocol abuse. The invariants: never a 500, always the
 * error shape, and a refused request changes nothing in the database.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { startApp, type TestApp } from './support/app.js';
import { PERMISSIONS } from '../src/common/route-access.js';
import { adminToken, tokenFor } from './support/fixtures.js';

interface Route {
  method: string;
  path: string;
  permission: string;
}

type Schema = { type?: string; properties?: Record<string, Schema>; items?: Schema; $ref?: string; enum?: unknown[]; format?: string; allOf?: Schema[] };

const HOSTILE_IDS = [
  '0',
  '-1',
  '1.5',
  '2147483648',
  '99999999999999999999999',
  'abc',
  "1' OR '1'='1",
  '1;DROP TABLE contacts',
  '%00',
  '..%2F..%2Fetc%2Fpasswd',
  '%2e%2e%2f%2e%2e%2f',
  '%E0%A4%A',
  'null',
  '1e3',
  '0x10',
  '%20%201',
  '${jndi:ldap://x}',
  'x'.repeat(3000),
];

const INJECTIONS = [
  "' OR 1=1 --",
  '%',
  '_',
  '\\',
  "'; DROP TABLE contacts; --",
  '{"$gt":""}',
  '(select pg_sleep(5))',
  'id desc, (select 1)',
  '\u0000',
  '💥'.repeat(50),
  'a'.repeat(500),
];

function isErrorShape(body: unknown, status: number): boolean {
  const e = (body as { error?: { code?: unknown; message?: unknown; status?: unknown } })?.error;
  return !!e && typeof e.code === 'string' && typeof e.message === 'string' && e.status === status;
}

describe('hostile input over every route', () => {
  let app: TestApp;
  let admin: string;
  let routes: Route[];
  let schemas: Record<string, Schema>;
  let paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { schema?: Schema }> } }>>;
  const fixtures: Record<string, number> = {};
  let fingerprint = '';

  /** One string that changes whenever any row of any table (but token bookkeeping) changes. */
  async function dbFingerprint(): Promise<string> {
    const tables = await app.sql<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
         AND table_name NOT IN ('api_tokens', 'oauth_access_tokens', 'migrations', 'event_feed_state', 'webhook_dispatch_cursor', 'event_transactions', 'api_usage_hourly', 'scoring_state', 'workflow_trigger_state', 'tracked_segment_queue', 'tracked_definition_deltas') ORDER BY table_name`,
    );
    // api_usage_hourly counts every request by design (the console's usage page), refused ones included;
    // scoring_state and workflow_trigger_state are the scoring applier's and the workflow triggers'
    // cursors over the feed, moved in the background as the sequencer numbers events.
    // The event sequencer numbers committed events in the background (event_transactions and
    // event_feed_state): that is not a change made by the request under test, an event row is.
    const row = (table: string) => (table === 'events' ? '(x.id, x.type, x.data, x.previous)' : 'x');
    // The intake appends to the definitions' deltas, folded into the definitions in the background:
    // the definitions are fingerprinted as what a read answers (folded or not, the same).
    const source = (table: string) =>
      table === 'tracked_event_definitions'
        ? `(SELECT name, sum(count) AS count, min(first_seen_at) AS first_seen_at, max(last_seen_at) AS last_seen_at FROM (
             SELECT name, count, first_seen_at, last_seen_at FROM tracked_event_definitions
             UNION ALL SELECT name, count, first_at, last_at FROM tracked_definition_deltas) u GROUP BY name)`
        : `"${table}"`;
    const parts = tables.map(
      (t) =>
        `SELECT '${t.table_name}:' || count(*) || ':' || coalesce(md5(string_agg(${row(t.table_name)}::text, '|' ORDER BY ${row(t.table_name)}::text)), '') AS f FROM ${source(t.table_name)} x`,
    );
    const rows = await app.sql<{ f: string }>(parts.join(' UNION ALL '));
    return rows.map((r) => r.f).join(',');
  }

  function concrete(route: Route, pick: (param: string) => string): string {
    return route.path.replace(/:([A-Za-z]+)/g, (_, p: string) => pick(p));
  }

  /** The fixture id for a path parameter, by the resource the path names. */
  function fixtureFor(route: Route, param: string): string {
    if (param === 'object') return 'contact';
    if (param === 'segment') return 'contact';
    if (param === 'contactId') return String(fixtures.contacts);
    if (param === 'campaignId') return String(fixtures.campaigns);
    const resource = route.path.split('/')[2].replace('_', '-');
    return String(fixtures[resource] ?? 1);
  }

  function send(method: string, path: string, auth: string | null, body?: unknown) {
    let r = app.http[method.toLowerCase() as 'get'](path);
    if (auth) r = r.set('Authorization', auth);
    if (body !== undefined) r = r.send(body as object);
    return r;
  }

  beforeAll(async () => {
    // API role: accepted jobs are queued in Redis but run by no worker here, so the database changes only
    // through the HTTP requests under test (the job processors have their own suites).
    app = await startApp({ role: 'api', env: { RATE_LIMIT_ANONYMOUS: '1000000', RATE_LIMIT_ENTERPRISE: '1000000' } });
    admin = await adminToken(app);
    routes = (await app.http.get('/api/endpoints').set('Authorization', admin)).body.endpoints;
    const doc = (await app.http.get('/api/docs-json')).body;
    schemas = doc.components.schemas;
    paths = doc.paths;

    const create = async (path: string, body: object) => {
      const res = await app.http.post(path).set('Authorization', admin).send(body);
      if (res.status !== 201) throw new Error(`fixture ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return (Object.values(res.body)[0] as { id: number }).id;
    };
    fixtures.contacts = await create('/api/contacts/new', { name: 'Fixture', email: 'fixture@example.com' });
    const has = (p: string) => routes.some((r) => r.path === p);
    if (has('/api/campaigns/new')) fixtures.campaigns = await create('/api/campaigns/new', { name: 'Fixture campaign' });
    if (has('/api/companies/new')) fixtures.companies = await create('/api/companies/new', { name: 'Fixture company', domain: 'fixture-company.example' });
    if (has('/api/segments/new')) fixtures.segments = await create('/api/segments/new', { name: 'Fixture segment', type: 'static' });
    if (has('/api/deals/new')) fixtures.deals = await create('/api/deals/new', { title: 'Fixture deal', value: 10, contact_id: fixtures.contacts });
    if (has('/api/activities/new'))
      fixtures.activities = await create('/api/activities/new', { type: 'call', subject: 'Fixture', contact_id: fixtures.contacts });
    if (has('/api/categories/new')) fixtures.categories = await create('/api/categories/new', { title: 'Fixture category', bundle: 'global' });
    if (has('/api/point-groups/new'))
      fixtures['point-groups'] = await create('/api/point-groups/new', { name: 'Fixture group', minimumPoints: 0, maximumPoints: 10 });
    if (has('/api/fields/:object/new')) fixtures.fields = await create('/api/fields/contact/new', { label: 'Fixture field', type: 'text' });
    if (has('/api/reports/new')) fixtures.reports = await create('/api/reports/new', { name: 'Fixture report', type: 'sales', schedule: 'daily' });
    if (has('/api/text-messages/new')) fixtures['text-messages'] = await create('/api/text-messages/new', { content: 'Hi', recipient: '+14155550100' });
    fingerprint = await dbFingerprint();
  });
  afterAll(async () => app?.stop());

  it('lists a sane route table', () => {
    expect(routes.length).toBeGreaterThan(50);
  });

  it('authorization matrix: no token, a bad token and an expired token → 401; a token without the permission → 403', async () => {
    const expired = await tokenFor(app, '*', { user: 'expired@example.com', expires: '2021-01-01T00:00:00Z' });
    const others = await tokenFor(app, 'contacts:read', { user: 'others@example.com' });
    const notificationsOnly = await tokenFor(app, 'notifications:read', { user: 'others@example.com', name: 'n' });
    // Every permission a token can hold except `*` (route-access.ts): a `*` route must still refuse it.
    const everythingButStar = await tokenFor(app, PERMISSIONS.filter((p) => p !== '*').join(','), { user: 'others@example.com', name: 'all-but-star' });
    fingerprint = await dbFingerprint(); // the CLI created users for these tokens
    const failures: string[] = [];
    for (const route of routes) {
      if (!route.permission.includes(':') && route.permission !== '*' && route.permission !== 'authenticated') continue; // public routes
      const path = concrete(route, (p) => fixtureFor(route, p));
      const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? {} : undefined;
      const wrong = route.permission === '*' ? everythingButStar : route.permission === 'contacts:read' ? notificationsOnly : others;
      for (const [label, auth, status] of [
        ['no token', null, 401],
        ['bad token', 'Bearer sf_definitely-not-a-token-0000000000000', 401],
        ['expired token', expired, 401],
        // Any valid token may call an "authenticated" route.
        ...(route.permission === 'authenticated' ? [] : ([['token without the permission', wrong, 403]] as const)),
      ] as const) {
        const res = await send(route.method, path, auth, body);
        if (res.status !== status || !isErrorShape(res.body, status))
          failures.push(`${route.method} ${path} with ${label}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await dbFingerprint()).toBe(fingerprint);
  });

  it('hostile path ids never produce a 500 and always the error shape', async () => {
    const failures: string[] = [];
    for (const route of routes) {
      if (!route.path.includes(':')) continue;
      for (const hostile of HOSTILE_IDS) {
        const path = concrete(route, () => hostile);
        const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? {} : undefined;
        const res = await send(route.method, path, admin, body);
        if (res.status >= 500 || (res.status >= 400 && !isErrorShape(res.body, res.status))) {
          failures.push(`${route.method} ${path.slice(0, 120)}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(await dbFingerprint()).toBe(fingerprint);
  });

  function resolve(schema: Schema | undefined): Schema | undefined {
    if (!schema) return undefined;
    if (schema.$ref) return resolve(schemas[schema.$ref.split('/').pop()!]);
    if (schema.allOf?.length) return resolve(schema.allOf[0]);
    return schema;
  }

  /** A value for a property: usually of the documented type but often hostile. */
  function valueArb(schema: Schema | undefined): fc.Arbitrary<unknown> {
    const s = resolve(schema) ?? {};
    const hostile = fc.oneof(
      fc.constantFrom(
        null,
        '',
        ' ',
        -1,
        0,
        1e308,
        -1e308,
        Number.MAX_SAFE_INTEGER + 2,
        'true',
        '2026-02-30T25:61:00Z',
        '2026-11-21T10:00:00',
        '1'.repeat(2000),
        [],
        {},
        [[]],
        { $gt: '' },
      ),
      fc.constantFrom(...INJECTIONS),
      fc.string({ maxLength: 40 }),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.array(fc.string({ maxLength: 8 }), { maxLength: 4 }),
    );
    const typed: fc.Arbitrary<unknown> =
      s.enum && s.enum.length
        ? fc.constantFrom(...s.enum)
        : s.type === 'string'
          ? s.format === 'email'
            ? fc.emailAddress()
            : s.format === 'date-time'
              ? fc.date({ min: new Date('1970-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString())
              : fc.string({ maxLength: 60 })
          : s.type === 'integer' || s.type === 'number'
            ? fc.integer({ min: -5, max: 1000 })
            : s.type === 'boolean'
              ? fc.boolean()
              : s.type === 'array'
                ? fc.array(valueArb(s.items), { maxLength: 3 })
                : fc.dictionary(fc.string({ maxLength: 10 }), fc.oneof(fc.string({ maxLength: 10 }), fc.integer()), { maxKeys: 3 });
    return fc.oneof({ weight: 3, arbitrary: typed }, { weight: 2, arbitrary: hostile });
  }

  function bodyArb(schema: Schema | undefined): fc.Arbitrary<unknown> {
    const s = resolve(schema);
    const props = s?.properties ?? {};
    const known = fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, valueArb(v)])), { requiredKeys: [] });
    return fc.oneof(
      { weight: 6, arbitrary: known },
      { weight: 1, arbitrary: fc.tuple(known, fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue()).map(([b, k, v]) => ({ ...(b as object), [k]: v })) },
      { weight: 1, arbitrary: fc.jsonValue() },
      {
        weight: 1,
        arbitrary: fc.constantFrom({ __proto__: { admin: true } }, JSON.parse('{"__proto__": {"polluted": true}}'), {
          constructor: { prototype: { polluted: true } },
        }),
      },
    );
  }

  it('fuzzed bodies on every write route: never a 500, always the error shape, and a refused request changes nothing', async () => {
    const failures: string[] = [];
    const writeRoutes = routes.filter((r) => ['POST', 'PUT', 'PATCH'].includes(r.method) && r.permission !== 'public' && !r.path.includes('/account/tokens'));
    for (const route of writeRoutes) {
      const openApiPath = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
      const schema = paths[openApiPath]?.[route.method.toLowerCase()]?.requestBody?.content?.['application/json']?.schema;
      const path = concrete(route, (p) => fixtureFor(route, p));
      await fc.assert(
        fc.asyncProperty(bodyArb(schema), async (body) => {
          const res = await app.http[route.method.toLowerCase() as 'post'](path)
            .set('Authorization', admin)
            .set('Content-Type', 'application/json')
            .send(JSON.stringify(body));
          if (res.status >= 500 || (res.status >= 400 && !isErrorShape(res.body, res.status))) {
            failures.push(`${route.method} ${path} ${JSON.stringify(body).slice(0, 200)} → ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
            return;
          }
          const now = await dbFingerprint();
          if (res.status >= 400 && now !== fingerprint) failures.push(`${route.method} ${path} refused with ${res.status} but changed the database`);
          fingerprint = now;
        }),
        { numRuns: 12, seed: 42 },
      );
    }
    expect(failures).toEqual([]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  }, 180_000);

  it('fuzzed and injected list parameters: never a 500', async () => {
    const failures: string[] = [];
    // A list is a GET whose documented answer carries `total`.
    const isList = (r: Route) => {
      const op = paths[r.path.replace(/:([A-Za-z]+)/g, '{$1}')]?.get as
        { responses?: Record<string, { content?: Record<string, { schema?: Schema }> }> } | undefined;
      const schema = resolve(op?.responses?.['200']?.content?.['application/json']?.schema);
      return !!schema?.properties && 'total' in schema.properties;
    };
    const lists = routes.filter((r) => r.method === 'GET' && r.permission.endsWith(':read') && isList(r));
    expect(lists.length).toBeGreaterThan(10);
    const params = [
      'search',
      'page',
      'limit',
      'orderBy',
      'orderByDir',
      'status',
      'type',
      'isPublished',
      'isRead',
      'bundle',
      'object',
      'campaignId',
      'contact_id',
    ];
    for (const route of lists) {
      const path = concrete(route, (p) => fixtureFor(route, p));
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(fc.constantFrom(...params), fc.oneof(fc.constantFrom(...INJECTIONS), fc.string({ maxLength: 20 }), fc.integer().map(String)), {
            maxKeys: 4,
          }),
          async (query) => {
            const res = await app.http.get(path).query(query).set('Authorization', admin);
            if (res.status >= 500 || (res.status >= 400 && !isErrorShape(res.body, res.status))) {
              failures.push(`GET ${path} ${JSON.stringify(query)} → ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
            }
          },
        ),
        { numRuns: 15, seed: 7 },
      );
      // Injection in ordering is refused, not executed.
      const res = await app.http.get(path).query({ orderBy: 'id; DROP TABLE contacts' }).set('Authorization', admin);
      if (res.status !== 400) failures.push(`GET ${path} accepted an injected orderBy: ${res.status}`);
    }
    expect(failures).toEqual([]);
    expect(await dbFingerprint()).toBe(fingerprint);
  });

  function raw(method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<{ status: number; body: string }> {
    return new Promise((resolvePromise, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: app.port, method, path, headers }, (res) => {
        let data = '';
        res.on('data', (c: Buffer) => (data += c.toString()));
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body: data }));
      });
      req.on('error', reject);
      if (body !== undefined) req.write(body);
      req.end();
    });
  }

  it('invalid UTF-8, deeply nested JSON, oversized headers and bodies get clear errors', async () => {
    const json = { 'Content-Type': 'application/json', Authorization: admin };
    const badUtf8 = await raw('POST', '/api/contacts/new', json, Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]));
    expect(badUtf8.status).toBe(400);
    expect(isErrorShape(JSON.parse(badUtf8.body), 400)).toBe(true);

    const deep = '{"name":"x","email":"deep@example.com","fields":' + '{"a":'.repeat(5000) + '1' + '}'.repeat(5000) + '}';
    const nested = await raw('POST', '/api/contacts/new', json, deep);
    expect([400, 413]).toContain(nested.status);
    expect(isErrorShape(JSON.parse(nested.body), nested.status)).toBe(true);

    // Just over Node's 16 KiB header limit (a much larger one is cut off while the client still writes).
    const bigHeader = await raw('GET', '/api/contacts', { Authorization: admin, 'X-Filler': 'x'.repeat(17 * 1024) });
    expect([413, 431]).toContain(bigHeader.status);
    if (bigHeader.body) expect(isErrorShape(JSON.parse(bigHeader.body), bigHeader.status)).toBe(true);

    const huge = await raw('POST', '/api/contacts/new', json, JSON.stringify({ name: 'x', email: 'huge@example.com', title: 'y'.repeat(2 * 1024 * 1024) }));
    expect(huge.status).toBe(413);
    expect(isErrorShape(JSON.parse(huge.body), 413)).toBe(true);

    const lying = await raw('POST', '/api/contacts/new', { ...json, 'Content-Encoding': 'gzip' }, '{"name":"x"}');
    expect(lying.status).toBeLessThan(500);
    expect(await dbFingerprint()).toBe(fingerprint);
  });

  it('bytes that are not UTF-8 inside a JSON string, a form value or a multipart field, and reserved multipart field names, are 400s that change nothing', async () => {
    const json = { 'Content-Type': 'application/json', Authorization: admin };
    const withFF = (before: string, after: string) => Buffer.concat([Buffer.from(before), Buffer.from([0xff]), Buffer.from(after)]);
    // Bodies that are valid apart from the one byte (each is a 201 with a proper letter in its place).
    for (const [path, body] of [
      ['/api/contacts/new', withFF('{"name":"Ada', '","email":"utf8-one@example.com"}')],
      ['/api/contacts/batch', withFF('{"mode":"create","items":[{"name":"Bob', '","email":"utf8-batch@example.com"}]}')],
      ['/api/categories/new', withFF('{"title":"Cat', '","bundle":"global"}')],
    ] as const) {
      const res = await raw('POST', path, json, body);
      expect({ path, status: res.status }).toEqual({ path, status: 400 });
      const parsed = JSON.parse(res.body) as { error: { code: string; details?: unknown[] } };
      expect(isErrorShape(parsed, 400)).toBe(true);
      expect(parsed.error.details).toEqual([{ field: 'body', message: 'must be valid UTF-8' }]);
    }
    // A form body (the OAuth token endpoint): a percent-encoding that is not UTF-8.
    const form = await raw(
      'POST',
      '/api/oauth/v2/token',
      { 'Content-Type': 'application/x-www-form-urlencoded' },
      'grant_type=client_credentials&client_id=a%FF&client_secret=x',
    );
    expect(form.status).toBe(400);

    // Multipart: the import upload (asset uploads are checked in their own suite).
    const boundary = 'hostileBoundary7MA4';
    const field = (name: string, value: Buffer | string) =>
      Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n`), Buffer.from(value), Buffer.from('\r\n')]);
    const upload = (...fields: Buffer[]) =>
      raw(
        'POST',
        '/api/imports',
        { 'Content-Type': `multipart/form-data; boundary=${boundary}`, Authorization: admin },
        Buffer.concat([
          field('object', 'contacts'),
          field('mode', 'create'),
          ...fields,
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\nContent-Type: text/csv\r\n\r\nname,email\nA,a@utf8.test\n\r\n--${boundary}--\r\n`,
          ),
        ]),
      );
    for (const name of ['__proto__', 'constructor', 'toString', 'valueOf']) {
      const res = await upload(field(name, 'x'));
      expect({ name, status: res.status }).toEqual({ name, status: 400 });
      expect((JSON.parse(res.body) as { error: { details: unknown[] } }).error.details).toContainEqual({ field: name, message: 'should not exist' });
    }
    const badMapping = await upload(field('mapping', withFF('{"name":"name","email":"e', 'mail"}')));
    expect(badMapping.status).toBe(400);
    expect((JSON.parse(badMapping.body) as { error: { details: unknown[] } }).error.details).toEqual([{ field: 'mapping', message: 'must be valid UTF-8' }]);
    expect(await dbFingerprint()).toBe(fingerprint);
  });

  it("keeps an idle keep-alive connection open past Node's 5 s default (HTTP_KEEP_ALIVE_TIMEOUT_MS, 65 s by default)", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; keepAlive: string | undefined; socket: Socket; reused: boolean }>((resolvePromise, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: app.port, path: '/health', agent }, (res) => {
          res.resume();
          res.on('end', () =>
            resolvePromise({
              status: res.statusCode ?? 0,
              keepAlive: String(res.headers['keep-alive']),
              socket: req.socket as Socket,
              reused: req.reusedSocket,
            }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const first = await get();
      expect(first.status).toBe(200);
      expect(first.keepAlive).toBe('timeout=65');
      let closed = false;
      first.socket.once('close', () => (closed = true));
      await new Promise((r) => setTimeout(r, 6500));
      expect(closed).toBe(false);
      const second = await get();
      expect(second.status).toBe(200);
      expect(second.reused).toBe(true);
      expect(second.socket).toBe(first.socket);
    } finally {
      agent.destroy();
    }
  }, 20_000);

  it('a client that holds a connection open (headers half sent) does not hold up a SIGTERM past the grace', async () => {
    const own = await startApp({ role: 'api', env: { SHUTDOWN_GRACE_MS: '2000' } });
    const socket = connect(own.port, '127.0.0.1');
    try {
      await new Promise<void>((resolvePromise, reject) => {
        socket.once('connect', () => resolvePromise());
        socket.once('error', reject);
      });
      socket.on('error', () => undefined);
      socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      expect(await own.kill('SIGTERM')).toBe(0);
      // Without closing the connections left after the grace, the exit waited for the headers timeout (66 s).
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      socket.destroy();
      await own.stop();
    }
  }, 120_000);
});
