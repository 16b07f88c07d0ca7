/**
 * npm run bench:profile — where a request's CPU goes, layer by layer (the cost-per-layer tables of bench/RESULTS.md).
 *
 * Starts the built API (APP_ROLE=api) and the baseline server (bench/baseline.mjs) with V8's
 * sampling profiler (--cpu-prof), drives each scenario with a fixed number of requests, and
 * attributes the profile's samples that fall inside each scenario's load window to layers by the
 * source file of the function that was running (self time): Express routing, Nest's pipeline, each
 * guard, validation, helmet, request id, request-text checks, metrics, the exception filter,
 * logging, TypeORM, the PostgreSQL and Redis drivers, Node's HTTP stack, JSON, garbage collection.
 * Answers microseconds of CPU per request per layer, for the API and for the baseline. CPU time is
 * much less sensitive to other load on the machine than requests per second.
 *
 * Environment: BENCH_DATABASE (default sf_bench; an already seeded and migrated database, e.g. by
 * `npm run bench`), BENCH_DATABASE_ADMIN_URL, REDIS_URL, PROFILE_REQUESTS per scenario (20000),
 * PROFILE_CONNECTIONS (8), BENCH_ONLY=<regular expression>, PROFILE_BUILD=<dir with dist/> to
 * profile another build (e.g. a worktree of an older commit), BENCH_RESULTS=path to write Markdown.
 */
import autocannon from 'autocannon';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const BUILD = resolve(process.env.PROFILE_BUILD ?? ROOT);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench';
const REQUESTS = Number(process.env.PROFILE_REQUESTS ?? 20000);
const CONNECTIONS = Number(process.env.PROFILE_CONNECTIONS ?? 8);
const log = (m) => process.stderr.write(`[profile] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);

/** Layers, first match wins: [name, test on the frame's url, optional test on its function name]. */
const LAYERS = [
  ['guard: authentication (token)', (u) => /dist\/auth\/(auth\.guards|tokens\.service|api-token\.repository|access-token)/.test(u)],
  ['guard: rate limit', (u) => /dist\/rate-limit\/|@nestjs\/throttler/.test(u)],
  ['guard: content type, same origin', (u) => /dist\/common\/(content-type|same-origin)\.guard/.test(u)],
  ['guard: the fused guard itself (one pass over the six checks)', (u) => /dist\/request-guard/.test(u)],
  ['route access metadata', (u) => /dist\/common\/route-(access|table)/.test(u)],
  ['validation (pipes, class-validator/transformer)', (u) => /class-validator|class-transformer|dist\/common\/(validation|id\.pipe)/.test(u)],
  ['request-text checks', (u) => /dist\/common\/request-text/.test(u)],
  ['request id', (u) => /dist\/common\/request-id/.test(u)],
  ['metrics', (u) => /dist\/metrics\/|prom-client/.test(u)],
  ['security headers (helmet)', (u) => /node_modules\/helmet|dist\/common\/security-headers/.test(u)],
  ["serialization (JSON answer: the adapter's reply)", (u, f) => /dist\/common\/express-adapter/.test(u) && f === 'reply'],
  ['routing: prefix dispatch and middleware chain (express-adapter)', (u) => /dist\/common\/express-adapter/.test(u)],
  ['exception filter', (u) => /dist\/common\/http-exception/.test(u)],
  ['logging', (u) => /dist\/common\/logger|node_modules\/pino/.test(u)],
  ['idempotency', (u) => /dist\/common\/idempotency|dist\/idempotency/.test(u)],
  ['handler: contacts, campaigns (service, repository, mapping)', (u) => /dist\/(contacts|campaigns|fields|events)\//.test(u)],
  ['list parameters', (u) => /dist\/common\/list/.test(u)],
  ['other application code', (u) => /\/dist\//.test(u) && !/node_modules/.test(u)],
  ['Nest pipeline (router, guards, interceptors)', (u) => /@nestjs\/(core|common|platform-express)/.test(u)],
  [
    'Express routing and middleware',
    (u) =>
      /node_modules\/(express|router|path-to-regexp|body-parser|finalhandler|send|serve-static|qs|raw-body|type-is|content-type|accepts|negotiator|on-finished|parseurl|cors|vary)\//.test(
        u,
      ),
  ],
  ['TypeORM', (u) => /node_modules\/typeorm\//.test(u)],
  ['PostgreSQL driver (pg)', (u) => /node_modules\/(pg|pg-protocol|pg-types|pg-pool|postgres-\w+|pgpass)\//.test(u)],
  ['Redis client (ioredis)', (u) => /node_modules\/(ioredis|redis-parser|@ioredis|standard-as-callback|denque|cluster-key-slot)\//.test(u)],
  ['rxjs', (u) => /node_modules\/rxjs\//.test(u)],
  ['other packages', (u) => /node_modules\//.test(u)],
  ['baseline server code', (u) => /bench\/baseline\.mjs/.test(u)],
  [
    'Node HTTP, sockets and streams',
    (u) => /^node:(_http|http|net|stream|internal\/(streams|http|net|stream_base|js_stream))/.test(u) || /^node:internal\/(http|streams)/.test(u),
  ],
  ['Node timers, promises, events', (u) => /^node:(internal\/(timers|process\/task_queues|async_hooks|event_target)|events|timers)/.test(u)],
  ['Node crypto, buffers, url', (u) => /^node:(internal\/(crypto|buffer|url)|crypto|buffer|url)/.test(u)],
  ['Node other', (u) => /^node:/.test(u)],
  ['garbage collection', (_u, f) => f === '(garbage collector)'],
  ['native code without a JavaScript caller', () => true],
];

async function waitFor(url, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {
      /* not up */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not come up`);
}

