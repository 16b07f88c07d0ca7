/**
 * Lead scoring benchmark, on a database of its own (BENCH_DATABASE, default sf_bench_scoring,
 * dropped and created afresh) with BENCH_CONTACTS contacts (default 1,000,000):
 *
 * 1. rule application: a published rule on `contact.updated`, then BENCH_EVENTS_PER_SECOND change
 *    events a second for BENCH_SECONDS seconds appended to the outbox (as the contacts feature
 *    writes them); measured: the applier's throughput and its lag (the oldest event not yet applied)
 *    each second and at the end;
 * 2. recompute of every contact (POST /api/scoring/recompute until its job completes);
 * 3. what-if over the events of step 1 (POST /api/scoring/what-if until its job completes).
 *
 * The app runs from dist/ without Redis (its applier in process). `node bench/scoring.mjs` after
 * `npm run build`. A quick check: `BENCH_CONTACTS=2000 BENCH_EVENTS_PER_SECOND=200 BENCH_SECONDS=3 node bench/scoring.mjs`.
 */
import { execFileSync, spawn } from 'node:child_process';
import pg from 'pg';
import { ADMIN_URL, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench_scoring';
const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const RATE = Number(process.env.BENCH_EVENTS_PER_SECOND ?? 10_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const log = (m) => process.stderr.write(`[bench:scoring] ${m}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dbUrl = databaseUrl(DB_NAME);

async function freshDatabase() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  for (let done = 0; done < CONTACTS; done += 100_000) {
    const n = Math.min(100_000, CONTACTS - done);
    await db.query(
      `INSERT INTO contacts (name, email, title) SELECT 'Bench ' || i, 'bench' || i || '@scoring.test', CASE WHEN i % 3 = 0 THEN 'CTO' ELSE 'Engineer' END
         FROM generate_series($1::int, $2::int) AS i`,
      [done + 1, done + n],
    );
  }
  await db.query('ANALYZE');
  return db;
}

async function main() {
  const db = await freshDatabase();
  log(`${CONTACTS.toLocaleString()} contacts seeded`);
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-scoring');
  const port = await freePort();
  const api = spawn(process.execPath, ['dist/main.js'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: dbUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RUN_MIGRATIONS: 'false',
      RATE_LIMIT_ENTERPRISE: '1000000000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const call = async (method, path, body) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.json();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
    return json;
  };
  const untilDone = async (id) => {
    for (;;) {
      const { job } = await call('GET', `/api/scoring/jobs/${id}`);
      if (job.status === 'completed') return job;
      if (job.status === 'failed') throw new Error(`job failed: ${job.error}`);
      await sleep(100);
    }
  };
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) break;
      } catch {
        /* starting */
      }
      if (i > 600) throw new Error('api did not start');
      await sleep(100);
    }
    const out = [];
    const since = new Date(Date.now() - 1000).toISOString();
    const rule = { name: 'Bench CTO', on: { recordEvent: 'contact.updated', filter: { field: 'title', op: 'eq', value: 'CTO' } }, delta: 1 };
    await call('POST', '/api/scoring-rules', rule);
    await sleep(1500); // the rule's creation is older than every event below

    // 1. Events appended at RATE a second, in ten slices a second, as the outbox writes them.
    const total = RATE * SECONDS;
    const matching = async () => Number((await db.query(`SELECT count(*) AS n FROM point_ledger WHERE source = 'rule'`)).rows[0].n);
    const started = performance.now();
    let appended = 0;
    let maxLagMs = 0;
    for (let s = 0; s < SECONDS; s++) {
      for (let slice = 0; slice < 10; slice++) {
        const n = Math.round(RATE / 10);
        await db.query(
          `INSERT INTO events (type, data) SELECT 'contact.updated', jsonb_build_object('id', 1 + ((($1::bigint + i) * 7919) % $2::bigint)) FROM generate_series(1, $3::int) AS i`,
          [appended, CONTACTS, n],
        );
        appended += n;
        const due = started + s * 1000 + (slice + 1) * 100;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
      }
      const lag = await db.query(
        `SELECT extract(epoch FROM (now() - min(occurred_at))) * 1000 AS ms FROM events e
          WHERE e.type = 'contact.updated' AND (e.sequence IS NULL OR e.sequence > (SELECT last_sequence FROM scoring_state))`,
      );
      maxLagMs = Math.max(maxLagMs, Number(lag.rows[0].ms ?? 0));
    }
    const expectedRule = Number(
      (await db.query(`SELECT count(*) AS n FROM events e JOIN contacts c ON c.id = (e.data->>'id')::int WHERE e.type = 'contact.updated' AND c.title = 'CTO'`))
        .rows[0].n,
    );
    while ((await matching()) < expectedRule) await sleep(50);
    const seconds = (performance.now() - started) / 1000;
    out.push(
      `rule application: ${total.toLocaleString()} events at ${RATE.toLocaleString()}/s for ${SECONDS} s, ${expectedRule.toLocaleString()} applications; all applied ${seconds.toFixed(1)} s after the first (max lag sampled ${(maxLagMs / 1000).toFixed(1)} s)`,
    );

    // 2. Recompute.
    let t = performance.now();
    const recompute = await untilDone((await call('POST', '/api/scoring/recompute', {})).job.id);
    out.push(
      `recompute of ${CONTACTS.toLocaleString()} contacts: ${((performance.now() - t) / 1000).toFixed(1)} s (checked ${recompute.result.checked}, repaired ${recompute.result.repaired})`,
    );

    // 3. What-if over the same events.
    t = performance.now();
    const whatIf = await untilDone((await call('POST', '/api/scoring/what-if', { since, rules: [{ ...rule, delta: 2 }] })).job.id);
    out.push(
      `what-if over ${whatIf.result.events.toLocaleString()} events (${whatIf.result.applications.toLocaleString()} applications): ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    for (const line of out) console.log(line);
  } finally {
    api.kill('SIGTERM');
    await db.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
