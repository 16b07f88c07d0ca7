import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expectError, freePort, ROOT, startApp, type TestApp, awayFromMidnight } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { FakeGateway, sign } from './support/sms-gateway.js';
import { waitUntil } from './support/wait.js';

const SECRET = 'embedded-secret';

// The "today" date range is checked against deals seeded today: never straddle midnight UTC.
await awayFromMidnight();

describe('jobs without Redis: embedded PostgreSQL, everything in one process', () => {
  let gateway: FakeGateway;
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    gateway = await new FakeGateway().start();
    app = await startApp({
      embedded: true,
      env: { SMS_PROVIDER: 'http', SMS_HTTP_URL: gateway.url, SMS_WEBHOOK_SECRET: SECRET, REPORT_SCHEDULE_DAILY: '*/2 * * * * *' },
    });
    auth = await adminToken(app);
  }, 120000);
  afterAll(async () => {
    await app?.stop();
    await gateway?.stop();
  });

  const http = () => app.http;

  it('reports: run, results and schedules work in process', async () => {
    const health = await http().get('/health');
    expect(health.body.queue).toEqual({ mode: 'in-process', status: 'up' });
    const seller = await app.cli(['user:create', '--email', 'seller@example.com', '--name', 'Sam Seller', '--team', 'north']);
    expect(seller.code).toBe(0);
    const sellerId = Number(/user (\d+) created/.exec(seller.stdout)![1]);
    const contact = await http().post('/api/contacts').set('Authorization', auth).send({ name: 'Buyer', email: 'buyer@example.com' });
    const now = new Date().toISOString();
    const deal = (body: object) =>
      http()
        .post('/api/deals')
        .set('Authorization', auth)
        .send({ contact_id: contact.body.contact.id, status: 'won', closed_at: now, ...body });
    expect((await deal({ title: 'a', value: 10, product: 'Widget', quantity: 2, owner_id: sellerId })).status).toBe(201);
    expect((await deal({ title: 'b', value: 5.25, product: 'Widget', quantity: 1, owner_id: sellerId })).status).toBe(201);
    expect((await deal({ title: 'c', value: 100, product: 'Gadget', quantity: 1 })).status).toBe(201);
    expect((await deal({ title: 'd', value: 999, product: 'Widget', status: 'open', closed_at: null })).status).toBe(201);

    const rep = await http()
      .post('/api/reports/new')
      .set('Authorization', auth)
      .send({ name: 'North', type: 'sales', filters: { dateRange: 'today', salesTeam: 'north' }, columns: ['product', 'salesperson', 'revenue', 'quantity'] });
    expect(rep.status).toBe(201);
    const id = rep.body.report.id;
    expectError(await http().get(`/api/reports/${id}/results`).set('Authorization', auth), 404, 'not_found');
    const run = await http().post(`/api/reports/${id}/run`).set('Authorization', auth);
    expect(run.status).toBe(200);
    expect(run.body.status).toBe('queued');
    const results = await waitUntil(
      'report results',
      async () => {
        const r = await http().get(`/api/reports/${id}/results`).set('Authorization', auth);
        return r.status === 200 ? r.body.results : undefined;
      },
      20000,
    );
    expect(results.data).toEqual([{ product: 'Widget', salesperson: 'Sam Seller', revenue: 15.25, quantity: 3 }]);
    expect(results.summary).toMatchObject({ totalRevenue: 15.25, totalQuantity: 3 });

    // A schedule ("daily" = every 2 s in this suite) runs it again by itself.
    const first = (await http().get(`/api/reports/${id}`).set('Authorization', auth)).body.report.lastRun;
    const scheduled = await http().patch(`/api/reports/${id}`).set('Authorization', auth).send({ schedule: 'daily' });
    expect(Date.parse(scheduled.body.report.nextRun) % 2000).toBe(0);
    await waitUntil(
      'a scheduled run',
      async () => {
        const r = (await http().get(`/api/reports/${id}`).set('Authorization', auth)).body.report;
        return r.lastRun !== first ? true : undefined;
      },
      15000,
    );
    const off = await http().patch(`/api/reports/${id}`).set('Authorization', auth).send({ isPublished: false });
    expect(off.body.report.nextRun).toBeNull();
  }, 90000);

  it('text messages: send through the HTTP provider, retries, delivery report, scheduled send', async () => {
    const create = (body: object) => http().post('/api/text-messages').set('Authorization', auth).send(body);
    const get = async (id: number) => {
      const r = await http().get(`/api/text-messages/${id}`).set('Authorization', auth);
      if (r.status !== 200) throw new Error(`GET /api/text-messages/${id}: ${r.status} ${JSON.stringify(r.body)}\n${app.logs.join('').slice(-3000)}`);
      return r.body.textMessage;
    };
    const waitStatus = (id: number, status: string) => waitUntil(`status ${status}`, async () => ((await get(id)).status === status ? true : undefined), 30000);

    gateway.script('+14155550150', [503, 200]);
    const t = (await create({ content: 'embedded', recipient: '+14155550150' })).body.textMessage;
    const sent = await http().post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    expect(sent.status).toBe(202);
    expect(sent.body.textMessage.status).toBe('queued');
    await waitStatus(t.id, 'sent');
    expect(gateway.requestsTo('+14155550150').map((r) => r.headers['idempotency-key'])).toEqual([`textmessage-${t.id}-1`, `textmessage-${t.id}-1`]);
    const body = JSON.stringify({ reference: `textmessage-${t.id}-1`, status: 'delivered' });
    expectError(
      await http().post('/api/text-messages/delivery-reports').set('Content-Type', 'application/json').set('X-Signature', sign('nope', body)).send(body),
      401,
      'unauthorized',
    );
    const ok = await http()
      .post('/api/text-messages/delivery-reports')
      .set('Content-Type', 'application/json')
      .set('X-Signature', sign(SECRET, body))
      .send(body);
    expect(ok.body).toEqual({ accepted: true, status: 'delivered' });
    expect((await get(t.id)).deliveredAt).not.toBeNull();

    const later = (await create({ content: 'later', recipient: '+14155550151', scheduledFor: new Date(Date.now() + 2000).toISOString() })).body.textMessage;
    expect(later.status).toBe('queued');
    await waitStatus(later.id, 'sent');
    expect(gateway.requestsTo('+14155550151')).toHaveLength(1);
  }, 90000);

  it('has no queue dashboard without Redis', async () => {
    expectError(await http().get('/api/admin/queues').set('Authorization', auth), 404, 'not_found');
  });
});