function cannon(url, auth, makeRequest, opts) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        connections: CONNECTIONS,
        ...opts,
        headers: { authorization: auth, 'content-type': 'application/json' },
        requests: [{ setupRequest: (req) => ({ ...req, ...makeRequest() }) }],
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
  });
}

/** Microseconds of CPU per request per layer, for the samples inside each window. */
function attribute(profile, windows) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const layerOf = new Map();
  for (const n of profile.nodes) {
    const { functionName } = n.callFrame;
    if (functionName === '(idle)') {
      layerOf.set(n.id, null);
      continue;
    }
    if (functionName === '(program)') {
      layerOf.set(n.id, 'outside JavaScript (event loop, system calls)');
      continue;
    }
    // A native function (JSON.stringify, a regular expression, a socket write) counts for the
    // nearest caller that has a source file: the layer that called it.
    let m = n;
    while (m && !m.callFrame.url && m.callFrame.functionName !== '(garbage collector)' && parent.has(m.id)) m = byId.get(parent.get(m.id));
    const { url, functionName: fn } = m.callFrame;
    layerOf.set(n.id, LAYERS.find(([, test]) => test(url ?? '', fn))[0]);
  }
  const out = windows.map(() => new Map());
  const fns = windows.map(() => new Map());
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const dt = profile.timeDeltas[i + 1] ?? 0; // the time until the next sample is this sample's
    const w = windows.findIndex((x) => t >= x.from && t < x.to);
    if (w < 0 || !byId.has(profile.samples[i])) continue;
    const layer = layerOf.get(profile.samples[i]);
    if (!layer) continue;
    out[w].set(layer, (out[w].get(layer) ?? 0) + dt);
    const { functionName, url, lineNumber } = byId.get(profile.samples[i]).callFrame;
    const key = `${layer} · ${functionName || '(anonymous)'} ${(url ?? '').replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, 'dist/')}:${lineNumber + 1}`;
    fns[w].set(key, (fns[w].get(key) ?? 0) + dt);
  }
  const per = (m, i) => new Map([...m].map(([k, v]) => [k, v / windows[i].requests]));
  return { layers: out.map(per), functions: fns.map(per) };
}

