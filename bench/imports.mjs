/**
 * Import and export benchmark, standalone like bench/batch.mjs, against the
 * seeded 1M-contact database (BENCH_DATABASE, default sf_bench; migrations are applied first).
 *
 * Import: a generated CSV of BENCH_IMPORT_ROWS rows (default 1,000,000) with 5 custom fields is
 * uploaded (streamed from disk) and upserted by email; timed from the upload to `completed`. Its
 * emails are new and unique to the run (`imp-<tag>-<n>@imports-bench.test`), and every contact,
 * event and job row the run wrote is deleted at the end, so the database is left as it was.
 * Export: every contact to CSV, timed from the request to `completed`, then downloaded and counted.
 * As deployed (the Dockerfile's NODE_OPTIONS): an API process (APP_ROLE=api) takes the upload and a
 * worker (APP_ROLE=worker) runs the jobs, on Redis (BENCH_REDIS_URL, default the machine's, under a
 * fresh key prefix removed at the end); BENCH_IN_PROCESS=1 runs one process without Redis instead.
 * Each process's resident set is sampled every 200 ms; the peaks are printed.
 *
 * `node bench/imports.mjs` after `npm run build`. Environment: BENCH_DATABASE_ADMIN_URL,
 * BENCH_DATABASE, BENCH_IMPORT_ROWS, BENCH_REDIS_URL, BENCH_IN_PROCESS=1, BENCH_SKIP_EXPORT=1,
 * BENCH_SKIP_IMPORT=1; IMPORT_* settings (IMPORT_PARALLEL_CHUNKS, IMPORT_CHUNK_ROWS) are passed to the app.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, openAsBlob, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, deleteRedisKeys, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench';
const ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 1_000_000);
const DOMAIN = 'imports-bench.test';
const IN_PROCESS = process.env.BENCH_IN_PROCESS === '1';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const log = (m) => process.stderr.write(`[bench:imports] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** VmRSS and VmHWM (peak) of a process, in MB. */
function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => Number((new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status) ?? [])[1] ?? 0);
    return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
  } catch {
    return { rss: 0, peak: 0 };
  }
}

/** The 5 custom fields the CSV fills (the seed's, or created when missing). */
const FIELDS = [
  { alias: 'industry', label: 'Industry', type: 'select' },
  { alias: 'lead_score', label: 'Lead score', type: 'number' },
  { alias: 'newsletter', label: 'Newsletter', type: 'boolean' },
  { alias: 'city', label: 'City', type: 'text' },
  { alias: 'signup_date', label: 'Signup date', type: 'date' },
];

async function writeCsv(path, tag, options) {
  const out = createWriteStream(path);
  const write = (s) => (out.write(s) ? undefined : new Promise((r) => out.once('drain', r)));
  await write('Name;E-mail;Industry;Score;Newsletter;City;Signed up\n');
  const cities = ['Berlin', 'Lisbon', 'Oslo', 'Austin', 'Kyoto'];
  for (let i = 0; i < ROWS; i++) {
    const day = String(1 + (i % 28)).padStart(2, '0');
    await write(
      `Person ${tag} ${i};imp-${tag}-${i}@${DOMAIN};${options[i % options.length]};${i % 100};${i % 2 ? 'yes' : 'no'};${cities[i % 5]};2026-03-${day}\n`,
    );
  }
  await new Promise((r) => out.end(r));
}

