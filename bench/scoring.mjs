/**
 * Lead scoring benchmark, on a database of its own (BENCH_DATABASE, default sf_bench_scoring,
 * dropped and created afresh) with BENCH_CONTACTS contacts (default 1,000,000), and
 * BENCH_WHATIF_EVENTS stored tracked events (default 10,000,000: `Bench Viewed`, half of them
 * `plan: pro`, on random contacts, spread evenly over the BENCH_WHATIF_HOURS hours (default 36)
 * before the run) seeded set-based in SQL before the app starts:
 *
 * 1. rule application, in the forms BENCH_FORMS names (default `tracked`; `tracked,record` for both):
 *    - `tracked`: a published rule on the tracked event `Bench Viewed` with a properties filter
 *      (`plan` is `pro`), then BENCH_EVENTS_PER_SECOND tracked events a second for BENCH_SECONDS
 *      seconds, enqueued as the intake does (stored in tracked_events with the `scoring` consumer's
 *      queue rows, one statement per tenth of a second; times in milliseconds, as the intake's JavaScript
 *      dates are: the queue's claim finds an event by its time); measured: the applier's lag (the age of
 *      the oldest queued event) each second, and when the last was applied;
 *    - `record`: a published rule on `contact.updated` with a filter, then as many change events a
 *      second appended to the outbox (as the contacts feature writes them); measured: the lag (the
 *      oldest event past the applier's cursor) each second, and when the last was applied;
 * 2. recompute of every contact (POST /api/scoring/recompute until its job completes);
 * 3. what-if since the seeded events' start (POST /api/scoring/what-if until its job completes) with
 *    two trackedEvent drafts (one with maxPerContact and a cooldown) and one recordEvent draft: it
 *    replays the seeded events, step 1's tracked events and step 1's record events.
 *
 * The app runs from dist/ without Redis (its applier in process). `node bench/scoring.mjs` after
 * `npm run build`. A quick check:
 * `BENCH_CONTACTS=2000 BENCH_EVENTS_PER_SECOND=200 BENCH_SECONDS=3 BENCH_WHATIF_EVENTS=20000 node bench/scoring.mjs`.
 */
