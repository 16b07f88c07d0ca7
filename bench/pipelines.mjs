/**
 * Pipeline reports benchmark: a database of its own seeded with SQL generate_series (BENCH_PIPELINE_DEALS
 * deals, default 1,000,000, in a six-stage pipeline, and BENCH_PIPELINE_LEDGER stage-ledger rows, default
 * 10,000,000: each deal's chain of moves over the past two years ending in its current stage), then the
 * built app (dist/) started on it and each report driven with autocannon at BENCH_CONNECTIONS (4) for
 * BENCH_DURATION seconds (10): forecast by month and by owner, funnel over 90 days and a year, snapshot
 * now and 30 days ago, one filtered by owner. Prints one row per report: req/s, p50, p99, and whether
 * p99 is under the 500 ms target.
 *
 * `node bench/pipelines.mjs` after `npm run build` (part of `npm run bench`). Environment:
 * BENCH_DATABASE_ADMIN_URL, BENCH_PIPELINE_DATABASE (sf_bench_pipelines), BENCH_PIPELINE_DEALS,
 * BENCH_PIPELINE_LEDGER, BENCH_CONNECTIONS, BENCH_DURATION, BENCH_REUSE=1 to keep a seeded database of the same size.
 * Small runs to check the script: BENCH_PIPELINE_DEALS=2000 BENCH_PIPELINE_LEDGER=20000 BENCH_DURATION=2.
 */
import autocannon from 'autocannon';
import { execFileSync, spawn } from 'node:child_process';
import pg from 'pg';
import { ADMIN_URL, DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_PIPELINE_DATABASE ?? 'sf_bench_pipelines';
const DEALS = Number(process.env.BENCH_PIPELINE_DEALS ?? 1_000_000);
const LEDGER = Number(process.env.BENCH_PIPELINE_LEDGER ?? 10_000_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const TARGET_P99_MS = 500;
const USERS = 20;
const CONTACTS = Math.max(1, Math.floor(DEALS / 10));
/** Ledger rows per deal (at least one: its entry into its current stage). */
const ROWS_PER_DEAL = Math.max(1, Math.round(LEDGER / DEALS));
const CHUNK = 100_000;
const log = (m) => process.stderr.write(`[bench:pipelines] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function timed(what, work) {
  const t = performance.now();
  await work();
  log(`${what}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
}

/** Creates and seeds the database unless BENCH_REUSE=1 finds it seeded at this size; answers the pipeline's id. */
async function prepare() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME])).rowCount > 0;
  if (exists && process.env.BENCH_REUSE === '1') {
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const found = await db
      .query(`SELECT id, (SELECT count(*) FROM deals WHERE pipeline_id = p.id)::int AS n FROM pipelines p WHERE name = 'Bench'`)
      .catch(() => ({ rows: [] }));
    await db.end();
    if (found.rows[0]?.n === DEALS) {
      await admin.end();
      log(`reusing ${DB_NAME}`);
      return found.rows[0].id;
    }
  }
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  try {
    return await seed(db);
  } finally {
    await db.end();
  }
}

