/**
 * Workflows benchmark, on a database of its own (created, migrated and dropped here):
 *
 * 1. BENCH_CONTACTS contacts (with phones) enrolled by hand (10,000 per request) in a five-step
 *    workflow without waits: a branch on the title, update a field, add points, add to a campaign,
 *    an SMS with the log provider. Measured: from the first enrolment to every enrollment completed, as steps/s.
 * 2. BENCH_CONTACTS enrollments due at the same instant (a wait `until` a time a few seconds ahead):
 *    from that instant to every enrollment completed, and how late the first and last ran; and
 *    meanwhile BENCH_LONE (default 50) lone steps, each of a workflow of its own, falling due one
 *    every 400 ms from that instant: how late each ran (p50, p99, max), the "a lone due step
 *    runs < 1 s late (p99) while that load runs" (only those due before the load ended test it).
 *
 * Runs the built app (dist/) with APP_ROLE=all and no Redis (the jobs run in process). Not part of
 * `npm run bench`; at full size it is the rows (100,000 contacts). Run it small on a shared
 * machine: `BENCH_CONTACTS=300 node bench/workflows.mjs` after `npm run build`.
 * Environment: BENCH_DATABASE_ADMIN_URL, BENCH_CONTACTS (default 1,000), BENCH_LONE, BENCH_KEEP_DATABASE=1.
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { ADMIN_URL, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const N = Number(process.env.BENCH_CONTACTS ?? 1_000);
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
  const api = spawn(process.execPath, ['dist/main.js'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: dbUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      APP_ROLE: 'all',
      SMS_PROVIDER: 'log',
      RATE_LIMIT_ENTERPRISE: '1000000000',
      WORKFLOW_POLL_INTERVAL_MS: '200',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
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
      [N],
    );
    const ids = (await db.query(`SELECT id FROM contacts ORDER BY id`)).rows.map((r) => r.id);
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
    await enrolAll(five.id);
    const fiveMs = (await untilAllEnded(five.id)) - t;
    const failed = Number((await db.query(`SELECT count(*) AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status = 'failed'`, [five.id])).rows[0].n);
    const steps = Number(
      (
        await db.query(`SELECT count(*) AS n FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id WHERE e.workflow_id = $1`, [
          five.id,
        ])
      ).rows[0].n,
    );
    const rows = [
      `${N.toLocaleString()} contacts through a five-step workflow without waits: ${(fiveMs / 1000).toFixed(1)} s, ${Math.round(steps / (fiveMs / 1000)).toLocaleString()} steps/s (${steps} step runs, ${failed} failed)`,
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
    for (const r of rows) process.stdout.write(`${r}\n`);
  } finally {
    await db.end().catch(() => undefined);
    api.kill('SIGTERM');
    await new Promise((r) => api.once('exit', r));
    if (!process.env.BENCH_KEEP_DATABASE) await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME}`);
    await admin.end();
  }
}

main().catch((e) => {
  log(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