import { execFileSync, spawn } from 'node:child_process';
import pg from 'pg';
import { ADMIN_URL, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench_scoring';
const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const RATE = Number(process.env.BENCH_EVENTS_PER_SECOND ?? 10_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const SEEDED = Number(process.env.BENCH_WHATIF_EVENTS ?? 10_000_000);
const SEEDED_HOURS = Number(process.env.BENCH_WHATIF_HOURS ?? 36);
const FORMS = (process.env.BENCH_FORMS ?? 'tracked').split(',').map((f) => f.trim());
const TRACKED_NAME = 'Bench Viewed';
const log = (m) => process.stderr.write(`[bench:scoring] ${m}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dbUrl = databaseUrl(DB_NAME);

/** Creates the monthly partitions of tracked_events (as the intake would) from `from` to `to`. */
async function partitions(db, from, to) {
  for (let m = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 1)); m <= to; m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1))) {
    const next = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1));
    const name = `tracked_events_y${m.getUTCFullYear()}m${String(m.getUTCMonth() + 1).padStart(2, '0')}`;
    await db.query(`CREATE TABLE IF NOT EXISTS ${name} PARTITION OF tracked_events FOR VALUES FROM ('${m.toISOString()}') TO ('${next.toISOString()}')`);
  }
}

async function freshDatabase(seededSince) {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  execFileSync(process.execPath, ['dist/cli.js', 'migration:run'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl }, stdio: 'ignore' });
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  let t = performance.now();
  for (let done = 0; done < CONTACTS; done += 100_000) {
    const n = Math.min(100_000, CONTACTS - done);
    await db.query(
      `INSERT INTO contacts (name, email, title) SELECT 'Bench ' || i, 'bench' || i || '@scoring.test', CASE WHEN i % 3 = 0 THEN 'CTO' ELSE 'Engineer' END
         FROM generate_series($1::int, $2::int) AS i`,
      [done + 1, done + n],
    );
  }
  log(`${CONTACTS.toLocaleString()} contacts seeded in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  // The what-if's stored tracked events: evenly spread from seededSince to 10 minutes ago, attributed.
  await partitions(db, seededSince, new Date(Date.now() + 86_400_000));
  t = performance.now();
  const spanMs = Date.now() - 600_000 - seededSince.getTime();
  for (let done = 0; done < SEEDED; done += 1_000_000) {
    const n = Math.min(1_000_000, SEEDED - done);
    await db.query(
      `INSERT INTO tracked_events (occurred_at, received_at, type, name, contact_id, user_id, message_id, properties)
       SELECT $4::timestamptz + (i::float8 / $5::float8) * ($6::float8 * interval '1 millisecond'), now(), 'track', $7,
              1 + ((i * 7919) % $3::bigint)::int, NULL, 'seed-' || i,
              jsonb_build_object('plan', CASE WHEN i % 2 = 0 THEN 'pro' ELSE 'free' END, 'page', '/pricing')
         FROM generate_series($1::bigint, $2::bigint) AS i`,
      [done, done + n - 1, CONTACTS, seededSince, SEEDED, spanMs, TRACKED_NAME],
    );
  }
  log(`${SEEDED.toLocaleString()} tracked events seeded in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  await db.query('ANALYZE');
  return db;
}

const loadNow = () =>
  execFileSync('uptime')
    .toString()
    .trim()
    .replace(/^.*load average: /, 'load ');

async function main() {
  const seededSince = new Date(Date.now() - SEEDED_HOURS * 3_600_000);
  const db = await freshDatabase(seededSince);
  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-scoring');
  const port = await freePort();
  const api = spawn(process.execPath, [...(process.env.BENCH_API_NODE_ARGS ?? '').split(' ').filter(Boolean), 'dist/main.js'], {
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
    await call('POST', '/api/point-groups', { name: 'Bench warm', minimumPoints: 1, maximumPoints: 9 });
    await call('POST', '/api/point-groups', { name: 'Bench hot', minimumPoints: 10, maximumPoints: 1_000_000 });
    const recordRule = { name: 'Bench CTO', on: { recordEvent: 'contact.updated', filter: { field: 'title', op: 'eq', value: 'CTO' } }, delta: 1 };
    const trackedRule = { name: 'Bench pro view', on: { trackedEvent: TRACKED_NAME, filter: 'properties.plan[eq]:pro' }, delta: 1 };
    const ruleRows = async (ruleId) => Number((await db.query(`SELECT count(*) AS n FROM point_ledger WHERE rule_id = $1`, [ruleId])).rows[0].n);

    /** Feeds RATE events a second for SECONDS seconds, ten slices a second; samples `lagMs()` each second. */
    const feed = async (insertSlice, lagMs) => {
      const started = performance.now();
      const lags = [];
      let appended = 0;
      for (let s = 0; s < SECONDS; s++) {
        for (let slice = 0; slice < 10; slice++) {
          const n = Math.round(RATE / 10);
          await insertSlice(appended, n);
          appended += n;
          const wait = started + s * 1000 + (slice + 1) * 100 - performance.now();
          if (wait > 0) await sleep(wait);
        }
        lags.push(await lagMs());
      }
      return { started, lags, appended };
    };
    const lagText = (lags) => {
      const max = Math.max(...lags);
      const every10 = lags.filter((_, i) => i % 10 === 9).map((l) => (l / 1000).toFixed(1));
      return `lag sampled each second: max ${(max / 1000).toFixed(1)} s, at 10 s, 20 s, ...: ${every10.join(', ')} s`;
    };

    if (FORMS.includes('tracked')) {
      const rule = (await call('POST', '/api/scoring-rules', trackedRule)).scoringRule;
      const load = loadNow();
      const { started, lags, appended } = await feed(
        (from, n) =>
          db.query(
            `WITH e AS (
               INSERT INTO tracked_events (occurred_at, received_at, type, name, contact_id, message_id, properties)
               SELECT date_trunc('milliseconds', now()), now(), 'track', $4, 1 + ((($1::bigint + i) * 7919) % $2::bigint)::int, 'live-' || ($1::bigint + i),
                      jsonb_build_object('plan', CASE WHEN ($1::bigint + i) % 2 = 0 THEN 'pro' ELSE 'free' END, 'page', '/pricing')
                 FROM generate_series(1, $3::int) AS i
               RETURNING id, occurred_at, name)
             INSERT INTO tracked_event_queue (consumer, event_id, occurred_at, queued_at)
             SELECT i.consumer, e.id, e.occurred_at, now() FROM e JOIN tracked_event_interest i ON i.name = e.name OR i.name = '*' ORDER BY e.id, i.consumer`,
            [from, CONTACTS, n, TRACKED_NAME],
          ),
        async () =>
          Number(
            (await db.query(`SELECT coalesce(extract(epoch FROM now() - min(queued_at)) * 1000, 0) AS ms FROM tracked_event_queue WHERE consumer = 'scoring'`))
              .rows[0].ms,
          ),
      );
      const expected = Math.floor(appended / 2); // the even-numbered events are `pro`
      while ((await ruleRows(rule.id)) < expected) await sleep(250);
      const seconds = (performance.now() - started) / 1000;
      out.push(
        `rule application (tracked): ${appended.toLocaleString()} tracked events at ${RATE.toLocaleString()}/s for ${SECONDS} s, ${expected.toLocaleString()} applications; all applied ${seconds.toFixed(1)} s after the first; ${lagText(lags)} (${load})`,
      );
    }

    if (FORMS.includes('record')) {
      const rule = (await call('POST', '/api/scoring-rules', recordRule)).scoringRule;
      await sleep(1500); // the rule's creation is older than every event below
      const load = loadNow();
      const { started, lags, appended } = await feed(
        (from, n) =>
          db.query(
            `INSERT INTO events (type, data) SELECT 'contact.updated', jsonb_build_object('id', 1 + ((($1::bigint + i) * 7919) % $2::bigint)) FROM generate_series(1, $3::int) AS i`,
            [from, CONTACTS, n],
          ),
        async () =>
          Number(
            (
              await db.query(
                `SELECT coalesce(extract(epoch FROM (now() - min(e.occurred_at))) * 1000, 0) AS ms FROM events e LEFT JOIN event_transactions t ON t.tx = e.tx
                  WHERE e.type = 'contact.updated' AND (t.tx IS NULL OR t.first_sequence > (SELECT last_sequence FROM scoring_state))`,
              )
            ).rows[0].ms,
          ),
      );
      const expected = Number(
        (
          await db.query(
            `SELECT count(*) AS n FROM events e JOIN contacts c ON c.id = (e.data->>'id')::int WHERE e.type = 'contact.updated' AND c.title = 'CTO'`,
          )
        ).rows[0].n,
      );
      while ((await ruleRows(rule.id)) < expected) await sleep(250);
      const seconds = (performance.now() - started) / 1000;
      out.push(
        `rule application (record): ${appended.toLocaleString()} change events at ${RATE.toLocaleString()}/s for ${SECONDS} s, ${expected.toLocaleString()} applications; all applied ${seconds.toFixed(1)} s after the first; ${lagText(lags)} (${load})`,
      );
    }

    // 2. Recompute.
    let load = loadNow();
    let t = performance.now();
    const recompute = await untilDone((await call('POST', '/api/scoring/recompute', {})).job.id);
    out.push(
      `recompute of ${CONTACTS.toLocaleString()} contacts: ${((performance.now() - t) / 1000).toFixed(1)} s (checked ${recompute.result.checked}, repaired ${recompute.result.repaired}) (${load}; after: ${loadNow()})`,
    );

    // 3. What-if over the seeded events and step 1's.
    load = loadNow();
    t = performance.now();
    const drafts = [
      { name: 'Bench draft pro', on: { trackedEvent: TRACKED_NAME, filter: 'properties.plan[eq]:pro' }, delta: 2, maxPerContact: 5, cooldown: '1h' },
      { name: 'Bench draft any', on: { trackedEvent: TRACKED_NAME }, delta: 1 },
      { ...recordRule, delta: 2 },
    ];
    const whatIf = await untilDone((await call('POST', '/api/scoring/what-if', { since: seededSince.toISOString(), rules: drafts })).job.id);
    const r = whatIf.result;
    out.push(
      `what-if over ${r.events.toLocaleString()} events (${r.trackedEvents.toLocaleString()} tracked, ${r.recordEvents.toLocaleString()} record; ${r.applications.toLocaleString()} applications): ${((performance.now() - t) / 1000).toFixed(1)} s (${load}; after: ${loadNow()}); groups ${JSON.stringify(r.pointGroups.map((g) => ({ name: g.name, now: g.now, wouldBe: g.wouldBe })))}`,
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