async function profileServer(name, args, env, cwd, auth, scenarios) {
  const dir = mkdtempSync(join(tmpdir(), `cpuprof-${name}-`));
  const child = spawn(process.execPath, [`--cpu-prof`, `--cpu-prof-dir=${dir}`, ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out = (out + d).slice(-5000)));
  child.stderr.on('data', (d) => (out = (out + d).slice(-5000)));
  const url = `http://127.0.0.1:${env.PORT}`;
  await waitFor(`${url}/health`).catch(async () => waitFor(`${url}/`));
  const windows = [];
  for (const [scenario, make] of scenarios) {
    await cannon(url, auth, make, { amount: Math.min(2000, REQUESTS) }); // warm-up
    const from = Number(process.hrtime.bigint() / 1000n);
    const r = await cannon(url, auth, make, { amount: REQUESTS });
    const to = Number(process.hrtime.bigint() / 1000n);
    if (r.non2xx + r.errors > 0) log(`${name} ${scenario}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    windows.push({ scenario, from, to, requests: r.requests.total, rps: r.requests.average });
    log(`${name} ${scenario}: ${r.requests.average} req/s`);
  }
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`${name}: no profile written; output: ${out}`);
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  rmSync(dir, { recursive: true, force: true });
  return { windows, ...attribute(profile, windows) };
}

async function main() {
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const { rows: b } = await db.query(
    `SELECT (SELECT min(id) FROM contacts) c0, (SELECT max(id) FROM contacts) c1, (SELECT min(id) FROM campaigns) k0, (SELECT max(id) FROM campaigns) k1`,
  );
  const [c0, c1, k0, k1] = [b[0].c0, b[0].c1, b[0].k0, b[0].k1].map(Number);
  if (!c1) throw new Error(`${DB_NAME} holds no contacts: seed it first (npm run bench)`);
  await db.end();
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'profile', BUILD);
  const auth = `Bearer ${token}`;
  const tag = randomBytes(3).toString('hex');
  let seq = 0;
  const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));
  const only = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY, 'i') : null;
  const scenarios = [
    ['get contact by id', () => ({ method: 'GET', path: `/api/contacts/${rand(c0, c1)}` })],
    ['list contacts page 1 with total', () => ({ method: 'GET', path: `/api/contacts?page=1&limit=30` })],
    [
      'create contact',
      () => ({
        method: 'POST',
        path: '/api/contacts',
        body: JSON.stringify({ name: 'Profile Person', email: `profile-${tag}-${seq++}@bench.test`, company: 'Bench Co' }),
      }),
    ],
    ['add contact to campaign', () => ({ method: 'POST', path: `/api/campaigns/${rand(k0, k1)}/contact/${rand(c0, c1)}/add` })],
  ].filter(([n]) => !only || only.test(n));

  const [apiPort, basePort] = [await freePort(), await freePort()];
  const app = await profileServer(
    'api',
    ['dist/main.js'],
    {
      DATABASE_URL: dbUrl,
      REDIS_URL,
      REDIS_PREFIX: `profile${tag}`,
      LOG_LEVEL: 'warn',
      RUN_MIGRATIONS: 'false',
      RATE_LIMIT_ENTERPRISE: '1000000000',
      APP_ROLE: 'api',
      PORT: String(apiPort),
      HOST: '127.0.0.1',
      NODE_OPTIONS: DEPLOYED_NODE_OPTIONS,
    },
    BUILD,
    auth,
    scenarios,
  );
  const base = await profileServer(
    'baseline',
    [join(ROOT, 'bench/baseline.mjs')],
    { DATABASE_URL: dbUrl, REDIS_URL, PORT: String(basePort), BENCH_TOKEN_HASHES: createHash('sha256').update(token).digest('hex') },
    ROOT,
    auth,
    scenarios,
  );

  const fmt = (v) => (v === undefined ? '—' : Math.round(v).toLocaleString('en-US'));
  const sections = [];
  scenarios.forEach(([scenario], i) => {
    const a = app.layers[i];
    const total = [...a.values()].reduce((x, y) => x + y, 0);
    const baseTotal = [...base.layers[i].values()].reduce((x, y) => x + y, 0);
    const lines = [
      `### ${scenario}: ${fmt(total)} µs of API CPU per request (baseline ${fmt(baseTotal)} µs); ${fmt(app.windows[i].rps)} req/s vs ${fmt(base.windows[i].rps)} at ${CONNECTIONS} connections`,
      '',
      '| Layer | API µs/request | share | baseline µs/request |',
      '|---|---:|---:|---:|',
    ];
    for (const [layer, us] of [...a].sort((x, y) => y[1] - x[1])) {
      lines.push(`| ${layer} | ${fmt(us)} | ${((us / total) * 100).toFixed(1)} % | ${fmt(base.layers[i].get(layer))} |`);
    }
    for (const [layer, us] of base.layers[i]) if (!a.has(layer)) lines.push(`| ${layer} | — | — | ${fmt(us)} |`);
    const top = Number(process.env.PROFILE_TOP ?? 0);
    if (top > 0) {
      lines.push('', `The ${top} costliest functions of the API (self time, µs/request):`, '');
      for (const [fn, us] of [...app.functions[i]].sort((x, y) => y[1] - x[1]).slice(0, top)) lines.push(`- ${fmt(us)} ${fn}`);
    }
    sections.push(lines.join('\n'));
  });
  const text = `Build: ${BUILD}. ${REQUESTS.toLocaleString()} requests per scenario after a warm-up, ${CONNECTIONS} connections; self time of the sampled functions inside each load window.\n\n${sections.join('\n\n')}\n`;
  process.stdout.write(`\n${text}`);
  if (process.env.BENCH_RESULTS) writeFileSync(process.env.BENCH_RESULTS, text);
  process.exit(0);
}

main().catch((e) => {
  log(`failed: ${e.stack ?? e}`);
  process.exit(1);
});
