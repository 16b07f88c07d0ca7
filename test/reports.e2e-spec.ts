import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { expectError, startApp, TEST_REDIS_URL, type TestApp, awayFromMidnight } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const DAY = 86_400_000;
const midnight = (d: Date) => Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());

interface SeedDeal {
  key: string;
  product: string;
  quantity: number;
  value: number;
  owner: 'alice' | 'bob' | 'carol';
  closedAt: Date;
  status?: 'won' | 'open' | 'lost';
}

// The "today" date range is checked against deals seeded today: never straddle midnight UTC.
await awayFromMidnight();

describe('reports (API and worker in separate processes, BullMQ on Redis)', () => {
  let api: TestApp;
  let worker: TestApp;
  let auth: string;
  let adminId: number;
  const env = { REPORT_SCHEDULE_DAILY: '*/2 * * * * *' };
  const today = midnight(new Date());
  const deals: SeedDeal[] = [
    { key: 'A', product: 'Widget', quantity: 2, value: 100, owner: 'alice', closedAt: new Date(today + 3600_000) },
    { key: 'B', product: 'Widget', quantity: 1, value: 50.5, owner: 'bob', closedAt: new Date(today + 2 * 3600_000) },
    { key: 'C', product: 'Gadget', quantity: 5, value: 500, owner: 'alice', closedAt: new Date(today - 3 * DAY + 12 * 3600_000) },
    { key: 'D', product: 'Gadget', quantity: 1, value: 99.99, owner: 'bob', closedAt: new Date(today - 10 * DAY + 12 * 3600_000) },
    { key: 'E', product: 'Widget', quantity: 3, value: 300, owner: 'alice', closedAt: new Date(today - 40 * DAY + 12 * 3600_000) },
    { key: 'F', product: 'Gizmo', quantity: 7, value: 700, owner: 'carol', closedAt: new Date(today - 400 * DAY) },
    { key: 'G', product: 'Widget', quantity: 9, value: 1000, owner: 'alice', closedAt: new Date(today + 3600_000), status: 'open' },
    { key: 'H', product: 'Widget', quantity: 9, value: 1000, owner: 'bob', closedAt: new Date(today + 3600_000), status: 'lost' },
    { key: 'I1', product: 'Widget', quantity: 1, value: 10, owner: 'bob', closedAt: new Date('2020-01-15T10:00:00Z') },
    { key: 'I2', product: 'Gadget', quantity: 2, value: 20, owner: 'bob', closedAt: new Date('2020-01-31T23:59:59Z') },
    { key: 'I3', product: 'Gadget', quantity: 4, value: 40, owner: 'bob', closedAt: new Date('2020-02-01T00:00:00Z') },
  ];
  const names = { alice: 'Alice Archer', bob: 'Bob Baker', carol: 'Carol Cruz' };

  beforeAll(async () => {
    api = await startApp({ role: 'api', env });
    worker = await startApp({ shareWith: api, role: 'worker', env });
    auth = await adminToken(api);
    adminId = (await api.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'admin@example.com'`))[0].id;
    const users = await api.sql<{ id: number; email: string }>(
      `INSERT INTO users (name, email, team) VALUES ($1, 'alice@example.com', 'east'), ($2, 'bob@example.com', 'west'), ($3, 'carol@example.com', 'east') RETURNING id, email`,
      [names.alice, names.bob, names.carol],
    );
    const ids = Object.fromEntries(users.map((u) => [u.email.split('@')[0], u.id]));
    const [{ id: contactId }] = await api.sql<{ id: number }>(`INSERT INTO contacts (name, email) VALUES ('Buyer', 'buyer@example.com') RETURNING id`);
    for (const d of deals) {
      await api.sql(`INSERT INTO deals (title, value, contact_id, status, product, quantity, closed_at, owner_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, [
        `Deal ${d.key}`,
        d.value,
        contactId,
        d.status ?? 'won',
        d.product,
        d.quantity,
        d.closedAt.toISOString(),
        ids[d.owner],
      ]);
    }
  }, 120000);
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
  });

  const create = (body: object) => api.http.post('/api/reports/new').set('Authorization', auth).send(body);

  /** Runs a report through the worker and returns its results. */
  async function runAndRead(id: number) {
    const before = (await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM report_results WHERE report_id = $1`, [id]))[0].n;
    const run = await api.http.post(`/api/reports/${id}/run`).set('Authorization', auth);
    expect(run.status).toBe(200);
    expect(run.body).toEqual({ status: 'queued', message: expect.any(String), jobId: expect.any(String) });
    await waitUntil(
      `a result of report ${id}`,
      async () => {
        const [{ n }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM report_results WHERE report_id = $1`, [id]);
        return n > before ? true : undefined;
      },
      20000,
    );
    const res = await api.http.get(`/api/reports/${id}/results`).set('Authorization', auth);
    expect(res.status).toBe(200);
    return res.body.results as { generatedAt: string; data: Record<string, unknown>[]; summary: { totalRevenue: number; totalQuantity: number } };
  }

  /** The expected sales rows, computed independently from the seed. */
  function expected(filter: (d: SeedDeal) => boolean) {
    const won = deals.filter((d) => (d.status ?? 'won') === 'won' && filter(d));
    const groups = new Map<string, { date: string; product: string; salesperson: string; revenue: number; quantity: number }>();
    for (const d of won) {
      const date = d.closedAt.toISOString().slice(0, 10);
      const k = `${date}|${d.product}|${d.owner}`;
      const g = groups.get(k) ?? { date, product: d.product, salesperson: names[d.owner], revenue: 0, quantity: 0 };
      g.revenue = Math.round((g.revenue + d.value) * 100) / 100;
      g.quantity += d.quantity;
      groups.set(k, g);
    }
    const rows = [...groups.values()].sort(
      (a, b) => a.date.localeCompare(b.date) || a.product.localeCompare(b.product) || a.salesperson.localeCompare(b.salesperson),
    );
    return {
      rows,
      totalRevenue: Math.round(won.reduce((s, d) => s + d.value, 0) * 100) / 100,
      totalQuantity: won.reduce((s, d) => s + d.quantity, 0),
    };
  }

  const inRange = (from: number, to: number) => (d: SeedDeal) => d.closedAt.getTime() >= from && d.closedAt.getTime() < to;
  const now = new Date();
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const ranges: [string, (d: SeedDeal) => boolean][] = [
    ['today', inRange(today, today + DAY)],
    ['last_7_days', inRange(today - 6 * DAY, today + DAY)],
    ['last_30_days', inRange(today - 29 * DAY, today + DAY)],
    ['this_month', inRange(Date.UTC(y, m, 1), Date.UTC(y, m + 1, 1))],
    ['last_month', inRange(Date.UTC(y, m - 1, 1), Date.UTC(y, m, 1))],
    ['this_year', inRange(Date.UTC(y, 0, 1), Date.UTC(y + 1, 0, 1))],
    ['2020-01-01..2020-01-31', inRange(Date.UTC(2020, 0, 1), Date.UTC(2020, 1, 1))],
  ];

  it('answers 404 for results before the first run, then the right rows and totals for each dateRange', async () => {
    for (const [dateRange, filter] of ranges) {
      const rep = await create({
        name: `Sales ${dateRange}`,
        type: 'sales',
        filters: { dateRange },
        columns: ['date', 'product', 'salesperson', 'revenue', 'quantity'],
      });
      expect(rep.status).toBe(201);
      const id = rep.body.report.id;
      if (dateRange === 'today') expectError(await api.http.get(`/api/reports/${id}/results`).set('Authorization', auth), 404, 'not_found');
      const results = await runAndRead(id);
      const exp = expected(filter);
      expect({ dateRange, data: results.data }).toEqual({ dateRange, data: exp.rows });
      expect(results.summary).toMatchObject({ totalRevenue: exp.totalRevenue, totalQuantity: exp.totalQuantity });
      expect(results.generatedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    }
  }, 120000);

  it('today covers exactly the two won deals closed today', async () => {
    const id = (await create({ name: 'Today', type: 'sales', filters: { dateRange: 'today' } })).body.report.id;
    const results = await runAndRead(id);
    expect(results.data).toEqual([
      { date: new Date(today).toISOString().slice(0, 10), product: 'Widget', salesperson: 'Alice Archer', revenue: 100, quantity: 2 },
      { date: new Date(today).toISOString().slice(0, 10), product: 'Widget', salesperson: 'Bob Baker', revenue: 50.5, quantity: 1 },
    ]);
    expect(results.summary).toMatchObject({ totalRevenue: 150.5, totalQuantity: 3 });
  }, 60000);

  it('filters by products and salesTeam, and rows carry only the report columns (grouped by them)', async () => {
    const byProduct = await runAndRead((await create({ name: 'Gadgets', type: 'sales', filters: { products: ['Gadget'] } })).body.report.id);
    expect(byProduct.data.map((r) => r.product)).toEqual(['Gadget', 'Gadget', 'Gadget', 'Gadget']);
    expect(byProduct.summary).toMatchObject({ totalRevenue: 659.99, totalQuantity: 12 });

    const east = await runAndRead(
      (await create({ name: 'East', type: 'sales', filters: { salesTeam: 'east' }, columns: ['salesperson', 'revenue', 'quantity'] })).body.report.id,
    );
    expect(east.data).toEqual([
      { salesperson: 'Alice Archer', revenue: 900, quantity: 10 },
      { salesperson: 'Carol Cruz', revenue: 700, quantity: 7 },
    ]);
    expect(east.summary).toMatchObject({ totalRevenue: 1600, totalQuantity: 17 });

    const projected = await runAndRead(
      (
        await create({
          name: 'Products 30d',
          type: 'sales',
          filters: { dateRange: 'last_30_days', products: ['Widget', 'Gadget'] },
          columns: ['product', 'revenue'],
        })
      ).body.report.id,
    );
    expect(projected.data).toEqual([
      { product: 'Gadget', revenue: 599.99 },
      { product: 'Widget', revenue: 150.5 },
    ]);
    for (const row of projected.data) expect(Object.keys(row)).toEqual(['product', 'revenue']);
    expect(projected.summary).toMatchObject({ totalRevenue: 750.49, totalQuantity: 9 });

    const totalsOnly = await runAndRead(
      (await create({ name: 'Totals', type: 'sales', filters: { salesTeam: 'west', dateRange: '2020-01-01..2020-01-31' }, columns: ['revenue', 'quantity'] }))
        .body.report.id,
    );
    expect(totalsOnly.data).toEqual([{ revenue: 30, quantity: 3 }]);
  }, 90000);

  it('stores lastRun and leaves a report_ready notification for the owner', async () => {
    const id = (await create({ name: 'Notify me', type: 'sales' })).body.report.id;
    const results = await runAndRead(id);
    const got = await api.http.get(`/api/reports/${id}`).set('Authorization', auth);
    expect(got.body.report.lastRun).toBe(results.generatedAt);
    const notes = await api.sql<{ details: { reportId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'report_ready'`, [adminId]);
    expect(notes.map((n) => n.details.reportId)).toContain(id);
  }, 60000);

  it('computes a marketing report per campaign: members and text messages by status', async () => {
    const [c1] = await api.sql<{ id: number }>(`INSERT INTO campaigns (name) VALUES ('Spring') RETURNING id`);
    const [c2] = await api.sql<{ id: number }>(`INSERT INTO campaigns (name) VALUES ('Autumn') RETURNING id`);
    const contacts = await api.sql<{ id: number }>(
      `INSERT INTO contacts (name, email) SELECT 'M' || g, 'm' || g || '@example.com' FROM generate_series(1, 3) g RETURNING id`,
    );
    for (const c of contacts) await api.sql(`INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2)`, [c1.id, c.id]);
    await api.sql(`INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2)`, [c2.id, contacts[0].id]);
    await api.sql(
      `INSERT INTO text_messages (content, recipient, status, campaign_id) VALUES ('a', '+14155550100', 'delivered', $1), ('b', '+14155550101', 'failed', $1), ('c', '+14155550102', 'draft', $2)`,
      [c1.id, c2.id],
    );
    const rep = await create({ name: 'Campaigns', type: 'marketing', columns: ['campaign', 'members', 'messages', 'delivered', 'failed', 'draft'] });
    expect(rep.status).toBe(201);
    const results = await runAndRead(rep.body.report.id);
    expect(results.data).toEqual([
      { campaign: 'Autumn', members: 1, messages: 1, delivered: 0, failed: 0, draft: 1 },
      { campaign: 'Spring', members: 3, messages: 2, delivered: 1, failed: 1, draft: 0 },
    ]);
    expect(results.summary).toMatchObject({ totalCampaigns: 2, totalMembers: 4, totalMessages: 3 });
  }, 60000);

  it('validates type, schedule, filters and columns per type', async () => {
    const bad = async (body: object, field: string) => {
      const err = expectError(await create(body), 400, 'validation_failed');
      expect(err.details!.map((d) => d.field)).toContain(field);
    };
    await bad({ name: 'x', type: 'finance' }, 'type');
    await bad({ name: 'x', type: 'sales', schedule: 'hourly' }, 'schedule');
    await bad({ name: 'x', type: 'sales', filters: { dateRange: 'yesterday' } }, 'filters.dateRange');
    await bad({ name: 'x', type: 'sales', filters: { dateRange: '2024-02-30..2024-03-01' } }, 'filters.dateRange');
    await bad({ name: 'x', type: 'sales', filters: { dateRange: '2024-03-02..2024-03-01' } }, 'filters.dateRange');
    await bad({ name: 'x', type: 'sales', filters: { products: 'Widget' } }, 'filters.products');
    await bad({ name: 'x', type: 'sales', filters: { salesTeam: 5 } }, 'filters.salesTeam');
    await bad({ name: 'x', type: 'sales', filters: { region: 'x' } }, 'filters.region');
    await bad({ name: 'x', type: 'marketing', filters: { salesTeam: 'east' } }, 'filters.salesTeam');
    await bad({ name: 'x', type: 'sales', columns: ['date', 'members'] }, 'columns');
    await bad({ name: 'x', type: 'sales', columns: [] }, 'columns');
    await bad({ name: 'x', type: 'marketing', columns: ['revenue'] }, 'columns');
    await bad({ name: 'x', type: 'sales', isPublished: 'true' }, 'isPublished');
    // Changing the type keeps columns that no longer fit: refused.
    const id = (await create({ name: 'typed', type: 'sales', columns: ['product', 'revenue'] })).body.report.id;
    expectError(await api.http.patch(`/api/reports/${id}/edit`).set('Authorization', auth).send({ type: 'marketing' }), 400, 'validation_failed');
    const ok = await api.http
      .patch(`/api/reports/${id}/edit`)
      .set('Authorization', auth)
      .send({ type: 'marketing', columns: ['campaign', 'sent'] });
    expect(ok.status).toBe(200);
    expect(ok.body.report).toMatchObject({ type: 'marketing', columns: ['campaign', 'sent'] });
  });

  it('CRUD in both styles, list filters, defaults and PUT semantics', async () => {
    const created = await create({ name: 'Weekly sales', description: 'All of it', type: 'sales', schedule: 'weekly', isPublished: false });
    expect(created.status).toBe(201);
    const r = created.body.report;
    expect(r).toMatchObject({
      name: 'Weekly sales',
      description: 'All of it',
      type: 'sales',
      isPublished: false,
      schedule: 'weekly',
      lastRun: null,
      nextRun: null, // unpublished: not scheduled
      filters: {},
      columns: ['date', 'product', 'salesperson', 'revenue', 'quantity'],
      createdBy: adminId,
      createdByUser: expect.any(String),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
    });
    const coll = await api.http.post('/api/reports').set('Authorization', auth).send({ name: 'Mkt', type: 'marketing' });
    expect(coll.status).toBe(201);
    expect(coll.body.report.columns).toEqual(['campaignId', 'campaign', 'members', 'messages', 'draft', 'queued', 'sent', 'delivered', 'failed']);

    const unpublished = await api.http.get('/api/reports?isPublished=false&type=sales').set('Authorization', auth);
    expect(unpublished.status).toBe(200);
    expect(unpublished.body.reports.map((x: { id: number }) => x.id)).toEqual([r.id]);
    expect(unpublished.body.total).toBe(1);
    const marketing = await api.http.get('/api/reports?type=marketing').set('Authorization', auth);
    expect(marketing.body.reports.every((x: { type: string }) => x.type === 'marketing')).toBe(true);
    expectError(await api.http.get('/api/reports?type=finance').set('Authorization', auth), 400, 'validation_failed');
    const search = await api.http.get('/api/reports?search=weekly').set('Authorization', auth);
    expect(search.body.reports.map((x: { id: number }) => x.id)).toEqual([r.id]);

    const put = await api.http.put(`/api/reports/${r.id}`).set('Authorization', auth).send({ name: 'Replaced', type: 'sales' });
    expect(put.status).toBe(200);
    expect(put.body.report).toMatchObject({ name: 'Replaced', description: null, schedule: null, isPublished: true, filters: {} });
    const putNew = await api.http.put('/api/reports/999999/edit').set('Authorization', auth).send({ name: 'New by PUT', type: 'sales' });
    expect(putNew.status).toBe(201);
    expect(putNew.body.report.id).not.toBe(999999);

    expectError(await api.http.patch('/api/reports/999999/edit').set('Authorization', auth).send({ name: 'x' }), 404, 'not_found');
    expectError(await api.http.post('/api/reports/999999/run').set('Authorization', auth), 404, 'not_found');
    const del = await api.http.delete(`/api/reports/${r.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.report.name).toBe('Replaced');
    expectError(await api.http.get(`/api/reports/${r.id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('needs reports permissions', async () => {
    const reader = await tokenFor(api, 'reports:read', { user: 'reader@example.com' });
    const id = (await create({ name: 'perm', type: 'sales' })).body.report.id;
    expect((await api.http.get(`/api/reports/${id}`).set('Authorization', reader)).status).toBe(200);
    expectError(await api.http.post(`/api/reports/${id}/run`).set('Authorization', reader), 403, 'forbidden');
    expectError(await api.http.delete(`/api/reports/${id}`).set('Authorization', reader), 403, 'forbidden');
    expectError(await api.http.get(`/api/reports/${id}`), 401, 'unauthorized');
  });

  it('schedules run the report on their period, keep nextRun true, and follow edits and deletes', async () => {
    const redis = new Redis(TEST_REDIS_URL);
    const schedulers = () => redis.zrange(`${api.env.REDIS_PREFIX}:reports:repeat`, 0, -1);
    try {
      // "daily" runs every 2 s in this suite (REPORT_SCHEDULE_DAILY); weekly and monthly keep their meaning.
      const rep = await create({ name: 'Scheduled', type: 'sales', schedule: 'daily' });
      const id = rep.body.report.id;
      const next = Date.parse(rep.body.report.nextRun);
      expect(next % 2000).toBe(0);
      expect(next).toBeGreaterThan(Date.now() - 1000);
      expect(next).toBeLessThanOrEqual(Date.now() + 2000);
      expect(await schedulers()).toContain(`report-schedule-${id}`);

      const lastRun = await waitUntil(
        'a scheduled run',
        async () => {
          const r = (await api.http.get(`/api/reports/${id}`).set('Authorization', auth)).body.report;
          return r.lastRun ?? undefined;
        },
        15000,
      );
      const triggers = await api.sql<{ trigger: string }>(`SELECT trigger FROM report_results WHERE report_id = $1`, [id]);
      expect(triggers.map((t) => t.trigger)).toContain('schedule');
      // It keeps running: a second scheduled run moves lastRun on.
      await waitUntil(
        'a second scheduled run',
        async () => {
          const r = (await api.http.get(`/api/reports/${id}`).set('Authorization', auth)).body.report;
          return r.lastRun !== lastRun ? true : undefined;
        },
        15000,
      );
      const got = (await api.http.get(`/api/reports/${id}`).set('Authorization', auth)).body.report;
      expect(Date.parse(got.nextRun)).toBeGreaterThan(Date.parse(got.lastRun) - 1000);

      const weekly = (await api.http.patch(`/api/reports/${id}`).set('Authorization', auth).send({ schedule: 'weekly' })).body.report;
      const nextMonday = new Date(today + ((8 - new Date(today).getUTCDay()) % 7 || 7) * DAY);
      expect(weekly.nextRun).toBe(nextMonday.toISOString().slice(0, 19) + '+00:00');
      const monthly = (await api.http.patch(`/api/reports/${id}`).set('Authorization', auth).send({ schedule: 'monthly' })).body.report;
      expect(monthly.nextRun).toBe(new Date(Date.UTC(y, m + 1, 1)).toISOString().slice(0, 19) + '+00:00');

      const cleared = (await api.http.patch(`/api/reports/${id}`).set('Authorization', auth).send({ schedule: null })).body.report;
      expect(cleared.nextRun).toBeNull();
      expect(await schedulers()).not.toContain(`report-schedule-${id}`);
      await new Promise((r) => setTimeout(r, 500));
      const [{ n: before }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM report_results WHERE report_id = $1`, [id]);
      await new Promise((r) => setTimeout(r, 4500));
      const [{ n: after }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM report_results WHERE report_id = $1`, [id]);
      expect(after).toBe(before);

      await api.http.patch(`/api/reports/${id}`).set('Authorization', auth).send({ schedule: 'daily' });
      expect(await schedulers()).toContain(`report-schedule-${id}`);
      expect((await api.http.delete(`/api/reports/${id}`).set('Authorization', auth)).status).toBe(200);
      expect(await schedulers()).not.toContain(`report-schedule-${id}`);
    } finally {
      redis.disconnect();
    }
  }, 90000);
});
