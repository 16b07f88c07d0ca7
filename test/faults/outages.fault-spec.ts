/**
 * Faults with real processes: a private PostgreSQL restarted under load, a private Redis stopped
 * while the API serves, and an API instance sent SIGTERM under load. Each scenario asserts what the
 * clients saw and what was lost (nothing).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request as httpRequest } from 'node:http';
import { Redis } from 'ioredis';
import { startApp, type TestApp } from '../support/app.js';
import { type PrivatePostgres, type PrivateRedis, startPrivatePostgres, startPrivateRedis } from '../support/services.js';
import { sleep } from '../support/wait.js';

interface Outcome {
  status: number | 'error';
  code?: string;
  email?: string;
  startedAt: number;
  endedAt: number;
  error?: string;
}

/** One request with a fresh connection (no keep-alive), so connection-level failures are unambiguous. */
function call(port: number, method: string, path: string, auth: string, body?: object): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = body ? JSON.stringify(body) : undefined;
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: { authorization: auth, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
      },
      (res) => {
        let data = '';
        res.on('data', (c: Buffer) => (data += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(15000, () => req.destroy(new Error('timeout')));
    if (payload) req.write(payload);
    req.end();
  });
}

/** Mixed reads and creates from `workers` loops until `until()`; every outcome recorded. */
async function load(port: number, auth: string, workers: number, until: () => boolean, tag: string): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let seq = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (!until()) {
        const create = (seq++ + w) % 2 === 0;
        const email = create ? `${tag}-${w}-${seq}@fault.test` : undefined;
        const startedAt = Date.now();
        try {
          const res = create
            ? await call(port, 'POST', '/api/contacts', auth, { name: `Fault ${w}`, email })
            : await call(port, 'GET', '/api/contacts?limit=5', auth);
          let code: string | undefined;
          try {
            code = JSON.parse(res.body)?.error?.code;
          } catch {
            code = 'not-json';
          }
          outcomes.push({ status: res.status, code, email, startedAt, endedAt: Date.now() });
        } catch (e) {
          outcomes.push({ status: 'error', email, startedAt, endedAt: Date.now(), error: (e as Error).message });
          await sleep(20);
        }
      }
    }),
  );
  return outcomes;
}

describe('PostgreSQL restarted under load', () => {
  let pg: PrivatePostgres;
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    app = await startApp({ databaseUrl: pg.url, env: { RATE_LIMIT_ENTERPRISE: '1000000', TOKEN_CACHE_TTL_SECONDS: '300' } });
    auth = `Bearer ${await app.token('*', { plan: 'enterprise' })}`;
  });
  afterAll(async () => {
    await app?.stop();
    pg?.destroy();
  });

  it('answers 503 unavailable during the outage, recovers by itself, and loses no acknowledged write', async () => {
    let stop = false;
    const running = load(app.port, auth, 6, () => stop, 'pg');
    await sleep(800);
    pg.stop('immediate');
    await sleep(2000);
    const healthDuring = await call(app.port, 'GET', '/health', auth);
    pg.start();
    // Give the pool a moment to notice, then keep the load on to show recovery.
    await sleep(3000);
    stop = true;
    const outcomes = await running;

    expect(healthDuring.status).toBe(503);
    const statuses = new Set(outcomes.map((o) => o.status));
    // Only success or "unavailable, retry": never a 500, never a dropped connection.
    for (const s of statuses) expect([200, 201, 503]).toContain(s);
    for (const o of outcomes.filter((o) => o.status === 503)) expect(o.code).toBe('unavailable');
    expect(outcomes.some((o) => o.status === 503)).toBe(true);
    // Recovered: the last second of load succeeded.
    const lastSecond = outcomes.filter((o) => o.startedAt > Date.now() - 1000);
    expect(lastSecond.length).toBeGreaterThan(0);
    expect(lastSecond.every((o) => o.status === 200 || o.status === 201)).toBe(true);

    // What was lost: nothing acknowledged. Every 201 is in the database.
    const acknowledged = outcomes.filter((o) => o.status === 201).map((o) => o.email!);
    const rows = await app.sql<{ email: string }>('SELECT email FROM contacts WHERE email = ANY($1)', [acknowledged]);
    expect(rows.length).toBe(acknowledged.length);
    expect((await call(app.port, 'GET', '/health', auth)).status).toBe(200);
  });
});

