import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import type { CreateReportDto, UpdateReportDto } from './report.dto.js';
import { ReportsProcessor } from './reports.processor.js';
import { ReportsRepository } from './reports.repository.js';
import { ReportsService } from './reports.service.js';

const ctxJob = (jobId = 'spec-job') => ({ jobId, attempt: 1, maxAttempts: 3 });

describe('ReportsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let reports: ReportsService;
  let processor: ReportsProcessor;
  let who: Principal;

  beforeAll(async () => {
    ctx = await startServiceContext();
    reports = ctx.get(ReportsService);
    processor = ctx.get(ReportsProcessor);
    who = await ctx.principal();
  });
  afterAll(async () => {
    await ctx.close();
  });

  const create = (dto: Partial<CreateReportDto>) => reports.create({ name: 'R', type: 'sales', ...dto }, who);

  it('creates a report with the type’s default columns, no schedule, and its owner', async () => {
    const r = await create({ name: '  Sales  ' });
    expect(r).toMatchObject({ name: 'Sales', type: 'sales', isPublished: true, schedule: null, nextRun: null, lastRun: null, filters: {} });
    expect(r.columns).toEqual(['date', 'product', 'salesperson', 'revenue', 'quantity']);
    expect(r.createdBy).toBe(who.userId);
    expect(await reports.get(r.id)).toEqual(r);
  });

  it('a schedule gives a next run while published', async () => {
    const r = await create({ name: 'Daily', schedule: 'daily' });
    expect(r.nextRun).not.toBeNull();
    const off = await reports.patch(r.id, { isPublished: false }, who);
    expect(off.nextRun).toBeNull();
  });

  it('validates filters and columns for the type, and refuses null or empty names', async () => {
    await expect(create({ type: 'marketing', filters: { salesTeam: 'x' } })).rejects.toMatchObject({ status: 400 });
    await expect(create({ columns: ['members'] })).rejects.toMatchObject({ status: 400 });
    await expect(create({ name: '   ' })).rejects.toMatchObject({ status: 400 });
    const r = await create({ name: 'Nulls' });
    const e = (await reports.patch(r.id, { name: null } as unknown as UpdateReportDto, who).catch((x: unknown) => x)) as AppError;
    expect(e.details?.[0].field).toBe('name');
  });

  it('lists with search and filters', async () => {
    await create({ name: 'Findable marketing', type: 'marketing' });
    const found = await reports.list({ search: 'Findable' });
    expect(found.total).toBe(1);
    const marketing = await reports.list({ type: 'marketing', limit: '200' });
    expect(marketing.reports.every((r) => r.type === 'marketing')).toBe(true);
  });

  it('concurrent PATCHes of different properties all survive', async () => {
    const r = await create({ name: 'Race' });
    const changes: UpdateReportDto[] = [
      { name: 'Race 2' },
      { description: 'about' },
      { isPublished: false },
      { columns: ['product', 'revenue'] },
      { filters: { dateRange: 'last_7_days' } },
    ] as UpdateReportDto[];
    await Promise.all(changes.map((c) => reports.patch(r.id, c, who)));
    expect(await reports.get(r.id)).toMatchObject({
      name: 'Race 2',
      description: 'about',
      isPublished: false,
      columns: ['product', 'revenue'],
      filters: { dateRange: 'last_7_days' },
      modifiedBy: who.userId,
    });
  });

  it('PUT replaces (omitted properties reset) or creates a new report', async () => {
    const r = await create({ name: 'Full', description: 'x', schedule: 'weekly', columns: ['revenue'] });
    const { created, report } = await reports.put(r.id, { name: 'Replaced', type: 'sales' }, who);
    expect(created).toBe(false);
    expect(report).toMatchObject({ id: r.id, name: 'Replaced', description: null, schedule: null, filters: {} });
    expect(report.columns).toHaveLength(5);
    const made = await reports.put(987654321, { name: 'New', type: 'marketing' }, who);
    expect(made.created).toBe(true);
    expect(made.report.id).not.toBe(987654321);
    await expect(reports.patch(987654320, { name: 'x' }, who)).rejects.toMatchObject({ status: 404 });
  });

  it('DELETE answers the report once and 404 to the others', async () => {
    const r = await create({ name: 'Delete race', schedule: 'monthly' });
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => reports.remove(r.id)));
    expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(1);
    for (const x of results.filter((y) => y.status === 'rejected')) expect(x.reason).toMatchObject({ status: 404 });
  });

  it('a run aggregates in SQL, stores the result, sets lastRun and notifies the owner', async () => {
    const [seller] = await ctx.query<{ id: number }>(
      `INSERT INTO users (email, name, plan, team) VALUES ('seller-svc@example.test', 'Sam', 'enterprise', 'north') RETURNING id`,
    );
    const [contact] = await ctx.query<{ id: number }>(`INSERT INTO contacts (name, email) VALUES ('Buyer', 'buyer-svc@example.test') RETURNING id`);
    const closed = new Date().toISOString();
    for (const [product, value, quantity] of [
      ['Widget', 100.5, 2],
      ['Widget', 50, 1],
      ['Gadget', 10, 3],
    ] as const) {
      await ctx.query(
        `INSERT INTO deals (title, value, contact_id, status, product, quantity, owner_id, closed_at) VALUES ($1, $2, $3, 'won', $4, $5, $6, $7)`,
        [`${product} deal`, value, contact.id, product, quantity, seller.id, closed],
      );
    }
    // A custom range around now (yesterday..tomorrow, UTC) holds the deals whatever the hour.
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const dateRange = `${day(-1)}..${day(1)}`;
    const r = await create({ name: 'Widgets', columns: ['product', 'revenue', 'quantity'], filters: { dateRange, salesTeam: 'north' } });
    await expect(reports.latestResult(r.id)).rejects.toMatchObject({ status: 404 });
    await processor.run({ reportId: r.id, trigger: 'manual' }, ctxJob());
    const { results } = await reports.latestResult(r.id);
    expect(results.data).toEqual([
      { product: 'Gadget', revenue: 10, quantity: 3 },
      { product: 'Widget', revenue: 150.5, quantity: 3 },
    ]);
    expect(results.summary).toMatchObject({ totalRevenue: 160.5, totalQuantity: 6, rowCount: 2 });
    expect((await reports.get(r.id)).lastRun).not.toBeNull();
    const notes = await ctx.query<{ type: string }>(`SELECT type FROM notifications WHERE user_id = $1 AND type = 'report_ready'`, [who.userId]);
    expect(notes.length).toBeGreaterThanOrEqual(1);
  });

  it('keeps the latest results only, and a run of a deleted report stores nothing', async () => {
    const r = await create({ name: 'Many runs', type: 'marketing' });
    for (let i = 0; i < 12; i++) await processor.run({ reportId: r.id, trigger: 'manual' }, ctxJob(`j${i}`));
    const [{ n }] = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM report_results WHERE report_id = $1`, [r.id]);
    expect(Number(n)).toBe(10);
    await reports.remove(r.id);
    await expect(processor.run({ reportId: r.id, trigger: 'schedule' }, ctxJob())).resolves.toBeUndefined();
    // A deletion that lands between computing and storing: the stored step finds no row and stores nothing.
    const gone = await create({ name: 'Vanishing', type: 'marketing' });
    const repo = ctx.get(ReportsRepository);
    const compute = processor.compute.bind(processor);
    processor.compute = async (report, now) => {
      const out = await compute(report, now);
      await repo.remove(gone.id);
      return out;
    };
    try {
      await processor.run({ reportId: gone.id, trigger: 'manual' }, ctxJob());
    } finally {
      processor.compute = compute;
    }
    const [{ m }] = await ctx.query<{ m: string }>(`SELECT count(*) AS m FROM report_results WHERE report_id = $1`, [gone.id]);
    expect(Number(m)).toBe(0);
  });

  it('queues a manual run and re-syncs schedules', async () => {
    const r = await create({ name: 'Queued', type: 'marketing', schedule: 'daily' });
    const queued = await reports.run(r.id);
    expect(queued).toMatchObject({ status: 'queued', jobId: expect.any(String) });
    await expect(reports.run(987654321)).rejects.toMatchObject({ status: 404 });
    await expect(processor.syncSchedules()).resolves.toBeUndefined();
    expect((await ctx.get(ReportsRepository).scheduled()).map((s) => s.id)).toContain(r.id);
  });
});
