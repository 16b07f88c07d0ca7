/**
 * npm run bench: seeds a database at a million contacts, starts the real application from the
 * build (API and worker as separate processes, as deployed) and the baseline server, drives each
 * scenario with autocannon at a fixed concurrency for a fixed time, and prints one table:
 * scenario, req/s, p50, p99, ratio to the baseline, API peak RSS.
 *
 * Environment: BENCH_DATABASE_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * REDIS_URL (default redis://127.0.0.1:6379), BENCH_DURATION seconds per scenario (10),
 * BENCH_CONNECTIONS (32), BENCH_REUSE=1 to keep an already seeded database, BENCH_RESULTS=path to
 * also write the table as Markdown, BENCH_CONTACTS / BENCH_DEALS / BENCH_MEMBERSHIPS to seed less,
 * BENCH_ONLY=<regular expression> to run only the scenarios whose names match, BENCH_BUILD=<dir> to
 * measure another build's dist/ (e.g. a worktree of an older commit) against the same database and baseline.
 */
import autocannon from 'autocannon';
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import pg from 'pg';
import { seed, SIZES } from './seed.mjs';
import { ADMIN_URL, DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

/** The build to measure (its dist/): this checkout, or BENCH_BUILD (e.g. a worktree of an older commit, for before/after). */
const BUILD = process.env.BENCH_BUILD ? resolve(process.env.BENCH_BUILD) : ROOT;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench';
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const log = (m) => process.stderr.write(`[bench] ${m}\n`);

const dbUrl = databaseUrl(DB_NAME);

async function prepareDatabase() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME])).rowCount > 0;
  if (exists && process.env.BENCH_REUSE === '1') {
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const n = await db.query(`SELECT coalesce(sum(n),0)::bigint AS n FROM row_counts WHERE table_name='contacts'`).catch(() => ({ rows: [{ n: 0 }] }));
    await db.end();
    if (Number(n.rows[0].n) >= SIZES.contacts) {
      await admin.end();
      log(`reusing ${DB_NAME} (${n.rows[0].n} contacts)`);
      if (BUILD === ROOT)
        execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
      return null;
    }
  }
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  const t = Date.now();
  await seed(dbUrl, log);
  return (Date.now() - t) / 1000;
}

function startProcess(name, args, env, cwd = ROOT) {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out = (out + d).slice(-20000)));
  child.stderr.on('data', (d) => (out = (out + d).slice(-20000)));
  child.on('exit', (code) => code && code !== 0 && log(`${name} exited with ${code}: ${out.slice(-2000)}`));
  return { child, logs: () => out };
}