async function seed(db) {
  await db.query(`INSERT INTO users (name, email) SELECT 'Owner ' || i, 'owner' || i || '@pipelines.bench' FROM generate_series(1, ${USERS}) i`);
  const { lo } = (await db.query(`SELECT min(id) AS lo FROM users WHERE email LIKE '%@pipelines.bench'`)).rows[0];
  await db.query(`INSERT INTO companies (name) SELECT 'Company ' || i FROM generate_series(1, 100) i`);
  const { co } = (await db.query(`SELECT min(id) AS co FROM companies`)).rows[0];
  await timed(`${CONTACTS.toLocaleString()} contacts`, () =>
    db.query(`INSERT INTO contacts (name, email) SELECT 'Bench ' || i, 'bench' || i || '@pipelines.bench' FROM generate_series(1, ${CONTACTS}) i`),
  );
  const { c0 } = (await db.query(`SELECT min(id) AS c0 FROM contacts`)).rows[0];
  const pipelineId = (await db.query(`INSERT INTO pipelines (name, strict_stages) VALUES ('Bench', true) RETURNING id`)).rows[0].id;
  const stageDefs = [
    ['Lead', 10, 'open'],
    ['Qualified', 25, 'open'],
    ['Proposal', 50, 'open'],
    ['Negotiation', 75, 'open'],
    ['Won', 100, 'won'],
    ['Lost', 0, 'lost'],
  ];
  const ids = [];
  for (const [i, [name, probability, type]] of stageDefs.entries()) {
    ids.push(
      (
        await db.query(`INSERT INTO pipeline_stages (pipeline_id, name, position, probability, type) VALUES ($1, $2, $3, $4, $5) RETURNING id`, [
          pipelineId,
          name,
          i,
          probability,
          type,
        ])
      ).rows[0].id,
    );
  }
  const arr = (xs) => `ARRAY[${xs.map((x) => (typeof x === 'number' ? x : `'${x}'`)).join(',')}]`;
  const stageIds = arr(ids);
  // A deal's current stage: 40% open (spread over the four open stages), 30% won, 30% lost.
  const stageIndex = `(CASE WHEN i % 10 < 4 THEN 1 + i % 4 WHEN i % 10 < 7 THEN 5 ELSE 6 END)`;
  // Created up to two years ago; its moves one day apart; it entered its current stage ROWS_PER_DEAL - 1 days after creation.
  const created = `(now() - interval '${ROWS_PER_DEAL + 1} days' - (i % 730) * interval '1 day' - (i % 86400) * interval '1 second')`;
  for (let from = 1; from <= DEALS; from += CHUNK) {
    const to = Math.min(DEALS, from + CHUNK - 1);
    await timed(`deals ${from.toLocaleString()}..${to.toLocaleString()}`, () =>
      db.query(`
        INSERT INTO deals (title, value, contact_id, expected_close_date, pipeline_id, stage_id, stage, entered_stage_at, probability, status,
                           closed_at, owner_id, company_id, created_at)
        SELECT 'Deal ' || i, round((100 + (i::bigint * 7919) % 50000)::numeric / 3, 2), ${c0} + i % ${CONTACTS}, date 'today' - 365 + (i % 730),
               ${pipelineId}, (${stageIds})[k], (${arr(stageDefs.map((s) => s[0]))})[k], ${created} + ${ROWS_PER_DEAL - 1} * interval '1 day',
               CASE WHEN i % 5 = 0 THEN (i * 17) % 101 END, (${arr(stageDefs.map((s) => s[2]))})[k],
               CASE WHEN k > 4 THEN ${created} + ${ROWS_PER_DEAL - 1} * interval '1 day' END, ${lo} + i % ${USERS}, CASE WHEN i % 3 = 0 THEN ${co} + i % 100 END,
               ${created}
        FROM (SELECT i, ${stageIndex} AS k FROM generate_series(${from}, ${to}) i) d`),
    );
  }
  const { d0 } = (await db.query(`SELECT min(id) AS d0 FROM deals WHERE pipeline_id = $1`, [pipelineId])).rows[0];
  // Each deal's chain: rows 1..R-1 walk the open stages, row R enters its current stage.
  const openStage = (n) => `(${stageIds})[1 + (${n}) % 4]`;
  for (let from = d0; from < d0 + DEALS; from += CHUNK) {
    const to = Math.min(d0 + DEALS - 1, from + CHUNK - 1);
    await timed(`ledger rows of deals ${from - d0 + 1}..${to - d0 + 1}`, () =>
      db.query(`
        INSERT INTO deal_stage_changes (deal_id, pipeline_id, from_stage_id, to_stage_id, at, by, value, probability)
        SELECT d.id, d.pipeline_id,
               CASE WHEN r = 1 THEN NULL ELSE ${openStage('d.id + r - 1')} END,
               CASE WHEN r = ${ROWS_PER_DEAL} THEN d.stage_id ELSE ${openStage('d.id + r')} END,
               d.created_at + (r - 1) * interval '1 day', d.owner_id, d.value, COALESCE(d.probability, 50)
        FROM deals d CROSS JOIN generate_series(1, ${ROWS_PER_DEAL}) r
        WHERE d.id BETWEEN ${from} AND ${to}
        ORDER BY d.id, r`),
    );
  }
  // VACUUM as autovacuum would have by then: it sets the visibility map the reports' index-only scans read.
  await timed('vacuum analyze', async () => {
    for (const table of ['deals', 'deal_stage_changes', 'pipeline_stages']) await db.query(`VACUUM ANALYZE ${table}`);
  });
  return pipelineId;
}

function drive(url, token) {
  return new Promise((resolve, reject) => {
    autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers: { authorization: `Bearer ${token}` } }, (err, result) =>
      err ? reject(err) : resolve(result),
    );
  });
}

async function main() {
  const pipelineId = await prepare();
  const env = { ...process.env, DATABASE_URL: dbUrl };
  const token = createToken(env, 'bench-pipelines');
  const { owner } = await (async () => {
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    try {
      return (await db.query(`SELECT min(id) AS owner FROM users WHERE email LIKE '%@pipelines.bench'`)).rows[0];
    } finally {
      await db.end();
    }
  })();
  const port = await freePort();
  const api = spawn(process.execPath, ['dist/main.js'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_OPTIONS: DEPLOYED_NODE_OPTIONS,
      DATABASE_URL: dbUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RUN_MIGRATIONS: 'false',
      RATE_LIMIT_ENTERPRISE: '1000000000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
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
    const day = (offset) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const instant = (offset) => encodeURIComponent(new Date(Date.now() + offset * 86_400_000).toISOString());
    const base = `http://127.0.0.1:${port}/api/pipelines/${pipelineId}`;
    const scenarios = [
      ['forecast, 12 months by month', `${base}/forecast?from=${day(0)}&to=${day(364)}`],
      ['forecast, 12 months by owner', `${base}/forecast?from=${day(0)}&to=${day(364)}&groupBy=owner`],
      ['funnel, 90 days', `${base}/funnel?from=${instant(-90)}`],
      ['funnel, 1 year', `${base}/funnel?from=${instant(-365)}`],
      ['snapshot, now', `${base}/snapshot`],
      ['snapshot, 30 days ago', `${base}/snapshot?asOf=${instant(-30)}`],
      ['snapshot, 30 days ago, one owner', `${base}/snapshot?asOf=${instant(-30)}&ownerId=${owner}`],
    ];
    const rows = [];
    for (const [name, url] of scenarios) {
      const check = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      if (check.status !== 200) throw new Error(`${name}: ${check.status} ${(await check.text()).slice(0, 300)}`);
      const r = await drive(url, token);
      if (r.non2xx || r.errors) throw new Error(`${name}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
      rows.push([name, r.requests.average.toFixed(1), r.latency.p50, r.latency.p99, r.latency.p99 < TARGET_P99_MS ? 'yes' : 'NO']);
      log(`${name}: p99 ${r.latency.p99} ms`);
    }
    console.log(
      `\nPipeline reports: ${DEALS.toLocaleString()} deals, ${(DEALS * ROWS_PER_DEAL).toLocaleString()} ledger rows, ${CONNECTIONS} connections, ${DURATION} s each\n`,
    );
    console.log(`| report | req/s | p50 ms | p99 ms | p99 < ${TARGET_P99_MS} ms |`);
    console.log('| --- | --- | --- | --- | --- |');
    for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  } finally {
    api.kill('SIGTERM');
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
