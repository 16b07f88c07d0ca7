/**
 * Statements and round trips per request, and throughput, of one write scenario, for one or more
 * builds alternated in one run (before/after on a loaded machine): each build's API and worker start
 * with the statement counter preloaded (bench/count-queries.mjs), the scenario runs, and the counts
 * are divided by the requests made.
 *
 * Scenarios (STATEMENTS_SCENARIO):
 * - `sms` (default): N drafts inserted, then POST /api/text-messages/{id}/send for each (autocannon,
 *   STATEMENTS_CONNECTIONS at once); accepted/s, messages/s end to end to the log provider, and per
 *   send the API's and the worker's SQL statements and Redis round trips.
 * - `batch`: STATEMENTS_REQUESTS 500-item contact upserts by email (half existing, three custom
 *   fields, as bench/batch.mjs), one at a time; statements per batch and p50/p99.
 *
 * `node bench/statements.mjs` after `npm run build`. Environment: BENCH_DATABASE (sf_bench_writes; an
 * already seeded and migrated database, e.g. by `BENCH_CONTACTS=100000 node bench/batch.mjs`),
 * STATEMENTS_BUILDS (comma-separated directories with a dist/, default this checkout),
 * STATEMENTS_ROUNDS (2), STATEMENTS_REQUESTS (sms 5,000; batch 20), STATEMENTS_CONNECTIONS (32), REDIS_URL.
 */
import autocannon from 'autocannon';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench_writes';
const SCENARIO = process.env.STATEMENTS_SCENARIO ?? 'sms';
const BUILDS = (process.env.STATEMENTS_BUILDS ?? ROOT).split(',').map((d) => resolve(d));
const ROUNDS = Number(process.env.STATEMENTS_ROUNDS ?? 2);
const REQUESTS = Number(process.env.STATEMENTS_REQUESTS ?? (SCENARIO === 'batch' ? 20 : 5000));
const CONNECTIONS = Number(process.env.STATEMENTS_CONNECTIONS ?? 32);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PRELOAD = join(ROOT, 'bench', 'count-queries.mjs');
const INDUSTRIES = ['software', 'retail', 'logistics', 'finance', 'health'];
const log = (m) => process.stderr.write(`[statements] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);
const dir = mkdtempSync(join(tmpdir(), 'sf-statements-'));

function start(name, build, env) {
  const file = join(dir, `${name}-${randomBytes(3).toString('hex')}.json`);
  const child = spawn(process.execPath, ['--import', PRELOAD, 'dist/main.js'], {
    cwd: build,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_OPTIONS: DEPLOYED_NODE_OPTIONS, COUNT_QUERIES_FILE: file, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => (err = (err + d).slice(-4000)));
  child.on('exit', (code) => code && log(`${name} exited with ${code}: ${err}`));
  const counts = () => {
    try {
      return JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      return { sql: 0, sqlByKind: {}, sqlMsByKind: {}, sqlMaxMsByKind: {}, redisRoundTrips: 0, redisByCommand: {} };
    }
  };
  return { child, counts };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const diff = (a, b) => ({
  sql: b.sql - a.sql,
  redis: b.redisRoundTrips - a.redisRoundTrips,
  kinds: Object.fromEntries(
    Object.entries(b.sqlByKind)
      .map(([k, n]) => [k, n - (a.sqlByKind[k] ?? 0)])
      .filter(([, n]) => n > 0),
  ),
  ms: Object.fromEntries(
    Object.entries(b.sqlMsByKind ?? {})
      .map(([k, n]) => [k, Math.round(n - ((a.sqlMsByKind ?? {})[k] ?? 0))])
      .filter(([, n]) => n > 0),
  ),
  maxMs: Object.fromEntries(Object.entries(b.sqlMaxMsByKind ?? {}).map(([k, n]) => [k, Math.round(n)])),
  commands: Object.fromEntries(
    Object.entries(b.redisByCommand ?? {})
      .map(([k, n]) => [k, n - ((a.redisByCommand ?? {})[k] ?? 0)])
      .filter(([, n]) => n > 0),
  ),
});

async function waitUp(url) {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      /* starting */
    }
    await sleep(100);
  }
  throw new Error(`${url} did not come up`);
}

function cannon(url, auth, next, amount) {
  return new Promise((res, rej) =>
    autocannon(
      { url, connections: CONNECTIONS, amount, headers: { authorization: auth }, requests: [{ setupRequest: (r) => ({ ...r, ...next() }) }] },
      (e, r) => (e ? rej(e) : res(r)),
    ),
  );
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];

async function sms(build, db, auth, port, api, worker) {
  const { rows } = await db.query(
    `INSERT INTO text_messages (content, recipient, status, created_by, created_by_user)
     SELECT 'Statements ' || i, '+14155550100', 'draft', NULL, 'bench' FROM generate_series(1, $1) i RETURNING id`,
    [REQUESTS],
  );
  const ids = rows.map((r) => r.id);
  await sleep(500);
  const [a0, w0] = [api.counts(), worker.counts()];
  let i = 0;
  const t = performance.now();
  const r = await cannon(`http://127.0.0.1:${port}`, auth, () => ({ method: 'POST', path: `/api/text-messages/${ids[i++ % ids.length]}/send` }), REQUESTS);
  const accepted = (performance.now() - t) / 1000;
  for (;;) {
    const { rows: left } = await db.query(`SELECT count(*)::int AS n FROM text_messages WHERE id = ANY($1) AND status NOT IN ('sent', 'delivered', 'failed')`, [
      ids,
    ]);
    if (left[0].n === 0) break;
    if (performance.now() - t > 600000) throw new Error('not sent within 10 minutes');
    await sleep(50);
  }
  const total = (performance.now() - t) / 1000;
  await sleep(600);
  const [a, w] = [diff(a0, api.counts()), diff(w0, worker.counts())];
  return {
    line: `accepted ${Math.round(REQUESTS / accepted)}/s, end to end ${Math.round(REQUESTS / total)} msg/s, non-2xx ${r.non2xx + r.errors}; per send: API ${(a.sql / REQUESTS).toFixed(2)} SQL + ${(a.redis / REQUESTS).toFixed(2)} Redis round trips, worker ${(w.sql / REQUESTS).toFixed(2)} SQL + ${(w.redis / REQUESTS).toFixed(2)} Redis`,
    detail: { api: a, worker: w },
  };
}

