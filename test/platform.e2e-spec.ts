import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDatabase, expectError, ROOT, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { reviewedSnapshot } from './support/snapshot.js';

describe('platform: system routes, errors, authentication', () => {
  let app: TestApp;
  let admin: string;

  beforeAll(async () => {
    app = await startApp({ env: { BODY_LIMIT_BYTES: '65536', METRICS_TOKEN: 'scrape-secret-123' } });
    admin = await adminToken(app);
  });
  afterAll(async () => app?.stop());

  describe('system', () => {
    it('GET /health reports database and Redis without a token', async () => {
      const res = await app.http.get('/health');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', database: { status: 'up' }, redis: { status: 'up' }, queue: { mode: 'bullmq' } });
    });

    it('GET /api/version answers version, apiVersion and commit to any valid token', async () => {
      const res = await app.http.get('/api/version').set('Authorization', admin);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ version: expect.any(String), apiVersion: '1', commit: expect.any(String) });
      const narrow = await tokenFor(app, 'notifications:read', { user: 'narrow@example.com' });
      expect((await app.http.get('/api/version').set('Authorization', narrow)).status).toBe(200);
      expectError(await app.http.get('/api/version'), 401, 'unauthorized');
    });

    it('GET /api/endpoints lists every live route with its permission, and matches the reviewed snapshot', async () => {
      const res = await app.http.get('/api/endpoints').set('Authorization', admin);
      expect(res.status).toBe(200);
      const endpoints = res.body.endpoints as { method: string; path: string; permission: string; credential?: string }[];
      expect(endpoints).toEqual(expect.arrayContaining([{ method: 'POST', path: '/api/contacts/new', permission: 'contacts:write' }]));
      for (const e of endpoints) {
        expect(e.permission).toMatch(/^(public|session|authenticated|signature|\*|[a-zA-Z]+:(read|write|delete))$/);
        if ('credential' in e) expect(e.credential).toMatch(/^(token-or-basic|write-key|metrics-token|sms-signature|session|signed-link)$/);
      }
      // Every credential is in the table: the metrics token, the signed SMS callbacks, the queue dashboard's login, an export's signed download link, the tracking intake's write key.
      expect(endpoints).toEqual(
        expect.arrayContaining([
          { method: 'GET', path: '/metrics', permission: '*', credential: 'metrics-token' },
          { method: 'POST', path: '/api/text-messages/delivery-reports', permission: 'signature', credential: 'sms-signature' },
          { method: 'GET', path: '/api/admin/queues', permission: '*', credential: 'token-or-basic' },
          { method: 'PUT', path: '/api/admin/queues/*path', permission: '*', credential: 'token-or-basic' },
          { method: 'GET', path: '/api/exports/:id/download', permission: 'signature', credential: 'signed-link' },
          { method: 'POST', path: '/api/ingest/v1/batch', permission: 'tracking:write', credential: 'write-key' },
        ]),
      );
      // A change in who can reach a route shows up as a diff here. Outside CI, UPDATE_SNAPSHOTS=1
      // rewrites it (and a missing one is written); in CI a missing or different snapshot fails.
      expect(endpoints).toEqual(reviewedSnapshot(join(ROOT, 'test', 'endpoints.snapshot.json'), endpoints));
    });

    it('GET /api/endpoints needs the * permission', async () => {
      const limited = await tokenFor(app, 'contacts:read', { user: 'limited@example.com' });
      expectError(await app.http.get('/api/endpoints').set('Authorization', limited), 403, 'forbidden');
    });

    it('serves the OpenAPI document and a browsable reference', async () => {
      const html = await app.http.get('/api/docs/');
      expect(html.status).toBe(200);
      expect(html.headers['content-type']).toMatch(/html/);
      const doc = await app.http.get('/api/docs-json');
      expect(doc.status).toBe(200);
      expect(doc.body.openapi).toMatch(/^3\./);
      const op = doc.body.paths['/api/contacts/{id}'].get;
      expect(op['x-permission']).toBe('contacts:read');
      expect(op.responses['200'].content['application/json'].schema.properties.contact.$ref).toMatch(/ContactRecordDto/);
      const viaAccept = await app.http.get('/api/docs').set('Accept', 'application/json');
      expect(viaAccept.body.openapi).toMatch(/^3\./);
    });
  });

  describe('metrics', () => {
    it('serves Prometheus metrics to the metrics token or a * token only', async () => {
      await app.http.get('/api/contacts').set('Authorization', admin);
      const scraped = await app.http.get('/metrics').set('Authorization', 'Bearer scrape-secret-123');
      expect(scraped.status).toBe(200);
      expect(scraped.headers['content-type']).toMatch(/text\/plain/);
      expect(scraped.text).toMatch(/http_requests_total\{method="GET",route="\/api\/contacts",status="200"\} \d+/);
      expect(scraped.text).toMatch(/http_request_duration_seconds_bucket/);
      expect(scraped.text).toMatch(/process_resident_memory_bytes/);
      expect((await app.http.get('/metrics').set('Authorization', admin)).status).toBe(200);
      expectError(await app.http.get('/metrics'), 401, 'unauthorized');
      expectError(await app.http.get('/metrics').set('Authorization', 'Bearer wrong'), 401, 'unauthorized');
      const limited = await tokenFor(app, 'contacts:read', { user: 'metrics-limited@example.com' });
      expectError(await app.http.get('/metrics').set('Authorization', limited), 403, 'forbidden');
    });
  });

  describe('error shape', () => {
    it('unknown route → 404 not_found', async () => {
      expectError(await app.http.get('/api/nothing-here').set('Authorization', admin), 404, 'not_found');
      expectError(await app.http.get('/'), 404, 'not_found');
    });

    it('known path, wrong method → 405 with Allow', async () => {
      const res = await app.http.delete('/api/contacts').set('Authorization', admin);
      expectError(res, 405, 'method_not_allowed');
      expect(res.headers.allow).toContain('GET');
      expect(res.headers.allow).toContain('POST');
    });

    it('malformed JSON → 400 validation_failed without internals', async () => {
      const res = await app.http.post('/api/contacts').set('Authorization', admin).set('Content-Type', 'application/json').send('{"name": ');
      const err = expectError(res, 400, 'validation_failed');
      expect(JSON.stringify(res.body)).not.toMatch(/node_modules|at \w+ \(|\.js:\d+/);
      expect(err.message).toMatch(/JSON/);
    });

    it('a JSON array or scalar body → 400', async () => {
      expectError(
        await app.http
          .post('/api/contacts')
          .set('Authorization', admin)
          .send([{ name: 'x' }]),
        400,
        'validation_failed',
      );
      expectError(
        await app.http.post('/api/contacts').set('Authorization', admin).set('Content-Type', 'application/json').send('"x"'),
        400,
        'validation_failed',
      );
    });

    it('body over the limit → 413 payload_too_large', async () => {
      const big = { name: 'x', email: 'big@example.com', title: 'y'.repeat(70000) };
      expectError(await app.http.post('/api/contacts').set('Authorization', admin).send(big), 413, 'payload_too_large');
    });

    it('wrong content type → 415 unsupported_media_type', async () => {
      const res = await app.http.post('/api/contacts').set('Authorization', admin).set('Content-Type', 'text/plain').send('name=x');
      expectError(res, 415, 'unsupported_media_type');
      const xml = await app.http.post('/api/contacts').set('Authorization', admin).set('Content-Type', 'application/xml').send('<a/>');
      expectError(xml, 415, 'unsupported_media_type');
    });

    it('every response carries a request id; a sane client id is echoed', async () => {
      const res = await app.http.get('/api/contacts').set('Authorization', admin).set('X-Request-Id', 'abc-123');
      expect(res.headers['x-request-id']).toBe('abc-123');
      const other = await app.http.get('/api/contacts').set('Authorization', admin).set('X-Request-Id', 'bad id with spaces\u00ff');
      expect(other.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('sends security headers', async () => {
      const res = await app.http.get('/health');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['x-powered-by']).toBeUndefined();
    });
  });

  describe('authentication and permissions', () => {
    it('401 without a token, with the error shape and WWW-Authenticate', async () => {
      const res = await app.http.get('/api/contacts');
      expectError(res, 401, 'unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    });

    it('401 for a malformed header, an unknown token, and a token in the query string', async () => {
      expectError(await app.http.get('/api/contacts').set('Authorization', 'Basic dXNlcjpwYXNz'), 401, 'unauthorized');
      expectError(await app.http.get('/api/contacts').set('Authorization', 'Bearer sf_not-a-real-token-aaaaaaaaaaaaaaaaaaaa'), 401, 'unauthorized');
      expectError(await app.http.get('/api/contacts').set('Authorization', 'Bearer'), 401, 'unauthorized');
      const secret = admin.slice('Bearer '.length);
      expectError(await app.http.get('/api/contacts').query({ access_token: secret }), 401, 'unauthorized');
    });

    it('401 for an expired token', async () => {
      const expired = await app.token('*', { user: 'expired@example.com', expires: '2020-01-01T00:00:00Z' });
      expectError(await app.http.get('/api/contacts').set('Authorization', `Bearer ${expired}`), 401, 'unauthorized');
    });

    it('403 for a token without the route permission', async () => {
      const t = await tokenFor(app, 'contacts:read', { user: 'reader@example.com' });
      expect((await app.http.get('/api/contacts').set('Authorization', t)).status).toBe(200);
      expectError(await app.http.delete('/api/contacts/1').set('Authorization', t), 403, 'forbidden');
    });

    it('a token revoked with the CLI gets 401 at once, even though it was cached', async () => {
      const secret = await app.token('contacts:read', { user: 'revoke-me@example.com', name: 'to-revoke' });
      const auth = `Bearer ${secret}`;
      expect((await app.http.get('/api/contacts').set('Authorization', auth)).status).toBe(200);
      const list = await app.cli(['token:list', '--user', 'revoke-me@example.com']);
      const id = list.stdout.trim().split('\n')[0].split('\t')[0];
      const revoked = await app.cli(['token:revoke', '--id', id]);
      expect(revoked.code).toBe(0);
      expectError(await app.http.get('/api/contacts').set('Authorization', auth), 401, 'unauthorized');
    });

    it('records when a token was last used', async () => {
      const rows = await app.sql<{ last_used_at: Date | null }>(`SELECT last_used_at FROM api_tokens ORDER BY id LIMIT 1`);
      expect(rows[0].last_used_at).not.toBeNull();
      const stored = await app.sql<{ token_hash: string }>(`SELECT token_hash FROM api_tokens`);
      for (const r of stored) expect(r.token_hash).toMatch(/^[0-9a-f]{64}$/);
    });
  });
});

describe('platform: plan limits', () => {
  let app: TestApp;
  let second: TestApp;

  beforeAll(async () => {
    app = await startApp({ env: { RATE_LIMIT_BASIC: '5', RATE_LIMIT_PROFESSIONAL: '8', RATE_LIMIT_ANONYMOUS: '4' } });
    second = await startApp({ shareWith: app, env: { RATE_LIMIT_BASIC: '5', RATE_LIMIT_PROFESSIONAL: '8', RATE_LIMIT_ANONYMOUS: '4' } });
  });
  afterAll(async () => {
    await second?.stop();
    await app?.stop();
  });

  it('counts per account across tokens and instances: limit successes, then 429 with Retry-After', async () => {
    const a = await tokenFor(app, '*', { user: 'basic@example.com', plan: 'basic' });
    const b = await tokenFor(app, '*', { user: 'basic@example.com', name: 'second token' });
    const statuses: number[] = [];
    let last: { status: number; body: unknown; headers: Record<string, string> } | undefined;
    for (let i = 0; i < 7; i++) {
      const target = i % 2 === 0 ? app : second;
      last = await target.http.get('/api/contacts').set('Authorization', i % 3 === 0 ? a : b);
      statuses.push(last.status);
      if (i === 0) {
        expect(last.headers['x-ratelimit-limit']).toBe('5');
        expect(last.headers['x-ratelimit-remaining']).toBe('4');
        expect(Number(last.headers['x-ratelimit-reset'])).toBeGreaterThan(3000);
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const err = expectError(last!, 429, 'rate_limited');
    expect(err.message).toMatch(/Rate limit/);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
    expect(last!.headers['x-ratelimit-remaining']).toBe('0');
  });

  it('enforces one limit exactly under parallel requests on two instances', async () => {
    const t = await tokenFor(app, '*', { user: 'pro@example.com', plan: 'professional' });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? app : second).http.get('/api/contacts').set('Authorization', t)));
    const ok = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429).length;
    expect([ok, limited]).toEqual([8, 12]);
  });

  it('other accounts have their own counters', async () => {
    const other = await tokenFor(app, '*', { user: 'someone-else@example.com', plan: 'basic' });
    expect((await app.http.get('/api/contacts').set('Authorization', other)).status).toBe(200);
  });

  it('limits requests without a valid token per client address', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await app.http.get('/api/contacts').set('Authorization', 'Bearer sf_guess' + i)).status);
    expect(statuses.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(statuses.slice(4)).toEqual([429, 429]);
  });
});

