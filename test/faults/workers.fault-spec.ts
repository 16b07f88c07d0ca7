/**
 * Faults around the job layer, with the API and the worker as separate processes on a private
 * Redis: a worker killed with SIGKILL in the middle of a report, and Redis stopped while messages
 * and reports are being queued. Each scenario asserts what the clients saw and what was lost.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { createDatabase, expectError, startApp, type TestApp } from '../support/app.js';
import { type PrivateRedis, startPrivateRedis } from '../support/services.js';
import { sleep, waitUntil } from '../support/wait.js';

const until = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60000) => waitUntil(what, probe, timeoutMs);

describe('job layer faults', () => {
  let redis: PrivateRedis;
  let db: Awaited<ReturnType<typeof createDatabase>>;
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  const env = { JOB_LOCK_MS: '2000', SMS_PROVIDER: 'log', RATE_LIMIT_ENTERPRISE: '1000000' };

  beforeAll(async () => {
    redis = await startPrivateRedis();
    db = await createDatabase();
    api = await startApp({ role: 'api', databaseUrl: db.url, redisUrl: redis.url, env });
    worker = await startApp({ role: 'worker', shareWith: api, env });
    auth = `Bearer ${await api.token('*', { plan: 'enterprise' })}`;
  });
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await db?.drop();
    await redis?.destroy();
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