describe('jobs on PostgreSQL without Redis, default log provider', () => {
  let app: TestApp;
  let auth: string;
  beforeAll(async () => {
    app = await startApp({ noRedis: true });
    auth = await tokenFor(app, '*');
  }, 120000);
  afterAll(async () => app?.stop());

  it('the log provider records the send and reports it delivered', async () => {
    const t = (await app.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'logged', recipient: '+14155550160' })).body
      .textMessage;
    expect((await app.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth)).status).toBe(202);
    const done = await waitUntil(
      'delivered',
      async () => {
        const m = (await app.http.get(`/api/text-messages/${t.id}`).set('Authorization', auth)).body.textMessage;
        return m.status === 'delivered' ? m : undefined;
      },
      20000,
    );
    expect(done.sentAt).not.toBeNull();
    expect(done.deliveredAt).not.toBeNull();
    const [row] = await app.sql<{ provider: string; claim_token: string | null }>(`SELECT provider, claim_token FROM text_messages WHERE id = $1`, [t.id]);
    expect(row).toEqual({ provider: 'log', claim_token: null });
  });

  it('re-queues messages left queued when the process starts again', async () => {
    const t = (await app.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'orphan', recipient: '+14155550161' })).body
      .textMessage;
    // As if the process had died after queueing: queued in the database, no job anywhere.
    await app.sql(`UPDATE text_messages SET status = 'queued', send_count = 1, queued_at = now() WHERE id = $1`, [t.id]);
    await app.kill('SIGTERM');
    const again = await startApp({ shareWith: app });
    try {
      await waitUntil(
        'the orphan to be sent after restart',
        async () => {
          const [m] = await app.sql<{ status: string }>(`SELECT status FROM text_messages WHERE id = $1`, [t.id]);
          return m.status === 'delivered' ? true : undefined;
        },
        20000,
      );
    } finally {
      await again.stop();
    }
  }, 90000);
});

describe('jobs when Redis is unreachable', () => {
  let app: TestApp;
  let auth: string;
  beforeAll(async () => {
    app = await startApp({ env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}` } });
    // The admin CLI itself waits for Redis when REDIS_URL is set: make the token without it.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['dist/cli.js', 'token:create', '--user', 'admin@example.com', '--name', 't', '--permissions', '*'],
      {
        cwd: ROOT,
        env: { ...app.env, REDIS_URL: '' },
      },
    );
    auth = `Bearer ${stdout.trim().split('\n').pop()}`;
  }, 120000);
  afterAll(async () => app?.stop());

  it('answers 503 on routes that must queue, with nothing half done', async () => {
    const health = await app.http.get('/health');
    expect(health.body.queue.status).toBe('down');
    const t = (await app.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'stuck', recipient: '+14155550170' })).body.textMessage;
    expect(t.status).toBe('draft');
    expectError(await app.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth), 503, 'unavailable');
    const [row] = await app.sql<{ status: string; send_count: number }>(`SELECT status, send_count FROM text_messages WHERE id = $1`, [t.id]);
    expect(row).toEqual({ status: 'draft', send_count: 0 });
    expectError(
      await app.http
        .post('/api/text-messages/new')
        .set('Authorization', auth)
        .send({ content: 'later', recipient: '+14155550171', scheduledFor: '2030-01-01T00:00:00Z' }),
      503,
      'unavailable',
    );
    const [{ n }] = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM text_messages`);
    expect(n).toBe(1);

    const rep = await app.http.post('/api/reports/new').set('Authorization', auth).send({ name: 'r', type: 'sales', schedule: 'daily' });
    expect(rep.status).toBe(201); // the schedule is repaired by the periodic sync once Redis is back
    expectError(await app.http.post(`/api/reports/${rep.body.report.id}/run`).set('Authorization', auth), 503, 'unavailable');
  }, 60000);
});