async function batch(build, db, auth, port, api) {
  const tag = randomBytes(3).toString('hex');
  const fields = (b, i) => ({ industry: INDUSTRIES[(b + i) % INDUSTRIES.length], lead_score: (b * 7 + i) % 100, city: `City ${i % 50}` });
  const times = [];
  await sleep(500);
  const a0 = api.counts();
  for (let b = 0; b < REQUESTS; b++) {
    const { rows } = await db.query(`SELECT email FROM contacts TABLESAMPLE SYSTEM (1) WHERE email IS NOT NULL LIMIT 250`);
    const items = rows.map((r, i) => ({ name: `Batch ${tag} ${b} ${i}`, email: r.email, title: `T${b}`, fields: fields(b, i) }));
    while (items.length < 500)
      items.push({
        name: `New ${tag} ${b} ${items.length}`,
        email: `st-${tag}-${b}-${items.length}@bench.test`,
        company: 'Bench',
        fields: fields(b, items.length),
      });
    const t = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/api/contacts/batch`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'upsert', items }),
    });
    const body = await res.json();
    times.push(performance.now() - t);
    if (res.status !== 200 || body.summary.failed) throw new Error(`batch ${b}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  }
  await sleep(600);
  const a = diff(a0, api.counts());
  return {
    line: `p50 ${Math.round(pct(times, 50))} ms, p99 ${Math.round(pct(times, 99))} ms; per batch: ${(a.sql / REQUESTS).toFixed(1)} SQL statements, ${(a.redis / REQUESTS).toFixed(1)} Redis round trips`,
    detail: { api: a },
  };
}

async function main() {
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const out = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const build of BUILDS) {
      const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'statements', build);
      const prefix = `st${randomBytes(3).toString('hex')}`;
      const port = await freePort();
      const env = { DATABASE_URL: dbUrl, LOG_LEVEL: 'warn', RUN_MIGRATIONS: 'false', RATE_LIMIT_ENTERPRISE: '1000000000', SMS_PROVIDER: 'log' };
      const withRedis = SCENARIO === 'sms' ? { REDIS_URL, REDIS_PREFIX: prefix, SMS_RATE_LIMIT_PER_SECOND: '100000' } : {};
      const api = start('api', build, { ...env, ...withRedis, APP_ROLE: SCENARIO === 'sms' ? 'api' : 'all', PORT: String(port), HOST: '127.0.0.1' });
      const worker = SCENARIO === 'sms' ? start('worker', build, { ...env, ...withRedis, APP_ROLE: 'worker' }) : null;
      try {
        await waitUp(`http://127.0.0.1:${port}/health`);
        await sleep(2000);
        const r = SCENARIO === 'sms' ? await sms(build, db, `Bearer ${token}`, port, api, worker) : await batch(build, db, `Bearer ${token}`, port, api);
        log(`${build} round ${round + 1}: ${r.line}`);
        log(JSON.stringify(r.detail));
        out.push({ build, round: round + 1, ...r });
      } finally {
        api.child.kill('SIGTERM');
        worker?.child.kill('SIGTERM');
        await sleep(1500);
      }
    }
  }
  await db.end();
  for (const r of out) console.log(`${r.build} round ${r.round}: ${r.line}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
