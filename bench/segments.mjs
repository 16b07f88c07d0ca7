/**
 * Segments benchmark, on the seeded 1M-contact database of bench/run.mjs:
 *
 * 1. full rebuild of a dynamic segment matching about 300,000 of the contacts: from POST
 *    /api/segments to membership.status `ready` (and the server's own time for the set-based build);
 * 2. a filter change of that segment (a rebuild that removes and adds about 100,000 members);
 * 3. freshness: one contact changed to match (PATCH), the time until GET /api/contacts/{id}/segments
 *    shows the segment; then the change reverted, the time until it is gone.
 *
 * The segment is deleted at the end; the one contact is restored to its title (its modifiedAt
 * stays changed). Needs the segments migration on that database (`DATABASE_URL=... node dist/cli.js
 * migration:run`); runs the built app (dist/) without Redis, so its refresher runs in process.
 *
 * `node bench/segments.mjs` after `npm run build`. Environment: BENCH_DATABASE_ADMIN_URL,
 * BENCH_DATABASE (sf_bench), BENCH_TARGET (300000 members), SEGMENT_REFRESH_INTERVAL_MS (the app's default).
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { ROOT, createToken, databaseUrl, freePort } from './lib.mjs';

const DB_NAME = process.env.BENCH_DATABASE ?? 'sf_bench';
const TARGET = Number(process.env.BENCH_TARGET ?? 300_000);
const log = (m) => process.stderr.write(`[bench:segments] ${m}\n`);
const dbUrl = databaseUrl(DB_NAME);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const has = (await db.query(`SELECT to_regclass('segment_members') IS NOT NULL AS ok`)).rows[0].ok;
  if (!has) throw new Error(`${DB_NAME} has no segments tables: apply the migration first (DATABASE_URL=${dbUrl} node dist/cli.js migration:run)`);
  const total = Number((await db.query(`SELECT count(*) AS n FROM contacts`)).rows[0].n);
  // Two of the seed's five titles (about 40%), narrowed by creation time to about TARGET contacts.
  const titles = ['CEO', 'Consultant'];
  const inTitles = Number((await db.query(`SELECT count(*) AS n FROM contacts WHERE title = ANY($1)`, [titles])).rows[0].n);
  const skip = Math.max(0, inTitles - TARGET);
  const cutoff = (await db.query(`SELECT created_at FROM contacts WHERE title = ANY($1) ORDER BY created_at OFFSET $2 LIMIT 1`, [titles, skip])).rows[0]
    .created_at;
  const since = new Date(cutoff).toISOString();
  const filter = {
    and: [
      { field: 'title', op: 'in', value: titles },
      { field: 'createdAt', op: 'gte', value: since },
    ],
  };
  const expected = Number((await db.query(`SELECT count(*) AS n FROM contacts WHERE title = ANY($1) AND created_at >= $2`, [titles, cutoff])).rows[0].n);
  log(`${total} contacts; the filter matches ${expected}`);

  const token = createToken({ ...process.env, DATABASE_URL: dbUrl }, 'bench-segments');
  const port = await freePort();
  const serverLines = [];
  const api = spawn(process.execPath, ['dist/main.js'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: dbUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      RUN_MIGRATIONS: 'false',
      RATE_LIMIT_ENTERPRISE: '1000000000',
      ...(process.env.SEGMENT_REFRESH_INTERVAL_MS ? { SEGMENT_REFRESH_INTERVAL_MS: process.env.SEGMENT_REFRESH_INTERVAL_MS } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  api.stdout.on('data', (b) => {
    for (const line of b.toString().split('\n')) if (line.includes('segment')) serverLines.push(line);
  });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) break;
    } catch {
      /* starting */
    }
    if (i > 600) throw new Error('api did not start');
    await sleep(100);
  }
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
  const untilReady = async (id) => {
    for (;;) {
      const { segment } = await call('GET', `/api/segments/${id}`);
      if (segment.membership.status === 'ready') return segment;
      if (segment.membership.status === 'failed') throw new Error(`build failed: ${segment.membership.error}`);
      await sleep(50);
    }
  };
  const builtMs = () => {
    const l = serverLines.filter((x) => x.includes('segment rebuilt')).pop();
    return l ? JSON.parse(l.slice(l.indexOf('{'))).ms : null;
  };

  let segmentId = null;
  let contact = null;
  const out = [];
  try {
    let t = performance.now();
    const created = await call('POST', '/api/segments', { name: 'Bench segment', type: 'dynamic', filter });
    segmentId = created.segment.id;
    const built = await untilReady(segmentId);
    const rebuildMs = performance.now() - t;
    if (built.membership.count !== expected) throw new Error(`built ${built.membership.count} members, expected ${expected}`);
    out.push(
      `full rebuild of a dynamic segment matching ${expected.toLocaleString()} of ${total.toLocaleString()} contacts: ${(rebuildMs / 1000).toFixed(1)} s to ready (server build ${builtMs()} ms)`,
    );

    // A filter change: one title swapped (about a third of the members leave, as many join).
    const filter2 = {
      and: [
        { field: 'title', op: 'in', value: ['CEO', 'VP Sales'] },
        { field: 'createdAt', op: 'gte', value: since },
      ],
    };
    t = performance.now();
    await call('PATCH', `/api/segments/${segmentId}`, { filter: filter2 });
    const rebuilt = await untilReady(segmentId);
    out.push(
      `filter change (members swapped: ${rebuilt.membership.count.toLocaleString()} after): ${((performance.now() - t) / 1000).toFixed(1)} s to ready (server build ${builtMs()} ms)`,
    );
    await call('PATCH', `/api/segments/${segmentId}`, { filter });
    await untilReady(segmentId);

    // Freshness: one contact made to match, then restored.
    contact = (await db.query(`SELECT id, title FROM contacts WHERE title = 'Sales Manager' AND created_at >= $1 ORDER BY id LIMIT 1`, [cutoff])).rows[0];
    const contactId = contact.id;
    const inSegment = async () => (await call('GET', `/api/contacts/${contactId}/segments`)).segments.some((s) => s.id === segmentId);
    if (await inSegment()) throw new Error('the contact is a member before its change');
    t = performance.now();
    await call('PATCH', `/api/contacts/${contact.id}`, { title: 'CEO' });
    while (!(await inSegment())) await sleep(20);
    const joinMs = performance.now() - t;
    t = performance.now();
    await call('PATCH', `/api/contacts/${contact.id}`, { title: contact.title });
    const restored = contact;
    contact = null;
    while (await inSegment()) await sleep(20);
    const leaveMs = performance.now() - t;
    out.push(
      `single contact change reflected in its segment: joined after ${Math.round(joinMs)} ms, left after ${Math.round(leaveMs)} ms (contact ${restored.id}, title restored)`,
    );
  } finally {
    if (contact) await call('PATCH', `/api/contacts/${contact.id}`, { title: contact.title }).catch((e) => log(`restore failed: ${e.message}`));
    if (segmentId !== null) {
      const t = performance.now();
      await call('DELETE', `/api/segments/${segmentId}`).catch((e) => log(`delete failed: ${e.message}`));
      out.push(`delete of the segment (its ${expected.toLocaleString()} memberships): ${Math.round(performance.now() - t)} ms`);
    }
    api.kill('SIGTERM');
    await db.end();
  }
  for (const line of out) console.log(line);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