async function waitFor(url, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {
      /* not up */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not come up`);
}

/** Peak resident set size of a process so far, from /proc (VmHWM), in MB. */
function peakRssMb(pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
}

function cannon(url, auth, makeRequest, { duration = DURATION, connections = CONNECTIONS, amount } = {}) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        connections,
        ...(amount ? { amount } : { duration }),
        headers: { authorization: auth, 'content-type': 'application/json' },
        requests: [{ setupRequest: (req) => ({ ...req, ...makeRequest() }) }],
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
  });
}

const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));
let createSeq = 0;
const runTag = randomBytes(3).toString('hex');

async function main() {
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}`;
  log(machine);
  const seeded = await prepareDatabase();
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const { rows: b } = await db.query(
    `SELECT (SELECT min(id) FROM contacts) c0, (SELECT max(id) FROM contacts) c1, (SELECT min(id) FROM campaigns) k0, (SELECT max(id) FROM campaigns) k1`,
  );
  const [c0, c1, k0, k1] = [b[0].c0, b[0].c1, b[0].k0, b[0].k1].map(Number);

  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench', BUILD);
  const auth = `Bearer ${token}`;
  const prefix = `bench${runTag}`;
  const [apiPort, basePort] = [await freePort(), await freePort()];
  const appEnv = {
    DATABASE_URL: dbUrl,
    REDIS_URL,
    REDIS_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    RUN_MIGRATIONS: 'false',
    // The counter is still incremented on every request; the limit is raised so the load is not refused.
    RATE_LIMIT_ENTERPRISE: '1000000000',
    SMS_PROVIDER: 'log',
    SMS_RATE_LIMIT_PER_SECOND: '100000',
    // The event-throughput scenario's receiver listens on 127.0.0.1 over plain http.
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    // The Node.js options of the deployed image (Dockerfile), unless overridden.
    NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS ?? DEPLOYED_NODE_OPTIONS,
  };
  const api = startProcess('api', ['dist/main.js'], { ...appEnv, APP_ROLE: 'api', PORT: String(apiPort), HOST: '127.0.0.1' }, BUILD);
  const worker = startProcess('worker', ['dist/main.js'], { ...appEnv, APP_ROLE: 'worker' }, BUILD);
  const baseline = startProcess('baseline', ['bench/baseline.mjs'], {
    DATABASE_URL: dbUrl,
    REDIS_URL,
    PORT: String(basePort),
    BENCH_TOKEN_HASHES: createHash('sha256').update(token).digest('hex'),
  });
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const baseUrl = `http://127.0.0.1:${basePort}`;
  await waitFor(`${apiUrl}/health`);
  await waitFor(`${baseUrl}/`);

  const emailSample = (await db.query(`SELECT email FROM contacts WHERE id = $1`, [c0 + (123457 % (c1 - c0 + 1))])).rows[0].email;
  const emailPart = emailSample.split('@')[0].slice(-9); // e.g. "mith12345": a substring, not a prefix
  const companySample = (await db.query(`SELECT company FROM contacts WHERE id = $1`, [c0 + 777])).rows[0].company;

  const scenarios = [
    ['get contact by id', () => ({ method: 'GET', path: `/api/contacts/${rand(c0, c1)}` })],
    ['list contacts page 1 with total', () => ({ method: 'GET', path: `/api/contacts?page=1&limit=30` })],
    ['list contacts page 1,000', () => ({ method: 'GET', path: `/api/contacts?page=1000&limit=30` })],
    [`search email substring "${emailPart}"`, () => ({ method: 'GET', path: `/api/contacts?search=${encodeURIComponent(emailPart)}` })],
    [`search company "${companySample}"`, () => ({ method: 'GET', path: `/api/contacts?search=${encodeURIComponent(companySample)}` })],
    [
      'create contact',
      () => ({
        method: 'POST',
        path: '/api/contacts',
        body: JSON.stringify({ name: 'Bench Person', email: `bench-${runTag}-${process.pid}-${createSeq++}@bench.test`, company: 'Bench Co' }),
      }),
    ],
    ['add contact to campaign', () => ({ method: 'POST', path: `/api/campaigns/${rand(k0, k1)}/contact/${rand(c0, c1)}/add` })],
    // The baseline's add writes campaign.contact_added as the application does; this row compares with the bare insert.
    [
      'add contact to campaign (baseline without the event insert)',
      () => ({ method: 'POST', path: `/api/campaigns/${rand(k0, k1)}/contact/${rand(c0, c1)}/add` }),
      (r) => ({ ...r, path: `${r.path}?outbox=0` }),
    ],
    ["list a campaign's contacts", () => ({ method: 'GET', path: `/api/campaigns/${rand(k0, k1)}/contacts?limit=30` })],
  ];

  const only = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY, 'i') : null;
  const wanted = (name) => !only || only.test(name);
  const rows = [];
  for (const [name, make, forBaseline = (r) => r] of scenarios.filter(([name]) => wanted(name))) {
    await cannon(apiUrl, auth, make, { duration: 2 }); // warm-up
    const app = await cannon(apiUrl, auth, make);
    const baseMake = () => forBaseline(make());
    await cannon(baseUrl, auth, baseMake, { duration: 2 });
    const base = await cannon(baseUrl, auth, baseMake);
    const appErrors = app.non2xx + app.errors;
    rows.push({
      name,
      rps: app.requests.average,
      p50: app.latency.p50,
      p99: app.latency.p99,
      ratio: base.requests.average ? app.requests.average / base.requests.average : null,
      baseRps: base.requests.average,
      baseP99: base.latency.p99,
      errors: appErrors,
      rss: peakRssMb(api.child.pid),
    });
    log(`${name}: ${app.requests.average} req/s (baseline ${base.requests.average}), p99 ${app.latency.p99} ms, non-2xx ${appErrors}`);
  }

  // Filters, deep cursors and the search shapes at 4 connections (API only: the baseline has no
  // filter language). The cursor of page 10,000 (300,000 rows in, by id) comes from one count=false page.
  const cursorOf = async (path) => (await (await fetch(`${apiUrl}${path}`, { headers: { authorization: auth } })).json().catch(() => ({})))?.next ?? null;
  const deepCursor = await cursorOf('/api/contacts?count=false&orderBy=id&limit=30&page=10000');
  const firstCursor = await cursorOf('/api/contacts?count=false&orderBy=id&limit=30');
  const industry = (await db.query(`SELECT fields->>'industry' AS v FROM contacts WHERE id = $1`, [c0 + 4242])).rows[0]?.v ?? 'retail';
  const listScenarios = [
    [
      `filter eq on a select custom field (fields.industry = ${industry}), page of 30`,
      () => ({ method: 'GET', path: `/api/contacts?limit=30&count=false&filter=${encodeURIComponent(`fields.industry[eq]:${industry}`)}` }),
    ],
    [
      `filter eq on an indexed property (email)`,
      () => ({ method: 'GET', path: `/api/contacts?limit=30&filter=${encodeURIComponent(`email[eq]:${emailSample}`)}` }),
    ],
    ['cursor page after page 1 (by id)', () => ({ method: 'GET', path: `/api/contacts?limit=30&orderBy=id&after=${encodeURIComponent(firstCursor ?? '')}` })],
    [
      'cursor page at depth 10,000 pages (by id)',
      () => ({ method: 'GET', path: `/api/contacts?limit=30&orderBy=id&after=${encodeURIComponent(deepCursor ?? '')}` }),
    ],
    [`search email substring "${emailPart}" (4 connections)`, () => ({ method: 'GET', path: `/api/contacts?search=${encodeURIComponent(emailPart)}` })],
    [`search company "${companySample}" (4 connections)`, () => ({ method: 'GET', path: `/api/contacts?search=${encodeURIComponent(companySample)}` })],
  ];
  for (const [name, make] of listScenarios.filter(([name]) => wanted(name))) {
    if ((name.startsWith('cursor') && !(deepCursor && firstCursor)) || !wanted('filter|cursor|connections')) continue;
    await cannon(apiUrl, auth, make, { duration: 2, connections: 4 });
    const app = await cannon(apiUrl, auth, make, { connections: 4 });
    rows.push({
      name,
      rps: app.requests.average,
      p50: app.latency.p50,
      p99: app.latency.p99,
      ratio: null,
      baseRps: null,
      baseP99: null,
      errors: app.non2xx + app.errors,
      rss: peakRssMb(api.child.pid),
    });
    log(`${name}: ${app.requests.average} req/s, p99 ${app.latency.p99} ms at 4 connections, non-2xx ${app.non2xx + app.errors}`);
  }

  // Sales report over the million deals: time from `run` to results available.
  const report = await (
    await fetch(`${apiUrl}/api/reports/new`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'Bench sales',
        type: 'sales',
        schedule: 'monthly',
        isPublished: true,
        filters: { dateRange: '2000-01-01..2100-01-01' },
        columns: ['date', 'product', 'revenue', 'quantity', 'salesperson'],
      }),
    })
  )
    .json()
    .catch(() => null);
  const reportTimes = [];
  if (report?.report?.id && wanted('sales report')) {
    for (let i = 0; i < 3; i++) {
      const before = (await (await fetch(`${apiUrl}/api/reports/${report.report.id}/results`, { headers: { authorization: auth } })).json().catch(() => ({})))
        ?.results?.generatedAt;
      const t = Date.now();
      const run = await fetch(`${apiUrl}/api/reports/${report.report.id}/run`, { method: 'POST', headers: { authorization: auth } });
      if (run.status !== 200) break;
      for (;;) {
        const r = await fetch(`${apiUrl}/api/reports/${report.report.id}/results`, { headers: { authorization: auth } });
        const body = r.status === 200 ? await r.json() : null;
        if (body?.results?.generatedAt && body.results.generatedAt !== before) break;
        if (Date.now() - t > 120000) throw new Error('report did not finish in 120 s');
        await new Promise((res) => setTimeout(res, 20));
      }
      reportTimes.push((Date.now() - t) / 1000);
      await new Promise((res) => setTimeout(res, 1100)); // generatedAt has second precision
    }
    const t = Date.now();
    await db.query(
      `SELECT date_trunc('day', d.closed_at) AS date, d.product, u.name, sum(d.value), sum(d.quantity)
         FROM deals d LEFT JOIN users u ON u.id = d.owner_id WHERE d.status = 'won' GROUP BY 1, 2, 3`,
    );
    const baseReport = (Date.now() - t) / 1000;
    reportTimes.sort((a, b) => a - b);
    rows.push({
      name: 'sales report over 1M deals (s from run to results)',
      seconds: reportTimes[1] ?? reportTimes[0],
      baseSeconds: baseReport,
      rss: peakRssMb(api.child.pid),
    });
    log(`report: ${reportTimes.join(', ')} s (the bare aggregation: ${baseReport} s)`);
  } else {
    log('reports resource not available: report scenario skipped');
  }

  // 10,000 text messages through the log provider, end to end (API accepts, worker sends and records).
  const hasSms = (await db.query(`SELECT to_regclass('public.text_messages') IS NOT NULL AS ok`)).rows[0].ok;
  if (hasSms && wanted('text messages')) {
    const n = Number(process.env.BENCH_SMS ?? 10000);
    const { rows: ids } = await db.query(
      `INSERT INTO text_messages (content, recipient, status, created_by, created_by_user)
       SELECT 'Bench message ' || i, '+14155550100', 'draft', NULL, 'bench' FROM generate_series(1, $1) i RETURNING id`,
      [n],
    );
    let next = 0;
    const t = Date.now();
    const sent = await cannon(apiUrl, auth, () => ({ method: 'POST', path: `/api/text-messages/${ids[next++ % ids.length].id}/send` }), { amount: n });
    const accepted = (Date.now() - t) / 1000;
    const list = ids.map((r) => r.id);
    for (;;) {
      const { rows: left } = await db.query(
        `SELECT count(*)::int AS n FROM text_messages WHERE id = ANY($1) AND status NOT IN ('sent', 'delivered', 'failed')`,
        [list],
      );
      if (left[0].n === 0) break;
      if (Date.now() - t > 600000) throw new Error('messages not sent within 10 minutes');
      await new Promise((res) => setTimeout(res, 100));
    }
    const total = (Date.now() - t) / 1000;
    rows.push({
      name: `send ${n.toLocaleString()} text messages, log provider (messages/s end to end)`,
      mps: n / total,
      acceptedRps: n / accepted,
      errors: sent.non2xx + sent.errors,
      rss: peakRssMb(api.child.pid),
    });
    log(`sms: ${n} in ${total} s (accepted in ${accepted} s), non-2xx ${sent.non2xx}`);
  } else {
    log('text messages resource not available: SMS scenario skipped');
  }

  // What the outbox costs create contact: the baseline server with and without the event insert in
  // the same statement (the application always writes it), alternated, each after a warm-up.
  if (wanted('outbox cost')) {
    const make = (outbox) => () => ({
      method: 'POST',
      path: outbox ? '/api/contacts' : '/api/contacts?outbox=0',
      body: JSON.stringify({ name: 'Bench Person', email: `bench-${runTag}-${process.pid}-${createSeq++}@bench.test`, company: 'Bench Co' }),
    });
    const runs = { with: [], without: [] };
    for (let round = 0; round < 2; round++) {
      for (const outbox of [false, true]) {
        await cannon(baseUrl, auth, make(outbox), { duration: 2 });
        const r = await cannon(baseUrl, auth, make(outbox));
        runs[outbox ? 'with' : 'without'].push(r.requests.average);
      }
    }
    const avg = (a) => a.reduce((x, y) => x + y, 0) / a.length;
    const cost = 1 - avg(runs.with) / avg(runs.without);
    rows.push({
      name: 'outbox cost on create contact (baseline server, with vs without the event insert)',
      outbox: { with: avg(runs.with), without: avg(runs.without), cost },
    });
    log(`outbox: ${runs.with.join(', ')} req/s with, ${runs.without.join(', ')} without: cost ${(cost * 100).toFixed(1)} %`);
  }

  // Contention: get by id at 4 connections, idle and then while creates and campaign adds run at 8
  // connections each; meanwhile pg_stat_activity is sampled every 20 ms, and each active statement is
  // counted as the event sequencer's, the segment refresher's or the rest's (the share of the
  // database's busy time each holds).
  if (wanted('contention')) {
    const getById = () => ({ method: 'GET', path: `/api/contacts/${rand(c0, c1)}` });
    const create = () => ({
      method: 'POST',
      path: '/api/contacts',
      body: JSON.stringify({ name: 'Bench Person', email: `bench-${runTag}-${process.pid}-${createSeq++}@bench.test`, company: 'Bench Co' }),
    });
    const add = () => ({ method: 'POST', path: `/api/campaigns/${rand(k0, k1)}/contact/${rand(c0, c1)}/add` });
    await cannon(apiUrl, auth, getById, { duration: 2, connections: 4 });
    const idle = await cannon(apiUrl, auth, getById, { connections: 4 });
    const busy = { sequencer: 0, refresher: 0, other: 0 };
    let sampling = true;
    const sampler = (async () => {
      const c = new pg.Client({ connectionString: dbUrl });
      await c.connect();
      while (sampling) {
        const { rows: active } = await c.query(
          `SELECT query FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`,
        );
        for (const { query } of active) {
          if (/event_feed_state/.test(query) && /(snap|SET sequence)/.test(query)) busy.sequencer++;
          else if (/segment_(refresh_state|members)|unnest\(\$3::text\[\], \$4::text\[\]\)/.test(query)) busy.refresher++;
          else busy.other++;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      await c.end();
    })();
    const [loaded] = await Promise.all([
      cannon(apiUrl, auth, getById, { connections: 4 }),
      cannon(apiUrl, auth, create, { connections: 8 }),
      cannon(apiUrl, auth, add, { connections: 8 }),
    ]);
    sampling = false;
    await sampler;
    const all = busy.sequencer + busy.refresher + busy.other || 1;
    rows.push({
      name: 'contention: get contact by id p99 (4 connections) idle / under creates and campaign adds (8 + 8 connections)',
      contention: { idle: idle.latency.p99, loaded: loaded.latency.p99, sequencer: busy.sequencer / all, refresher: busy.refresher / all },
    });
    log(`contention: p99 ${idle.latency.p99} ms idle, ${loaded.latency.p99} ms loaded; database busy: ${JSON.stringify(busy)}`);
  }

  // Event throughput end to end: N committed events (one statement, as a burst of changes would
  // leave them) to a webhook's receiver on 127.0.0.1, through the sequencer, the dispatcher, BullMQ
  // and the delivery workers; timed from the commit to the last event received.
  if (wanted('event throughput')) {
    const n = Number(process.env.BENCH_EVENTS ?? 20000);
    const seen = new Set();
    let lastAt = 0;
    const receiver = createHttpServer((req, res) => {
      const id = req.headers['webhook-id'];
      req.resume();
      req.on('end', () => {
        if (id) seen.add(id);
        lastAt = Date.now();
        res.writeHead(204).end();
      });
    });
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
    const hookRes = await fetch(`${apiUrl}/api/webhooks`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiver.address().port}/events`, events: ['contact.updated'] }),
    });
    const hook = (await hookRes.json()).webhook;
    if (!hook) throw new Error(`webhook not created: ${hookRes.status}`);
    await new Promise((r) => setTimeout(r, 1000));
    const t = Date.now();
    await db.query(
      `INSERT INTO events (type, data) SELECT 'contact.updated', jsonb_build_object('id', i, 'name', 'Bench ' || i) FROM generate_series(1, $1) i`,
      [n],
    );
    const committed = Date.now();
    for (;;) {
      if (seen.size >= n) break;
      if (Date.now() - t > 600000) throw new Error(`only ${seen.size} of ${n} events received within 10 minutes`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const seconds = (lastAt - committed) / 1000;
    await fetch(`${apiUrl}/api/webhooks/${hook.id}`, { method: 'DELETE', headers: { authorization: auth } });
    receiver.close();
    rows.push({ name: `event throughput, ${n.toLocaleString()} events commit → webhook receiver (events/s)`, eps: n / seconds, rss: peakRssMb(api.child.pid) });
    log(`events: ${n} in ${seconds} s`);
  }

  const peak = peakRssMb(api.child.pid);
  for (const p of [api, worker, baseline]) p.child.kill('SIGTERM');
  await db.end();

  const fmt = (v, d = 0) => (v === null || v === undefined ? '—' : Number(v).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));
  const lines = [
    `| Scenario | req/s | p50 ms | p99 ms | ratio to baseline | baseline req/s | baseline p99 ms | non-2xx | API peak RSS MB |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|`,
  ];
  for (const r of rows) {
    if (r.seconds !== undefined)
      lines.push(`| ${r.name} | — | — | ${fmt(r.seconds * 1000)} (run→results) | — | — | ${fmt(r.baseSeconds * 1000)} (bare SQL) | — | ${fmt(r.rss)} |`);
    else if (r.outbox !== undefined)
      lines.push(
        `| ${r.name} | ${fmt(r.outbox.with)} with, ${fmt(r.outbox.without)} without | — | — | cost ${fmt(r.outbox.cost * 100, 1)} % | — | — | — | — |`,
      );
    else if (r.contention !== undefined)
      lines.push(
        `| ${r.name} | — | — | ${fmt(r.contention.idle)} / ${fmt(r.contention.loaded)} (${fmt(r.contention.loaded / (r.contention.idle || 1), 1)}×) | — | — | — | — | sequencer ${fmt(r.contention.sequencer * 100, 1)} %, segment refresher ${fmt(r.contention.refresher * 100, 1)} % of busy database samples |`,
      );
    else if (r.eps !== undefined) lines.push(`| ${r.name} | ${fmt(r.eps)} events/s | — | — | — | — | — | — | ${fmt(r.rss)} |`);
    else if (r.mps !== undefined)
      lines.push(`| ${r.name} | ${fmt(r.mps)} msg/s (${fmt(r.acceptedRps)} accepted/s) | — | — | — | — | — | ${fmt(r.errors)} | ${fmt(r.rss)} |`);
    else
      lines.push(
        `| ${r.name} | ${fmt(r.rps)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.ratio, 2)} | ${fmt(r.baseRps)} | ${fmt(r.baseP99)} | ${fmt(r.errors)} | ${fmt(r.rss)} |`,
      );
  }
  const header = [
    `Machine: ${machine}. PostgreSQL and Redis on 127.0.0.1; API and worker as separate processes; load generator in this process.`,
    `Data: ${SIZES.contacts.toLocaleString()} contacts, ${SIZES.memberships.toLocaleString()} memberships, ${SIZES.deals.toLocaleString()} deals, ${SIZES.textMessages.toLocaleString()} text messages${seeded !== null ? ` (seeded in ${Math.round(seeded)} s)` : ' (reused)'}.`,
    `Load: ${CONNECTIONS} connections, ${DURATION} s per scenario after a 2 s warm-up. API peak RSS (VmHWM) at the end: ${peak ?? '—'} MB.`,
  ];
  const table = [...header, '', ...lines].join('\n');
  process.stdout.write(`\n${table}\n`);
  if (process.env.BENCH_RESULTS) writeFileSync(process.env.BENCH_RESULTS, `${table}\n`);
  process.exit(0);
}

main().catch((e) => {
  log(`failed: ${e.stack ?? e}`);
  process.exit(1);
});
