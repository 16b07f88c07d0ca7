/**
 * Text message throughput (broadcasts and single sends), log provider, API and worker as separate processes
 * (APP_ROLE=api / worker) against the machine's PostgreSQL and Redis, in a database of its own:
 * - the broadcast row: a broadcast to N recipients (default 100,000): the send request's latency,
 *   messages/s from the send to the broadcast's completion, and the p50/p99 of GET /api/contacts/{id}
 *   while it runs (and idle, before);
 * - the single-send row: M draft messages (default 5,000) sent one by one through
 *   POST /api/text-messages/{id}/send (32 clients), messages/s from the first request until every one
 *   is sent, and the same GET's p50/p99 meanwhile.
 *
 *   npm run build && node bench/broadcast.mjs [recipients=100000] [singleSends=5000]
 *   (SMS_BROADCAST_LANES passes through to the worker)
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import pg from 'pg';
import { ROOT, createToken } from './lib.mjs';

const N = Number(process.argv[2] ?? 100_000);
const M = Number(process.argv[3] ?? 5_000);
const ADMIN = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB = `sf_bench_broadcast_${randomBytes(3).toString('hex')}`;
const dbUrl = ADMIN.replace(/\/[^/]*$/, `/${DB}`);
const log = (...a) => console.log(new Date().toISOString().slice(11, 19), ...a);

const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });

function start(name, env) {
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out = (out + d).slice(-20000)));
  child.stderr.on('data', (d) => (out = (out + d).slice(-20000)));
  child.on('exit', (code) => code && log(`${name} exited ${code}: ${out.slice(-2000)}`));
  return child;
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : null;
};

async function latency(url, auth, ms) {
  const out = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const t = performance.now();
    await fetch(url, { headers: { authorization: auth } }).then((r) => r.arrayBuffer());
    out.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 20));
  }
  return out;
}

async function main() {
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DB}`);
  const env0 = { ...process.env, DATABASE_URL: dbUrl };
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: env0, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  log(`seeding ${N} contacts in a campaign`);
  await db.query(
    `INSERT INTO contacts (name, email, phone) SELECT 'Contact ' || i, 'c' || i || '@bench.test', '+1415' || lpad(i::text, 7, '0') FROM generate_series(1, $1) i`,
    [N],
  );
  const { rows: k } = await db.query(`INSERT INTO campaigns (name) VALUES ('Bench') RETURNING id`);
  await db.query(`INSERT INTO campaign_members (campaign_id, contact_id) SELECT $1, id FROM contacts`, [k[0].id]);
  await db.query('ANALYZE');
  const token = createToken(env0, 'bench');
  const auth = `Bearer ${token}`;
  const port = await freePort();
  const env = {
    DATABASE_URL: dbUrl,
    REDIS_URL,
    REDIS_PREFIX: `bb${randomBytes(3).toString('hex')}`,
    LOG_LEVEL: 'warn',
    RUN_MIGRATIONS: 'false',
    RATE_LIMIT_ENTERPRISE: '1000000000',
    SMS_PROVIDER: 'log',
    // Single sends are started by the sms queue's limiter (100/s by default): out of the way, as in bench/run.mjs.
    SMS_RATE_LIMIT_PER_SECOND: '100000',
    ...(process.env.SMS_BROADCAST_LANES ? { SMS_BROADCAST_LANES: process.env.SMS_BROADCAST_LANES } : {}),
  };
  const api = start('api', { ...env, APP_ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
  const worker = start('worker', { ...env, APP_ROLE: 'worker' });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {
      /* not up */
    }
    if (i > 300) throw new Error('api did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  await new Promise((r) => setTimeout(r, 3000)); // the worker
  const probe = `${base}/api/contacts/${Math.ceil(N / 2)}`;
  const idle = await latency(probe, auth, 5000);
  const created = await fetch(`${base}/api/text-messages/broadcasts`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', content: 'Hi {{contact.name | "there"}}, this is the bench.', audience: { campaignId: k[0].id } }),
  }).then((r) => r.json());
  const id = created.broadcast.id;
  // Probed from the send request on (it creates the messages in one statement), until completed.
  let busy = [];
  let done = false;
  const prober = (async () => {
    while (!done) busy = busy.concat(await latency(probe, auth, 1000));
  })();
  const t0 = performance.now();
  const sent = await fetch(`${base}/api/text-messages/broadcasts/${id}/send`, { method: 'POST', headers: { authorization: auth } });
  const sendMs = performance.now() - t0;
  log(`send answered ${sent.status} in ${Math.round(sendMs)} ms`);
  let b;
  for (;;) {
    b = (await fetch(`${base}/api/text-messages/broadcasts/${id}`, { headers: { authorization: auth } }).then((r) => r.json())).broadcast;
    if (b.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const totalS = (performance.now() - t0) / 1000;
  done = true;
  await prober;
  const { rows: tm } = await db.query(
    `SELECT extract(epoch FROM max(sent_at) - min(sent_at))::float8 AS span, count(*)::int AS n FROM text_messages WHERE broadcast_id = $1`,
    [id],
  );
  const { rows: ev } = await db.query(`SELECT count(*)::int AS n FROM events WHERE type LIKE 'text_message.%'`);
  log(`counts ${JSON.stringify(b.counts)} skipped ${JSON.stringify(b.skipped)}`);
  log(
    `${N} recipients: ${Math.round(N / totalS)} msg/s from the send request to completed (${totalS.toFixed(1)} s); provider window ${tm[0].span.toFixed(1)} s = ${Math.round(tm[0].n / tm[0].span)} msg/s`,
  );
  log(`per-message events written: ${ev[0].n}`);
  log(
    `GET contact p50/p99 idle ${pct(idle, 50).toFixed(1)}/${pct(idle, 99).toFixed(1)} ms; during the broadcast ${pct(busy, 50)?.toFixed(1)}/${pct(busy, 99)?.toFixed(1)} ms (${busy.length} samples)`,
  );
  const broadcastRow = { mps: N / totalS, idleP99: pct(idle, 99), busyP99: pct(busy, 99) };

  // Single sends: M drafts, each sent by its own request.
  const { rows: drafts } = await db.query(
    `INSERT INTO text_messages (content, recipient, status, created_by_user)
     SELECT 'Single ' || i, '+1415' || lpad(i::text, 7, '0'), 'draft', 'bench' FROM generate_series(1, $1) i RETURNING id`,
    [M],
  );
  let next = 0;
  let refused = 0;
  busy = [];
  done = false;
  const prober2 = (async () => {
    while (!done) busy = busy.concat(await latency(probe, auth, 1000));
  })();
  const s0 = performance.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (;;) {
        const i = next++;
        if (i >= drafts.length) return;
        const r = await fetch(`${base}/api/text-messages/${drafts[i].id}/send`, { method: 'POST', headers: { authorization: auth } });
        await r.arrayBuffer();
        if (r.status !== 202) refused++;
      }
    }),
  );
  const acceptedS = (performance.now() - s0) / 1000;
  const ids = drafts.map((r) => r.id);
  for (;;) {
    const { rows: left } = await db.query(`SELECT count(*)::int AS n FROM text_messages WHERE id = ANY($1) AND status IN ('draft', 'queued')`, [ids]);
    if (left[0].n === 0) break;
    if (performance.now() - s0 > 600_000) throw new Error('single sends not done within 10 minutes');
    await new Promise((r) => setTimeout(r, 100));
  }
  const singleS = (performance.now() - s0) / 1000;
  done = true;
  await prober2;
  log(
    `${M} single sends: ${Math.round(M / singleS)} msg/s end to end (${singleS.toFixed(1)} s; accepted at ${Math.round(M / acceptedS)} req/s, ${refused} not 202); GET contact p50/p99 meanwhile ${pct(busy, 50)?.toFixed(1)}/${pct(busy, 99)?.toFixed(1)} ms`,
  );
  log(
    `ROW broadcast ${N}: ${Math.round(broadcastRow.mps)} msg/s, API p99 ${broadcastRow.busyP99?.toFixed(1)} ms (idle ${broadcastRow.idleP99.toFixed(1)} ms) | single sends ${M}: ${Math.round(M / singleS)} msg/s, API p99 ${pct(busy, 99)?.toFixed(1)} ms`,
  );

  api.kill('SIGTERM');
  worker.kill('SIGTERM');
  await db.end();
  await new Promise((r) => setTimeout(r, 2000));
  await admin.query(`DROP DATABASE ${DB} WITH (FORCE)`);
  await admin.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