async function main() {
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-imports');
  const dataDir = mkdtempSync(join(tmpdir(), 'sf-bench-imports-'));
  const port = await freePort();
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS ?? DEPLOYED_NODE_OPTIONS,
    DATABASE_URL: dbUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    RUN_MIGRATIONS: 'false',
    RATE_LIMIT_ENTERPRISE: '1000000000',
    DATA_DIR: dataDir,
    STORAGE_DIR: join(dataDir, 'storage'),
    APP_ROLE: IN_PROCESS ? 'all' : 'api',
    ...(IN_PROCESS ? {} : { REDIS_URL, REDIS_PREFIX: prefix }),
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('IMPORT_'))),
  };
  const prof = (name) =>
    process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF, '--cpu-prof-name', `${name}.cpuprofile`] : [];
  const api = spawn(process.execPath, [...prof('api'), 'dist/main.js'], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] });
  const worker = IN_PROCESS
    ? null
    : spawn(process.execPath, [...prof('worker'), 'dist/main.js'], {
        cwd: ROOT,
        env: { ...env, APP_ROLE: 'worker', PORT: String(await freePort()), HEARTBEAT_FILE: join(dataDir, 'worker.beat') },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
  const base = `http://127.0.0.1:${port}`;
  const call = async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body && !(body instanceof FormData) ? { 'content-type': 'application/json' } : {}) },
      body: body instanceof FormData ? body : body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {
      /* starting */
    }
    if (i > 600) throw new Error('api did not start');
    await sleep(100);
  }
  const tag = randomBytes(3).toString('hex');
  const createdFields = [];
  await sleep(2000);
  const idle = memoryOf(api.pid).rss;
  log(`API resident set when idle: ${Math.round(idle)} MB${IN_PROCESS ? ' (one process, in-process jobs)' : ', worker a separate process'}`);
  let samples = [];
  let workerSamples = [];
  const sampler = setInterval(() => {
    samples.push(memoryOf(api.pid).rss);
    if (worker) workerSamples.push(memoryOf(worker.pid).rss);
  }, 200);
  const peaks = () => ({ apiPeakRssMb: Math.round(Math.max(...samples)), ...(worker ? { workerPeakRssMb: Math.round(Math.max(...workerSamples)) } : {}) });
  const results = { apiIdleRssMb: Math.round(idle) };
  try {
    if (process.env.BENCH_SKIP_IMPORT !== '1') {
      // The custom fields: the seeded ones when present, else created (and deleted at the end).
      const existing = new Map((await db.query(`SELECT alias, properties FROM fields WHERE object = 'contact'`)).rows.map((r) => [r.alias, r]));
      for (const f of FIELDS) {
        if (existing.has(f.alias)) continue;
        const body = { label: f.label, alias: f.alias, type: f.type };
        if (f.type === 'select') body.properties = { list: ['software', 'retail', 'health'].map((v) => ({ label: v, value: v })) };
        const r = await call('POST', '/api/fields/contact/new', body);
        if (r.status !== 201) throw new Error(`field ${f.alias}: ${r.status} ${JSON.stringify(r.body)}`);
        createdFields.push(r.body.field.id);
      }
      const industry = (await db.query(`SELECT properties FROM fields WHERE object = 'contact' AND alias = 'industry'`)).rows[0];
      const options = (industry?.properties?.list ?? []).map((o) => o.value);
      const csvPath = join(dataDir, 'import.csv');
      let t = performance.now();
      await writeCsv(csvPath, tag, options.length ? options : ['software']);
      log(`wrote a ${ROWS.toLocaleString()}-row CSV in ${Math.round(performance.now() - t)} ms`);
      const mapping = {
        Name: 'name',
        'E-mail': 'email',
        Industry: 'fields.industry',
        Score: 'fields.lead_score',
        Newsletter: 'fields.newsletter',
        City: 'fields.city',
        'Signed up': 'fields.signup_date',
      };
      const form = new FormData();
      form.set('object', 'contacts');
      form.set('mode', 'upsert');
      form.set('idProperty', 'email');
      form.set('mapping', JSON.stringify(mapping));
      form.set('file', await openAsBlob(csvPath, { type: 'text/csv' }), 'import.csv');
      samples = [];
      workerSamples = [];
      t = performance.now();
      const started = await call('POST', '/api/imports', form);
      if (started.status !== 202) throw new Error(`import: ${started.status} ${JSON.stringify(started.body)}`);
      const uploadMs = performance.now() - t;
      let imp;
      for (;;) {
        imp = (await call('GET', `/api/imports/${started.body.import.id}`)).body.import;
        if (['completed', 'failed', 'canceled'].includes(imp.status)) break;
        await sleep(250);
      }
      const ms = performance.now() - t;
      if (imp.status !== 'completed' || imp.counts.failed) throw new Error(`import ended ${imp.status}: ${JSON.stringify(imp)}`);
      results.import = {
        rows: ROWS,
        ms: Math.round(ms),
        uploadMs: Math.round(uploadMs),
        rowsPerSecond: Math.round((ROWS * 1000) / ms),
        counts: imp.counts,
        ...peaks(),
      };
      log(`import: ${JSON.stringify(results.import)}`);
    }
    if (process.env.BENCH_SKIP_EXPORT !== '1') {
      samples = [];
      workerSamples = [];
      const t = performance.now();
      const started = await call('POST', '/api/exports', { object: 'contacts', format: 'csv' });
      if (started.status !== 202) throw new Error(`export: ${started.status} ${JSON.stringify(started.body)}`);
      let exp;
      for (;;) {
        exp = (await call('GET', `/api/exports/${started.body.export.id}`)).body.export;
        if (['completed', 'failed'].includes(exp.status)) break;
        await sleep(250);
      }
      const ms = performance.now() - t;
      if (exp.status !== 'completed') throw new Error(`export ended ${exp.status}: ${exp.error}`);
      // Download through the signed link and count the lines.
      const res = await fetch(exp.download.url.replace(/^https?:\/\/[^/]+/, base));
      let lines = 0;
      for await (const chunk of res.body) for (const b of chunk) if (b === 10) lines++;
      results.export = {
        rows: exp.rows,
        ms: Math.round(ms),
        rowsPerSecond: Math.round((exp.rows * 1000) / ms),
        bytes: exp.size,
        downloadedLines: lines,
        ...peaks(),
      };
      log(`export: ${JSON.stringify(results.export)}`);
    }
    results.apiPeakRssMb = Math.round(memoryOf(api.pid).peak);
    if (worker) results.workerPeakRssMb = Math.round(memoryOf(worker.pid).peak);
  } finally {
    clearInterval(sampler);
    for (const p of [api, worker]) {
      if (!p) continue;
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
    if (!IN_PROCESS) await deleteRedisKeys(REDIS_URL, prefix);
    // Leave the database as it was: the run's contacts, their events, the job rows, created fields.
    const t = performance.now();
    const del = await db.query(`DELETE FROM contacts WHERE email LIKE $1`, [`imp-${tag}-%@${DOMAIN}`]);
    await db.query(`DELETE FROM events WHERE type LIKE 'contact.%' AND data->>'email' LIKE $1`, [`imp-${tag}-%@${DOMAIN}`]);
    await db.query(`DELETE FROM events WHERE type IN ('import.completed')`);
    await db.query(`DELETE FROM imports`);
    await db.query(`DELETE FROM exports`);
    await db.query(`DELETE FROM notifications WHERE type = 'import_completed'`);
    for (const id of createdFields) await db.query(`DELETE FROM fields WHERE id = $1`, [id]);
    await db.query(`DELETE FROM api_tokens WHERE name = 'bench-imports'`).catch(() => undefined);
    log(`cleaned up ${del.rowCount} contacts in ${Math.round(performance.now() - t)} ms`);
    await db.end();
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(results, null, 2));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