describe('Redis stopped while the API serves', () => {
  let redis: PrivateRedis;
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    // The database is the machine's (a fresh one); only Redis is private.
    const dbApp = await startApp({ noRedis: true });
    await dbApp.kill();
    app = await startApp({ databaseUrl: dbApp.databaseUrl!, redisUrl: redis.url, env: { RATE_LIMIT_ENTERPRISE: '1000000' } });
    auth = `Bearer ${await app.token('*', { plan: 'enterprise' })}`;
  });
  afterAll(async () => {
    await app?.stop();
    await redis?.destroy();
  });

  it('keeps CRUD working, counts rate limits in memory, and returns to Redis when it is back', async () => {
    expect((await call(app.port, 'GET', '/api/contacts', auth)).status).toBe(200);
    await redis.stop();
    await sleep(300);
    const health = await call(app.port, 'GET', '/health', auth);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toMatchObject({ status: 'degraded', redis: { status: 'down' } });

    const created = await call(app.port, 'POST', '/api/contacts', auth, { name: 'No Redis', email: 'no-redis@fault.test' });
    expect(created.status).toBe(201);
    const listed = await call(app.port, 'GET', '/api/contacts?search=no-redis', auth);
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body).total).toBe(1);

    await redis.start();
    // Redis kept its data (append-only file): start from empty counters to see new ones arrive.
    const probe = new Redis(redis.url);
    await probe.flushall();
    // The client reconnects by itself; counters go back to Redis.
    const deadline = Date.now() + 15000;
    let keys: string[] = [];
    let healthAfter: { redis?: { status?: string } } = {};
    while (Date.now() < deadline) {
      expect((await call(app.port, 'GET', '/api/contacts', auth)).status).toBe(200);
      healthAfter = JSON.parse((await call(app.port, 'GET', '/health', auth)).body);
      keys = await probe.keys(`${app.env.REDIS_PREFIX}:rl:*`);
      if (keys.length && healthAfter.redis?.status === 'up') break;
      await sleep(200);
    }
    probe.disconnect();
    expect(keys.length).toBeGreaterThan(0);
    const after = healthAfter as { redis: { status: string } };
    expect(after.redis.status).toBe('up');
  });
});

describe('an API instance sent SIGTERM under load', () => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    app = await startApp({ env: { RATE_LIMIT_ENTERPRISE: '1000000', SHUTDOWN_GRACE_MS: '10000' } });
    auth = `Bearer ${await app.token('*', { plan: 'enterprise' })}`;
  });
  afterAll(async () => app?.stop());

  it('finishes every request it had accepted and processes none it does not answer', async () => {
    let stop = false;
    const running = load(app.port, auth, 12, () => stop, 'term');
    await sleep(1500);
    const signalAt = Date.now();
    const exited = app.kill('SIGTERM');
    await sleep(1500);
    stop = true;
    const outcomes = await running;
    expect(await exited).toBe(0);

    const answered = outcomes.filter((o) => o.status !== 'error');
    const inFlight = answered.filter((o) => o.startedAt < signalAt && o.endedAt >= signalAt);
    const failedConnections = outcomes.filter((o) => o.status === 'error');
    // Every answer, before or after the signal, is a success: no 5xx while draining.
    expect(answered.filter((o) => o.status !== 200 && o.status !== 201)).toEqual([]);
    expect(answered.filter((o) => o.startedAt < signalAt).length).toBeGreaterThan(10);
    expect(inFlight.length).toBeGreaterThan(0);
    // A request without an answer is one the server never took: the connection was refused, or reset
    // by the kernel while it waited in the listen backlog when the listener closed. None of those
    // was processed (its contact does not exist), so a client or load balancer can retry it safely.
    for (const o of failedConnections) expect(o.error).toMatch(/ECONNREFUSED|ECONNRESET|socket hang up/);
    const unanswered = failedConnections.filter((o) => o.email).map((o) => o.email!);
    const processedUnanswered = await app.sql<{ email: string }>('SELECT email FROM contacts WHERE email = ANY($1)', [unanswered]);
    expect(processedUnanswered).toEqual([]);
    // Nothing acknowledged was lost.
    const acknowledged = outcomes.filter((o) => o.status === 201).map((o) => o.email!);
    const rows = await app.sql<{ email: string }>('SELECT email FROM contacts WHERE email = ANY($1)', [acknowledged]);
    expect(rows.length).toBe(acknowledged.length);
  });
});