describe('platform: logs and CORS', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ noRedis: true, env: { LOG_LEVEL: 'debug', CORS_ORIGINS: 'https://app.example.com' } });
  });
  afterAll(async () => app?.stop());

  it('writes structured JSON logs with the request id and never the credentials', async () => {
    const secret = await app.token('*');
    await app.http.get('/api/contacts').set('Authorization', `Bearer ${secret}`).set('X-Request-Id', 'log-check-1');
    await app.http.post('/api/oauth/v2/token').type('form').send({ grant_type: 'client_credentials', client_id: '1', client_secret: secret });
    await new Promise((r) => setTimeout(r, 200));
    const lines = app.logs
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const entries = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(entries.some((e) => e.requestId === 'log-check-1' && e.status === 200 && e.method === 'GET')).toBe(true);
    expect(app.logs.join('')).not.toContain(secret);
    expect(app.logs.join('')).not.toContain(secret.slice(3, 20));
  });

  it('answers CORS preflights for the configured origins only', async () => {
    const ok = await app.http.options('/api/contacts').set('Origin', 'https://app.example.com').set('Access-Control-Request-Method', 'POST');
    expect(ok.status).toBeLessThan(300);
    expect(ok.headers['access-control-allow-origin']).toBe('https://app.example.com');
    const other = await app.http.options('/api/contacts').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'POST');
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const exposed = await app.http.get('/health').set('Origin', 'https://app.example.com');
    expect(exposed.headers['access-control-expose-headers']).toContain('X-RateLimit-Remaining');
  });
});

