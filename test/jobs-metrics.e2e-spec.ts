/**
 * Job metrics are recorded. After a job runs, GET /metrics (scraped with
 * METRICS_TOKEN) shows jobs_total for it and the queue-depth gauge, under both job runners:
 * BullMQ on Redis and the in-process runner without Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startApp, type TestApp } from './support/app.js';
import { waitUntil } from './support/wait.js';
import { adminToken } from './support/fixtures.js';

const METRICS_TOKEN = 'jobs-metrics-scrape-secret';

/** The value of one sample line `name{labels} value` in a Prometheus text exposition, if present. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const m = /^[^{]+\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const got = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[2]);
  }
  return undefined;
}

describe.each([
  ['BullMQ (Redis)', {}],
  ['in-process (no Redis)', { noRedis: true }],
] as const)('job metrics with the %s runner', (_label, options) => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    app = await startApp({ ...options, env: { METRICS_TOKEN } });
    auth = await adminToken(app);
  }, 120000);
  afterAll(async () => {
    await app?.stop();
  });

  const scrape = async () => {
    const res = await app.http.get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`);
    expect(res.status).toBe(200);
    return res.text;
  };

  it('counts a finished job in jobs_total and reports queue depths', async () => {
    const created = await app.http.post('/api/reports/new').set('Authorization', auth).send({ name: 'Metrics', type: 'marketing' });
    expect(created.status).toBe(201);
    const id = created.body.report.id as number;
    expect(sample(await scrape(), 'jobs_total', { name: 'reports.run', outcome: 'completed' })).toBeUndefined();

    expect((await app.http.post(`/api/reports/${id}/run`).set('Authorization', auth)).status).toBe(200);
    await waitUntil(
      'the report result',
      async () => ((await app.http.get(`/api/reports/${id}/results`).set('Authorization', auth)).status === 200 ? true : undefined),
      30000,
    );

    // The result is committed inside the job; the outcome is counted right after the handler returns.
    const text = await waitUntil(
      'jobs_total for reports.run',
      async () => {
        const t = await scrape();
        return sample(t, 'jobs_total', { name: 'reports.run', outcome: 'completed' }) === 1 ? t : undefined;
      },
      10000,
    );
    for (const queue of ['reports', 'sms', 'maintenance']) {
      for (const state of ['waiting', 'active', 'delayed']) {
        expect(sample(text, 'queue_jobs', { queue, state })).toEqual(expect.any(Number));
      }
    }
    expect(sample(text, 'queue_jobs', { queue: 'reports', state: 'waiting' })).toBe(0);
  });
});
