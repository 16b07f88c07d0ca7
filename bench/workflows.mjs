/**
 * Workflows benchmark (issue 31's rows), on a database of its own (created, migrated and dropped
 * here) of BENCH_DATABASE_CONTACTS contacts (default 1,000,000):
 *
 * 0. API get-by-id latency idle: BENCH_PROBES (default 2,000) GET /api/contacts/{id} of random
 *    contacts, one every 20 ms (p50, p99).
 * 1. BENCH_CONTACTS contacts (default 100,000, with phones) enrolled by hand (10,000 per request) in a five-step
 *    workflow without waits: a branch on the title, update a field, add points, add to a campaign,
 *    an SMS with the log provider. Measured: from the first enrolment to every enrollment completed, as steps/s;
 *    and meanwhile GET /api/contacts/{id} of random contacts, one every 20 ms: p99 against idle's (the
 *    issue's "API get-by-id p99 during the 100k run within 2× of idle").
 * 2. BENCH_CONTACTS enrollments due at the same instant (a wait `until` a time a few seconds ahead):
 *    from that instant to every enrollment completed, and how late the first and last ran; and
 *    meanwhile BENCH_LONE (default 50) lone steps, each of a workflow of its own, falling due one
 *    every 400 ms from that instant: how late each ran (p50, p99, max), the issue's "a lone due step
 *    runs < 1 s late (p99) while that load runs" (only those due before the load ended test it).
 *
 * Runs the built app (dist/) with APP_ROLE=all and no Redis (the jobs run in process); with
 * BENCH_SPLIT=1 the API and a worker as two processes on Redis (keys under a prefix of the run's,
 * deleted at the end), so the API's event loop is not the runner's. Part of
 * `npm run bench` at the issue's size (about 5 minutes, most of it seeding). Run it small on a shared
 * machine: `BENCH_CONTACTS=300 BENCH_DATABASE_CONTACTS=1000 node bench/workflows.mjs` after `npm run build`.
 * Environment: BENCH_DATABASE_ADMIN_URL, BENCH_CONTACTS, BENCH_DATABASE_CONTACTS, BENCH_LONE, BENCH_PROBES, BENCH_SPLIT=1,
 * BENCH_REDIS_URL, BENCH_KEEP_DATABASE=1.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ADMIN_URL, ROOT, appEnv, createToken, databaseUrl, deleteRedisKeys, freePort } from './lib.mjs';

const N = Number(process.env.BENCH_CONTACTS ?? 100_000);
/** Contacts in the database (the first N go through the workflows). */
const DB_CONTACTS = Math.max(N, Number(process.env.BENCH_DATABASE_CONTACTS ?? 1_000_000));
/** Idle get-by-id requests before the runs (their p99 is the baseline of the one during the run). */
const PROBES = Number(process.env.BENCH_PROBES ?? 2_000);
/** One get-by-id probe every this many ms, idle and during the run. */
const PROBE_EVERY_MS = 20;
/** BENCH_SPLIT=1: the API (APP_ROLE=api) and a worker (APP_ROLE=worker) as two processes on Redis (BENCH_REDIS_URL), as deployed at scale. */
const SPLIT = process.env.BENCH_SPLIT === '1';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** Lone steps falling due while the N due together run (issue 31: each < 1 s late, p99). */
const LONE = Math.min(Number(process.env.BENCH_LONE ?? 50), N);
const DB_NAME = `sf_bench_workflows_${process.pid}`;
const log = (m) => process.stderr.write(`[bench:workflows] ${m}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  const dbUrl = databaseUrl(DB_NAME);
  const port = await freePort();
  const prefix = `benchwf${randomBytes(3).toString('hex')}`;
  const env = appEnv(dbUrl, port, {
    APP_ROLE: SPLIT ? 'api' : 'all',
    ...(SPLIT ? { REDIS_URL, REDIS_PREFIX: prefix } : {}),
    SMS_PROVIDER: 'log',
    RATE_LIMIT_ENTERPRISE: '1000000000',
    WORKFLOW_POLL_INTERVAL_MS: '200',
  });

  const api = spawn(process.execPath, ['dist/main.js'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  // The worker starts once the API migrated the database (below).
  let worker = null;
  const db = new pg.Client({ connectionString: dbUrl });
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) break;
      } catch {
        /* starting */
      }
      if (i > 600) throw new Error('the app did not start');
      await sleep(100);
    }
    if (SPLIT) {
      worker = spawn(process.execPath, ['dist/main.js'], {
        cwd: ROOT,
        env: { ...env, APP_ROLE: 'worker', PORT: String(await freePort()), RUN_MIGRATIONS: 'false' },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      await sleep(3000);
    }
    await db.connect();
    const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-workflows');
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
    await db.query(
      `INSERT INTO contacts (name, email, phone, title)
       SELECT 'Bench ' || g, 'bench' || g || '@bench.test', '+1415' || lpad(g::text, 7, '0'), CASE WHEN g % 2 = 0 THEN 'CEO' ELSE 'CTO' END
         FROM generate_series(1, $1) g`,
      [DB_CONTACTS],
    );
    await db.query(`ANALYZE contacts`);
    const ids = (await db.query(`SELECT id FROM contacts ORDER BY id LIMIT $1`, [N])).rows.map((r) => r.id);
    const [{ lo, hi }] = (await db.query(`SELECT min(id)::int AS lo, max(id)::int AS hi FROM contacts`)).rows;
    /**
     * GET /api/contacts/{id} of random contacts, one every PROBE_EVERY_MS (a client's pace, not a
     * load of its own: back to back they were 180–400 requests a second beside the run they
     * measured), until `stop()` (or `count` done): each one's ms, sorted.
     */
    const probe = async (stop, count = Infinity) => {
      const times = [];
      while (times.length < count && !stop()) {
        const id = lo + Math.floor(Math.random() * (hi - lo + 1));
        const t0 = performance.now();
        const res = await fetch(`http://127.0.0.1:${port}/api/contacts/${id}`, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET /api/contacts/${id}: ${res.status}`);
        const ms = performance.now() - t0;
        times.push(ms);
        if (ms < PROBE_EVERY_MS) await sleep(PROBE_EVERY_MS - ms);
      }
      return times.sort((a, b) => a - b);
    };
    const quantile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
    await probe(() => false, 200); // warm-up
    const idle = await probe(() => false, PROBES);
    const campaign = (await call('POST', '/api/campaigns', { name: 'Bench campaign' })).campaign;
    const enrolAll = async (workflowId) => {
      for (let i = 0; i < ids.length; i += 10_000) await call('POST', `/api/workflows/${workflowId}/enrollments`, { contactIds: ids.slice(i, i + 10_000) });
    };
    // Polled cheaply (a probe of the running enrollments' index, not a count of 100,000 rows every
    // 50 ms, which took a third of the database's busy time during the run it measured); the end is
    // when the last enrollment ended, from the rows (epoch ms), so the poll's interval does not count.
    const running = async (workflowId) =>
      (await db.query(`SELECT EXISTS (SELECT 1 FROM workflow_enrollments WHERE workflow_id = $1 AND status IN ('active', 'waiting')) AS r`, [workflowId]))
        .rows[0].r;
    const untilAllEnded = async (workflowId) => {
      while (await running(workflowId)) await sleep(100);
      return new Date((await db.query(`SELECT max(ended_at) AS at FROM workflow_enrollments WHERE workflow_id = $1`, [workflowId])).rows[0].at).getTime();
    };

    // 1. Five steps without waits.
    const five = (
      await call('POST', '/api/workflows', {
        name: 'Bench five steps',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'split', type: 'branch', branches: [{ filter: 'title[eq]:CEO', next: 'field' }], defaultNext: 'field' },
          { key: 'field', type: 'update_contact', set: { title: 'Lead' }, next: 'points' },
          { key: 'points', type: 'add_points', points: 5, reason: 'bench', next: 'join' },
          { key: 'join', type: 'add_to_campaign', campaignId: campaign.id, next: 'sms' },
          { key: 'sms', type: 'send_sms', body: 'Hello {{contact.name}}' },
        ],
      })
    ).workflow;
    const t = Date.now();
    let fiveDone = false;
    const during = probe(() => fiveDone);
    await enrolAll(five.id);
    const fiveMs = (await untilAllEnded(five.id)) - t;
    fiveDone = true;
    const busy = await during;
    const failed = Number((await db.query(`SELECT count(*) AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status = 'failed'`, [five.id])).rows[0].n);
    const steps = Number(
      (
        await db.query(`SELECT count(*) AS n FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id WHERE e.workflow_id = $1`, [
          five.id,
        ])
      ).rows[0].n,
    );
    const rows = [
      `${N.toLocaleString()} contacts (of ${DB_CONTACTS.toLocaleString()}) through a five-step workflow without waits: ${(fiveMs / 1000).toFixed(1)} s, ${Math.round(steps / (fiveMs / 1000)).toLocaleString()} steps/s (${steps} step runs, ${failed} failed)`,
      `API get-by-id idle: p50 ${quantile(idle, 50).toFixed(1)} ms, p99 ${quantile(idle, 99).toFixed(1)} ms (${idle.length} requests); during that run: p50 ${quantile(busy, 50).toFixed(1)} ms, p99 ${quantile(busy, 99).toFixed(1)} ms (${busy.length} requests): p99 ${(quantile(busy, 99) / quantile(idle, 99)).toFixed(2)}× idle`,
    ];

    // 2. N enrollments due at the same instant.
    const dueAt = new Date(Date.now() + 5_000 + N * 2);
    const due = (
      await call('POST', '/api/workflows', {
        name: 'Bench due together',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'wait', type: 'wait', until: dueAt.toISOString(), next: 'mark' },
          { key: 'mark', type: 'update_contact', set: { title: 'Due' } },
        ],
      })
    ).workflow;
    await enrolAll(due.id);
    // Lone steps falling due one by one while that load runs: LONE workflows of one enrollment each,
    // the k-th due k × 400 ms after the instant; each one's lateness is when its wait ran minus its due time.
    const lone = [];
    for (let k = 1; k <= LONE; k++) {
      const at = new Date(dueAt.getTime() + k * 400);
      const w = (
        await call('POST', '/api/workflows', {
          name: `Bench lone ${k}`,
          status: 'active',
          trigger: { type: 'manual' },
          steps: [
            { key: 'wait', type: 'wait', until: at.toISOString(), next: 'mark' },
            { key: 'mark', type: 'add_points', points: 1 },
          ],
        })
      ).workflow;
      await call('POST', `/api/workflows/${w.id}/enrollments`, { contactIds: [ids[k - 1]] });
      lone.push({ id: w.id, at });
    }
    while (Date.now() < dueAt.getTime()) await sleep(20);
    const dueMs = (await untilAllEnded(due.id)) - dueAt.getTime();
    const late = (
      await db.query(
        `SELECT min(r.ran_at) AS first, max(r.ran_at) AS last FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id
          WHERE e.workflow_id = $1 AND r.step_key = 'wait' AND r.outcome = 'completed'`,
        [due.id],
      )
    ).rows[0];
    const loneLate = [];
    for (const l of lone) {
      for (;;) {
        const r = (
          await db.query(
            `SELECT r.ran_at FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id
              WHERE e.workflow_id = $1 AND r.step_key = 'wait' AND r.outcome = 'completed'`,
            [l.id],
          )
        ).rows[0];
        if (r) {
          loneLate.push(new Date(r.ran_at).getTime() - l.at.getTime());
          break;
        }
        await sleep(50);
      }
    }
    loneLate.sort((a, b) => a - b);
    const pct = (p) => loneLate[Math.min(loneLate.length - 1, Math.ceil((p / 100) * loneLate.length) - 1)];
    const loneDuring = lone.filter((l) => l.at.getTime() < dueAt.getTime() + dueMs).length;
    rows.push(
      `${N.toLocaleString()} enrollments due at the same instant: all ran within ${(dueMs / 1000).toFixed(1)} s (first ${new Date(late.first).getTime() - dueAt.getTime()} ms late, last ${new Date(late.last).getTime() - dueAt.getTime()} ms late)`,
      `${LONE} lone steps falling due every 400 ms meanwhile (${loneDuring} of them before the load ended): late p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${loneLate[loneLate.length - 1]} ms`,
    );
    process.stdout.write(`${SPLIT ? 'API and worker as two processes on Redis' : 'one process (APP_ROLE=all, jobs in process)'}:\n`);
    for (const r of rows) process.stdout.write(`${r}\n`);
  } finally {
    await db.end().catch(() => undefined);
    for (const p of [worker, api]) {
      if (!p) continue;
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
    if (SPLIT) await deleteRedisKeys(REDIS_URL, prefix);
    if (!process.env.BENCH_KEEP_DATABASE) await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME}`);
    await admin.end();
  }
}

main().catch((e) => {
  log(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