describe('platform: start-up', () => {
  it('two instances starting together on an empty database apply the migrations once', async () => {
    const db = await createDatabase();
    try {
      const [a, b] = await Promise.all([
        startApp({ noRedis: true, env: { DATABASE_URL: db.url } }),
        startApp({ noRedis: true, env: { DATABASE_URL: db.url } }),
      ]);
      try {
        const rows = await a.sql<{ n: string }>(`SELECT count(*)::text AS n FROM migrations`);
        const files = readFileSync(join(ROOT, 'src/database/migrations/index.ts'), 'utf8').match(/^import \{ \w+ \}/gm) ?? [];
        expect(Number(rows[0].n)).toBe(files.length);
        expect((await b.http.get('/health')).status).toBe(200);
      } finally {
        await a.stop();
        await b.stop();
      }
    } finally {
      await db.drop();
    }
  });

  it('refuses to start on a bad setting, naming the variable', async () => {
    const child = spawn(process.execPath, ['dist/main.js'], { cwd: ROOT, env: { PATH: process.env.PATH, PORT: 'not-a-port' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((res) => child.on('exit', res));
    expect(code).toBe(78);
    expect(stderr).toMatch(/PORT/);
  });
});

describe('platform: admin CLI', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ noRedis: true });
  });
  afterAll(async () => app?.stop());

  it('creates and lists users', async () => {
    const created = await app.cli(['user:create', '--email', 'team@example.com', '--name', 'Team Lead', '--plan', 'professional', '--team', 'EMEA']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/user \d+ created/);
    const dup = await app.cli(['user:create', '--email', 'TEAM@example.com', '--name', 'Again']);
    expect(dup.code).toBe(64);
    const list = await app.cli(['user:list']);
    expect(list.stdout).toMatch(/team@example.com\tTeam Lead\tprofessional\tEMEA/);
  });

  it('token:create prints the secret last, and sets the plan when given', async () => {
    const r = await app.cli([
      'token:create',
      '--user',
      'new-user@example.com',
      '--name',
      'ci',
      '--permissions',
      'contacts:read,contacts:write',
      '--plan',
      'enterprise',
    ]);
    expect(r.code).toBe(0);
    const secret = r.stdout.trim().split('\n').pop()!;
    expect(secret).toMatch(/^sf_[A-Za-z0-9_-]{40,}$/);
    const res = await app.http.get('/api/contacts').set('Authorization', `Bearer ${secret}`);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('10000');
  });

  it('refuses unknown permissions, bad plans and missing options with a usage error', async () => {
    expect((await app.cli(['token:create', '--user', 'x@example.com', '--name', 'n', '--permissions', 'contacts:fly'])).code).toBe(64);
    expect((await app.cli(['token:create', '--user', 'x@example.com', '--name', 'n', '--permissions', '*', '--plan', 'gold'])).code).toBe(64);
    expect((await app.cli(['token:create', '--name', 'n', '--permissions', '*'])).code).toBe(64);
    expect((await app.cli(['no:such-command'])).code).toBe(64);
  });

  it('token:list shows tokens without secrets; token:revoke revokes', async () => {
    const secret = await app.token('*', { user: 'lister@example.com', name: 'listed' });
    const list = await app.cli(['token:list', '--user', 'lister@example.com']);
    expect(list.stdout).toContain('listed');
    expect(list.stdout).not.toContain(secret);
    const id = list.stdout.trim().split('\t')[0];
    expect((await app.cli(['token:revoke', '--id', id])).stdout).toMatch(/revoked/);
    expect((await app.cli(['token:list', '--user', 'lister@example.com'])).stdout).toMatch(/\trevoked\t/);
    expectError(await app.http.get('/api/contacts').set('Authorization', `Bearer ${secret}`), 401, 'unauthorized');
  });
});
