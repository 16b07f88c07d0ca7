/**
 * Batch-write benchmark: a 500-item contact upsert by email (half the emails existing,
 * half new, every item with three custom field values) against a seeded database, sent one after
 * another (BENCH_BATCH_CONCURRENCY at once); prints p50 / p99 / max.
 *
 * `node bench/batch.mjs` after `npm run build`. Environment: BENCH_DATABASE_ADMIN_URL, BENCH_DATABASE
 * (sf_bench_batch), BENCH_REUSE=1 to keep a seeded database, BENCH_CONTACTS (1,000,000; the seed's
 * other sizes as in bench/seed.mjs), BENCH_BATCHES (30), BENCH_BATCH_SIZE (500), BENCH_EXISTING (0.5),
 * BENCH_BATCH_CONCURRENCY (1), BENCH_BATCH_WARMUP (3 batches sent first and not counted), BENCH_BUILD=<dir> to measure another build's dist/ (e.g. a worktree of an
 * older commit, with BENCH_REUSE=1 on a database at its schema) for before/after.
 */
import { execFileSync, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { seed, SIZES } from './seed.mjs';
import { ADMIN_URL, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench_batch';
/** The build to measure (its dist/): this checkout, or BENCH_BUILD. */
const BUILD = process.env.BENCH_BUILD ? resolve(process.env.BENCH_BUILD) : ROOT;
const BATCHES = Number(process.env.BENCH_BATCHES ?? 30);
const SIZE = Number(process.env.BENCH_BATCH_SIZE ?? 500);
const EXISTING = Number(process.env.BENCH_EXISTING ?? 0.5);
const CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY ?? 1);
/** Batches sent first and not counted (the API's first requests warm its caches and PostgreSQL's plans, as the other benches' warm-up runs). */
const WARMUP = Number(process.env.BENCH_BATCH_WARMUP ?? 3);
const INDUSTRIES = ['software', 'retail', 'logistics', 'finance', 'health'];
const log = (m) => process.stderr.write(`[bench:batch] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);

async function prepare() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME])).rowCount > 0;
  if (!(exists && process.env.BENCH_REUSE === '1')) {
    await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${DB_NAME}`);
    execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
    const t = Date.now();
    await seed(dbUrl, log);
    log(`seeded ${SIZES.contacts} contacts in ${Math.round((Date.now() - t) / 1000)} s`);
  } else if (BUILD === ROOT) {
    execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  }
  await admin.end();
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];

async function main() {
  await prepare();
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-batch');
  const port = await freePort();
  const api = spawn(process.execPath, ['dist/main.js'], {
    cwd: BUILD,
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
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) break;
    } catch {
      /* starting */
    }
    if (i > 600) throw new Error('api did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  const tag = randomBytes(3).toString('hex');
  const times = [];
  // Every item carries custom field values (a select, a number and a text field of the seed).
  const fields = (b, i) => ({ industry: INDUSTRIES[(b + i) % INDUSTRIES.length], lead_score: (b * 7 + i) % 100, city: `City ${i % 50}` });
  const oneBatch = async (b) => {
    const existingCount = Math.round(SIZE * EXISTING);
    const { rows } = await db.query(`SELECT email FROM contacts TABLESAMPLE SYSTEM (1) LIMIT $1`, [existingCount]);
    const items = rows.map((r, i) => ({ name: `Batch ${tag} ${b} ${i}`, email: r.email, title: `T${b}`, fields: fields(b, i) }));
    while (items.length < SIZE)
      items.push({
        name: `New ${tag} ${b} ${items.length}`,
        email: `batch-${tag}-${b}-${items.length}@bench.test`,
        company: 'Bench',
        fields: fields(b, items.length),
      });
    const t = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/api/contacts/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'upsert', items }),
    });
    const body = await res.json();
    if (b >= WARMUP) times.push(performance.now() - t);
    if (res.status !== 200 || body.summary.failed) throw new Error(`batch ${b}: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  };
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < BATCHES + WARMUP) await oneBatch(next++);
      }),
    );
  } finally {
    api.kill('SIGTERM');
    await db.end();
  }
  const fmt = (x) => `${Math.round(x)} ms`;
  console.log(
    `${SIZE}-item contact upsert by email (${Math.round(EXISTING * 100)}% existing, 3 custom fields) at ${SIZES.contacts.toLocaleString()} contacts, ${BATCHES} batches, ${CONCURRENCY} at once: ` +
      `p50 ${fmt(pct(times, 50))}, p99 ${fmt(pct(times, 99))}, max ${fmt(Math.max(...times))}`,
  );
  log(`each batch in order (ms): ${times.map((t) => Math.round(t)).join(' ')}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
