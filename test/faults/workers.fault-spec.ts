/**
 * Faults around the job layer, with the API and the worker as separate processes on a private
 * Redis: a worker killed with SIGKILL in the middle of a report; an import and a broadcast whose
 * worker is killed twice (BullMQ runs a stalled job again only once, then fails it: the recovery
 * sweeps must bring the work back within seconds); and Redis stopped while messages and reports are
 * being queued. Each scenario asserts what the clients saw and what was lost.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { expectError, startApp, type TestApp } from '../support/app.js';
import { type PrivateRedis, type SplitDeployment, startSplitDeployment, stopSplitDeployment } from '../support/services.js';
import { sleep, waitUntil } from '../support/wait.js';

const until = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60000) => waitUntil(what, probe, timeoutMs);

describe('job layer faults', () => {
  let redis: PrivateRedis;
  let db: SplitDeployment['db'];
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  // Imports one chunk of 100 rows at a time and broadcasts at 30 messages a second, so that both last long enough to be killed twice.
  const env = {
    JOB_LOCK_MS: '2000',
    SMS_PROVIDER: 'log',
    RATE_LIMIT_ENTERPRISE: '1000000',
    IMPORT_CHUNK_ROWS: '100',
    IMPORT_PARALLEL_CHUNKS: '1',
    SMS_MAX_PER_SECOND: '30',
  };

  beforeAll(async () => {
    ({ redis, db, api, worker, auth } = await startSplitDeployment(env));
  });
  afterAll(async () => {
    await stopSplitDeployment({ redis, db, api, worker });
  });

  it('a worker killed mid-report: after a worker restarts, the report completes with the right totals', async () => {
    // Enough won deals that computing the report takes a moment.
    await api.sql(`INSERT INTO contacts (name, email) VALUES ('Buyer', 'buyer@fault.test')`);
    await api.sql(
      `INSERT INTO deals (title, value, contact_id, status, product, quantity, closed_at)
       SELECT 'D' || i, (i % 100) + 0.5, (SELECT min(id) FROM contacts), 'won', 'P' || (i % 7), 1 + i % 3, now() - (i % 300) * interval '1 hour'
         FROM generate_series(1, 400000) i`,
    );
    const report = (
      await api.http
        .post('/api/reports/new')
        .set('Authorization', auth)
        .send({ name: 'Killed mid-run', type: 'sales', filters: { dateRange: 'last_30_days' }, columns: ['product', 'revenue', 'quantity'] })
    ).body.report;
    expectError(await api.http.get(`/api/reports/${report.id}/results`).set('Authorization', auth), 404, 'not_found');

    const probe = new Redis(redis.url);
    const run = await api.http.post(`/api/reports/${report.id}/run`).set('Authorization', auth);
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ status: 'queued', jobId: expect.any(String) });
    // Kill the worker while the job is active (taken, not finished).
    await until(
      'the report job to be active',
      async () =>
        (await probe.keys(`${api.env.REDIS_PREFIX}:*:active`)).length > 0 && (await probe.llen((await probe.keys(`${api.env.REDIS_PREFIX}:*:active`))[0])) > 0,
    );
    await worker!.kill('SIGKILL');
    const afterKill = await api.http.get(`/api/reports/${report.id}/results`).set('Authorization', auth);
    probe.disconnect();

    worker = await startApp({ role: 'worker', shareWith: api, env });
    const results = await until('the report results', async () => {
      const r = await api.http.get(`/api/reports/${report.id}/results`).set('Authorization', auth);
      return r.status === 200 ? r.body.results : null;
    });
    const [expected] = await api.sql<{ revenue: string; quantity: string }>(
      `SELECT sum(value)::text AS revenue, sum(quantity)::text AS quantity FROM deals WHERE status = 'won' AND closed_at >= now() - interval '30 days'`,
    );
    expect(results.summary.totalRevenue).toBeCloseTo(Number(expected.revenue), 2);
    expect(results.summary.totalQuantity).toBe(Number(expected.quantity));
    for (const row of results.data) expect(Object.keys(row).sort()).toEqual(['product', 'quantity', 'revenue']);
    // Either the killed run had not stored anything yet, or it had: both end in a complete result.
    expect([200, 404]).toContain(afterKill.status);
    const got = await api.http.get(`/api/reports/${report.id}`).set('Authorization', auth);
    expect(got.body.report.lastRun).not.toBeNull();
  });

  /**
   * Kills the worker running a job twice. Each time the next worker is already running (idle) when
   * the busy one dies, so its start-up recovery ran long before: only its stalled-job check and the
   * periodic recovery sweeps can take the work up again. The first death is a stall (the job runs
   * again), the second fails the job in BullMQ (maxStalledCount 1).
   */
  async function killTwice(progress: () => Promise<number>, label: string): Promise<{ secondKillAt: number; atSecondKill: number }> {
    const atStart = await progress();
    const spare = await startApp({ role: 'worker', shareWith: api, env });
    await until(`${label} to progress`, async () => (await progress()) > atStart, 60000);
    await worker!.kill('SIGKILL');
    worker = spare;
    const atFirstKill = await progress();
    await until(`${label} to resume after the first kill`, async () => (await progress()) > atFirstKill + 50, 60000);
    const third = await startApp({ role: 'worker', shareWith: api, env });
    await worker.kill('SIGKILL');
    worker = third;
    return { secondKillAt: Date.now(), atSecondKill: await progress() };
  }

  it('an import whose worker is killed twice resumes within seconds and completes; every row written once', async () => {
    const n = 80000;
    const lines = ['name,email'];
    for (let i = 0; i < n; i++) lines.push(`T${i},t${i}@twice.test`);
    const r = await api.http
      .post('/api/imports')
      .set('Authorization', auth)
      .field('object', 'contacts')
      .field('mode', 'create')
      .attach('file', Buffer.from(lines.join('\n') + '\n'), { filename: 'twice.csv', contentType: 'text/csv' });
    expect(r.status).toBe(202);
    const id = r.body.import.id as number;
    const get = async () =>
      (await api.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as { status: string; counts: Record<string, number> };
    const { secondKillAt, atSecondKill } = await killTwice(async () => (await get()).counts.processed, 'the import');
    expect(atSecondKill).toBeLessThan(n);
    await until('the import to resume after the second kill', async () => (await get()).counts.processed > atSecondKill, 30000);
    // Lock expiry + stalled check (JOB_LOCK_MS 2 s each) + the sweep (5 s), with slack for a loaded machine.
    expect(Date.now() - secondKillAt).toBeLessThan(25000);
    const done = await until(
      'the import to complete',
      async () => {
        const imp = await get();
        return imp.status === 'completed' ? imp : null;
      },
      120000,
    );
    expect(done.counts).toMatchObject({ total: n, processed: n, created: n, failed: 0 });
    const stored = await api.sql<{ n: string }>(`SELECT count(DISTINCT lower(email))::text AS n FROM contacts WHERE email LIKE '%@twice.test'`);
    expect(Number(stored[0].n)).toBe(n);
  }, 300000);

  it('a broadcast whose worker is killed twice resumes within seconds and completes; every message handed over once', async () => {
    const n = 1200;
    await api.sql(
      `INSERT INTO contacts (name, email, phone) SELECT 'R' || i, 'r' || i || '@bcast-twice.test', '+1415666' || lpad(i::text, 4, '0') FROM generate_series(1, ${n}) i`,
    );
    const ids = (await api.sql<{ id: number }>(`SELECT id FROM contacts WHERE email LIKE '%@bcast-twice.test' ORDER BY id`)).map((c) => c.id);
    const created = await api.http
      .post('/api/text-messages/broadcasts')
      .set('Authorization', auth)
      .send({ content: 'Twice {{contact.name}}', audience: { contactIds: ids } });
    expect(created.status).toBe(201);
    const id = created.body.broadcast.id as number;
    expect((await api.http.post(`/api/text-messages/broadcasts/${id}/send`).set('Authorization', auth)).status).toBe(202);
    const get = async () =>
      (await api.http.get(`/api/text-messages/broadcasts/${id}`).set('Authorization', auth)).body.broadcast as {
        status: string;
        counts: Record<string, number>;
      };
    const sent = async () => {
      const c = (await get()).counts;
      return c.sent + c.delivered;
    };
    const { secondKillAt, atSecondKill } = await killTwice(sent, 'the broadcast');
    expect(atSecondKill).toBeLessThan(n);
    await until('the broadcast to resume after the second kill', async () => (await sent()) > atSecondKill, 30000);
    // Lock expiry + stalled check (JOB_LOCK_MS 2 s each) + the sweep (5 s), with slack for a loaded machine (was a minute or more).
    expect(Date.now() - secondKillAt).toBeLessThan(25000);
    const done = await until(
      'the broadcast to complete',
      async () => {
        const b = await get();
        return b.status === 'completed' ? b : null;
      },
      120000,
    );
    expect(done.counts.sent + done.counts.delivered).toBe(n);
    // The log provider took each message's key once; hand-overs repeated after the kills were refused, not sent.
    const keys = await api.sql<{ n: string }>(
      `SELECT count(*)::text AS n FROM sms_log_sends l JOIN text_messages t ON l.message_id = t.id WHERE t.broadcast_id = $1`,
      [id],
    );
    expect(Number(keys[0].n)).toBe(n);
  }, 300000);

  it('Redis down: send and run answer 503 and change nothing; queued work resumes when Redis is back', async () => {
    const draft = (await api.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'Hello', recipient: '+14155550123' })).body
      .textMessage;
    const scheduledFor = new Date(Date.now() + 4000).toISOString();
    const scheduled = (
      await api.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'Later', recipient: '+14155550124', scheduledFor })
    ).body.textMessage;
    expect(scheduled.status).toBe('queued');
    const report = (await api.http.post('/api/reports/new').set('Authorization', auth).send({ name: 'During outage', type: 'sales' })).body.report;

    await redis.stop();
    await sleep(500);
    const send = await api.http.post(`/api/text-messages/${draft.id}/send`).set('Authorization', auth);
    expectError(send, 503, 'unavailable');
    const run = await api.http.post(`/api/reports/${report.id}/run`).set('Authorization', auth);
    expectError(run, 503, 'unavailable');
    // Nothing changed half-way: the draft is still a draft, the report never ran.
    expect((await api.http.get(`/api/text-messages/${draft.id}`).set('Authorization', auth)).body.textMessage.status).toBe('draft');
    expect((await api.http.get(`/api/reports/${report.id}`).set('Authorization', auth)).body.report.lastRun).toBeNull();
    // CRUD still works.
    expect((await api.http.get('/api/text-messages').set('Authorization', auth)).status).toBe(200);
    await sleep(4000); // the scheduled message falls due while Redis is down

    await redis.start();
    // Without restarting anything: the scheduled message goes out, and sending works again.
    const sent = await until('the scheduled message to be sent', async () => {
      const m = (await api.http.get(`/api/text-messages/${scheduled.id}`).set('Authorization', auth)).body.textMessage;
      return ['sent', 'delivered'].includes(m?.status) ? m : null;
    });
    expect(sent.sentAt).not.toBeNull();
    const retry = await until('send to be accepted again', async () => {
      const r = await api.http.post(`/api/text-messages/${draft.id}/send`).set('Authorization', auth);
      return r.status === 202 ? r : null;
    });
    expect(retry.body.textMessage.status).toBe('queued');
    await until('the draft to be delivered', async () => {
      const m = (await api.http.get(`/api/text-messages/${draft.id}`).set('Authorization', auth)).body.textMessage;
      return m?.status === 'delivered' ? m : null;
    });
  });
});
