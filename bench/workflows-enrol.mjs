/**
 * Segment enrolment benchmark (issue 31: "a 1,000,000 member segment enrolled (segment_entered on
 * a new workflow over an existing segment) < 3 minutes"), on a database of its own (created,
 * migrated by the app and dropped here):
 *
 * BENCH_CONTACTS contacts and a static segment holding all of them are seeded set-based in SQL; then
 * a new segment_entered workflow (first step a 30-day wait) is created active over the segment.
 * Measured: the activating request's answer time, and from sending it to every member enrolled (the
 * background enrolment finished, checked by counting the enrollments and their workflow.enrolled
 * events). The runner meanwhile moves the new enrollments to their wait; how far it got is reported.
 *
 * Runs the built app (dist/) with APP_ROLE=all and no Redis (the jobs run in process). Part of
 * `npm run bench` and `npm run bench:workflows` at the size (seeding a million takes about two
 * minutes); smaller: `BENCH_CONTACTS=100000 node bench/workflows-enrol.mjs` after `npm run build`.
 * Environment: BENCH_DATABASE_ADMIN_URL, BENCH_CONTACTS (default 1,000,000), BENCH_KEEP_DATABASE=1.
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { ADMIN_URL, DEPLOYED_NODE_OPTIONS, ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const N = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const DB_NAME = `sf_bench_wf_enrol_${process.pid}`;
const log = (m) => process.stderr.write(`[bench:workflows-enrol] ${m}\n`);
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
      NODE_OPTIONS: DEPLOYED_NODE_OPTIONS,
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
    const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-workflows-enrol');
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

    let t = performance.now();
    for (let from = 1; from <= N; from += 250_000) {
      const to = Math.min(N, from + 249_999);
      await db.query(`INSERT INTO contacts (name, email) SELECT 'Member ' || g, 'member' || g || '@enrol.bench' FROM generate_series($1::int, $2::int) g`, [
        from,
        to,
      ]);
    }
    const segment = (await call('POST', '/api/segments', { name: 'Bench members', type: 'static' })).segment;
    await db.query(`INSERT INTO segment_members (segment_id, contact_id) SELECT $1, id FROM contacts`, [segment.id]);
    await db.query('ANALYZE');
    log(`seeded ${N.toLocaleString()} contacts and their segment in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    t = performance.now();
    const w = (
      await call('POST', '/api/workflows', {
        name: 'Bench segment enrolment',
        status: 'active',
        trigger: { type: 'segment_entered', segmentId: segment.id },
        steps: [{ key: 'wait', type: 'wait', duration: '30d' }],
      })
    ).workflow;
    const answerMs = performance.now() - t;
    for (;;) {
      const r = (await db.query(`SELECT finished_at FROM workflow_segment_enrolments WHERE workflow_id = $1`, [w.id])).rows[0];
      if (r?.finished_at) break;
      if (performance.now() - t > 30 * 60_000) throw new Error('the enrolment did not finish within 30 minutes');
      await sleep(100);
    }
    const enrolMs = performance.now() - t;
    const counts = (
      await db.query(
        `SELECT (SELECT count(*) FROM workflow_enrollments WHERE workflow_id = $1)::int AS enrolled,
                (SELECT count(*) FROM workflow_enrollments WHERE workflow_id = $1 AND status = 'waiting')::int AS waiting,
                (SELECT count(*) FROM events WHERE type = 'workflow.enrolled' AND (data->>'workflowId')::int = $1)::int AS events`,
        [w.id],
      )
    ).rows[0];
    if (counts.enrolled !== N || counts.events !== N) throw new Error(`expected ${N} enrollments and events, got ${JSON.stringify(counts)}`);
    process.stdout.write(
      `${N.toLocaleString()} member segment enrolled (segment_entered, new workflow activated over it): ${(enrolMs / 1000).toFixed(1)} s ` +
        `(${Math.round(N / (enrolMs / 1000)).toLocaleString()} enrollments/s, each with its workflow.enrolled event; the activating request answered in ${Math.round(answerMs)} ms; ` +
        `${counts.waiting.toLocaleString()} already moved to their wait by the runner meanwhile)\n`,
    );
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
