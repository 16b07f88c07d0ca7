/**
 * Tracked events benchmark, on a database of its own (BENCH_TRACKING_DATABASE, default
 * sf_bench_tracking), seeded with BENCH_TRACKING_CONTACTS contacts (1,000,000) known by an
 * externalId and BENCH_TRACKING_EVENTS tracked events (10,000,000) spread over the last 60 days,
 * with their daily counts, written set-based in SQL, and each contact's contact.created event in the
 * change feed (1,000 a transaction). Then, against the built app (dist/, without
 * Redis: its segment refresher runs in process):
 *
 * 1. batch intake sustained for BENCH_TRACKING_SECONDS (60) by BENCH_TRACKING_CLIENTS (8) clients,
 *    each POSTing batches of 100 track calls of known userIds: events/s, batch p50/p99, the API's
 *    peak RSS (goal: >= 10,000 events/s, p99 < 500 ms, RSS < 300 MB);
 * 2. a timeline page of a contact (GET /api/contacts/{id}/timeline?limit=30), p50/p99 (goal p99 < 50 ms);
 * 3. a 7-day count segment (events.bench_viewed.count.7d[gte]:3): full rebuild to ready (goal < 30 s);
 * 4. a new qualifying event: a contact that did not match gets three events; time until
 *    GET /api/contacts/{id}/segments shows the segment (goal < 5 s).
 *
 * `npm run build && node bench/tracking.mjs`. A tiny run (to check the script):
 * BENCH_TRACKING_CONTACTS=1000 BENCH_TRACKING_EVENTS=10000 BENCH_TRACKING_SECONDS=3 node bench/tracking.mjs
 * BENCH_REUSE=1 keeps an already seeded database; BENCH_TRACKING_ONLY=intake,timeline,segment picks the rows;
 * BENCH_API_NODE_ARGS adds Node arguments to the API's (`--cpu-prof --cpu-prof-dir=/tmp/prof` for a profile).
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { ADMIN_URL, DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_TRACKING_DATABASE ?? 'sf_bench_tracking';
const CONTACTS = Number(process.env.BENCH_TRACKING_CONTACTS ?? 1_000_000);
const EVENTS = Number(process.env.BENCH_TRACKING_EVENTS ?? 10_000_000);
const SECONDS = Number(process.env.BENCH_TRACKING_SECONDS ?? 60);
const CLIENTS = Number(process.env.BENCH_TRACKING_CLIENTS ?? 8);
const BATCH = 100;
/** BENCH_TRACKING_ONLY=intake,timeline,segment runs only those rows (default: all). */
const ONLY = new Set((process.env.BENCH_TRACKING_ONLY ?? 'intake,timeline,segment').split(','));
const NAMES = ['bench_viewed', 'bench_clicked', 'bench_signed_up', 'bench_purchased'];
const log = (m) => process.stderr.write(`[bench:tracking] ${m}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dbUrl = databaseUrl(DB_NAME);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

async function prepare() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = (await admin.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [DB_NAME])).rowCount > 0;
  if (exists && process.env.BENCH_REUSE === '1') {
    await admin.end();
    log(`reusing ${DB_NAME}`);
    return;
  }
  if (exists) await admin.query(`DROP DATABASE ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'inherit' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  let t = performance.now();
  await db.query(
    `INSERT INTO contacts (name, email, external_id, title, created_by_user, modified_by_user)
     SELECT 'Bench ' || g, 'bench' || g || '@tracking.bench', 'bench-user-' || g, 'Tracker', 'bench', 'bench' FROM generate_series(1, $1) g`,
    [CONTACTS],
  );
  log(`${CONTACTS} contacts in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  // Each contact's creation in the change feed (the timeline's record side), 1,000 a transaction as an
  // import's chunks write them; the API's sequencer numbers them at its start.
  t = performance.now();
  for (let first = 1; first <= CONTACTS; first += 1000) {
    await db.query(
      `INSERT INTO events (type, data) SELECT 'contact.created', jsonb_build_object('id', g, 'name', 'Bench ' || g, 'externalId', 'bench-user-' || g)
         FROM generate_series($1::int, $2::int) g`,
      [first, Math.min(first + 999, CONTACTS)],
    );
  }
  log(`${CONTACTS} contact.created events in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  // The monthly partitions of the last 60 days and the next months (as the partitions job names them).
  const now = new Date();
  for (let m = -3; m <= 2; m++) {
    const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + m, 1));
    const end = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
    const name = `tracked_events_y${start.getUTCFullYear()}m${String(start.getUTCMonth() + 1).padStart(2, '0')}`;
    await db.query(`CREATE TABLE IF NOT EXISTS ${name} PARTITION OF tracked_events FOR VALUES FROM ('${start.toISOString()}') TO ('${end.toISOString()}')`);
  }
  t = performance.now();
  const chunk = 1_000_000;
  for (let done = 0; done < EVENTS; done += chunk) {
    const n = Math.min(chunk, EVENTS - done);
    await db.query(
      `INSERT INTO tracked_events (occurred_at, received_at, type, name, contact_id, user_id, message_id, properties)
       SELECT o, o, 'track', ($3::text[])[1 + (g % 4)], c, 'bench-user-' || c, 'seed-' || ($2::bigint + g), jsonb_build_object('n', g % 100)
         FROM generate_series(1, $1::int) g,
              LATERAL (SELECT 1 + (hashint4(g + $2::int) & 2147483647) % $4::int AS c,
                              now() - ((hashint4(g * 7 + $2::int) & 2147483647) % (60 * 86400)) * interval '1 second' AS o) x`,
      [n, done, NAMES, CONTACTS],
    );
    log(`${done + n} tracked events (${((performance.now() - t) / 1000).toFixed(1)} s)`);
  }
  await db.query(
    `INSERT INTO tracked_event_daily (contact_id, name, day, count, first_at, last_at)
     SELECT contact_id, name, (occurred_at AT TIME ZONE 'UTC')::date, count(*), min(occurred_at), max(occurred_at) FROM tracked_events GROUP BY 1, 2, 3`,
  );
  await db.query(
    `INSERT INTO tracked_event_definitions (name, count, first_seen_at, last_seen_at, property_types)
     SELECT name, count(*), min(occurred_at), max(occurred_at), '{"n:number": true}'::jsonb FROM tracked_events GROUP BY name`,
  );
  await db.query(`VACUUM ANALYZE`);
  log(`events, daily counts and definitions in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  await db.end();
}

function rssMb(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function main() {
  await prepare();
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-tracking');
  const port = await freePort();
  const api = spawn(process.execPath, [...(process.env.BENCH_API_NODE_ARGS ?? '').split(' ').filter(Boolean), 'dist/main.js'], {
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
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {
      /* starting */
    }
    if (i > 600) throw new Error('api did not start');
    await sleep(100);
  }
  const auth = { authorization: `Bearer ${token}` };
  const call = async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...auth, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.json();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
    return json;
  };
  const rows = [];
  try {
    // 1. Batch intake, sustained.
    if (ONLY.has('intake')) await intakeRow();
    async function intakeRow() {
      let sent = 0;
      let seq = 0;
      const latencies = [];
      let peakRss = rssMb(api.pid);
      const deadline = performance.now() + SECONDS * 1000;
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMb(api.pid))), 250);
      const client = async (k) => {
        while (performance.now() < deadline) {
          const batch = Array.from({ length: BATCH }, () => ({
            type: 'track',
            event: NAMES[seq % NAMES.length],
            userId: `bench-user-${1 + (Math.floor(Math.random() * CONTACTS) % CONTACTS)}`,
            messageId: `run-${process.pid}-${k}-${++seq}`,
            properties: { n: seq % 100, source: 'bench' },
          }));
          const t = performance.now();
          await call('POST', '/api/ingest/v1/batch', { batch });
          latencies.push(performance.now() - t);
          sent += BATCH;
        }
      };
      const t0 = performance.now();
      await Promise.all(Array.from({ length: CLIENTS }, (_, k) => client(k)));
      const secs = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      rows.push(
        `| batch intake, ${CLIENTS} clients x ${BATCH} calls, ${SECONDS} s | ${Math.round(sent / secs).toLocaleString()} events/s | batch p50 ${pct(latencies, 50).toFixed(0)} ms, p99 ${pct(latencies, 99).toFixed(0)} ms | API RSS peak ${peakRss.toFixed(0)} MB |`,
      );
    }

    // 2. Timeline page of a contact.
    if (ONLY.has('timeline')) {
      const tl = [];
      for (let i = 0; i < 300; i++) {
        const id = 1 + Math.floor(Math.random() * CONTACTS);
        const t = performance.now();
        await call('GET', `/api/contacts/${id}/timeline?limit=30`);
        tl.push(performance.now() - t);
      }
      rows.push(`| timeline page (30 items) of a random contact, 300 reads | p50 ${pct(tl, 50).toFixed(1)} ms | p99 ${pct(tl, 99).toFixed(1)} ms | |`);
    }

    // 3. A 7-day count segment, full rebuild.
    if (ONLY.has('segment')) await segmentRows();
    async function segmentRows() {
      let t = performance.now();
      const { segment } = await call('POST', '/api/segments', { name: 'bench 7d viewers', type: 'dynamic', filter: 'events.bench_viewed.count.7d[gte]:3' });
      let s = segment;
      while (s.membership.status !== 'ready') {
        if (s.membership.status === 'failed') throw new Error(s.membership.error);
        await sleep(50);
        s = (await call('GET', `/api/segments/${segment.id}`)).segment;
      }
      rows.push(
        `| 7-day count segment (events.bench_viewed.count.7d[gte]:3), full rebuild | ${((performance.now() - t) / 1000).toFixed(2)} s to ready | ${s.membership.count.toLocaleString()} members | |`,
      );

      // 4. A new qualifying event reflected in the segment.
      const db = new pg.Client({ connectionString: dbUrl });
      await db.connect();
      const outside = (
        await db.query(
          `SELECT c.id, c.external_id FROM contacts c WHERE NOT EXISTS (SELECT 1 FROM segment_members m WHERE m.segment_id = $1 AND m.contact_id = c.id) LIMIT 1`,
          [segment.id],
        )
      ).rows[0];
      await db.end();
      t = performance.now();
      await call('POST', '/api/ingest/v1/batch', { batch: [0, 1, 2].map(() => ({ type: 'track', event: 'bench_viewed', userId: outside.external_id })) });
      while (!(await call('GET', `/api/contacts/${outside.id}/segments`)).segments.some((x) => x.id === segment.id)) {
        if (performance.now() - t > 60_000) throw new Error('the contact did not join within 60 s');
        await sleep(20);
      }
      rows.push(`| new qualifying event reflected in the 7-day segment | ${((performance.now() - t) / 1000).toFixed(2)} s | | |`);
      await call('DELETE', `/api/segments/${segment.id}`);
    }
  } finally {
    api.kill('SIGTERM');
  }
  console.log(`\nTracked events, ${CONTACTS.toLocaleString()} contacts and ${EVENTS.toLocaleString()} seeded events:\n`);
  console.log('| scenario | result | latency | memory |');
  console.log('| --- | --- | --- | --- |');
  for (const r of rows) console.log(r);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
