import { beforeAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Pipelines1763700003000 } from '../database/migrations/1763700003000-pipelines.js';
import { DealStageTotals1763700003700 } from '../database/migrations/1763700003700-deal-stage-totals.js';
import { DealFunnelRollups1763700003710 } from '../database/migrations/1763700003710-deal-funnel-rollups.js';
import { DealForecastMonths1763700003720 } from '../database/migrations/1763700003720-deal-forecast-months.js';
import { DealSnapshotDays1763700003730 } from '../database/migrations/1763700003730-deal-snapshot-days.js';
import { DealsService } from '../deals/deals.service.js';
import { PipelinesService } from './pipelines.service.js';

/**
 * The migration that moves existing deals into a default pipeline, run on deals written before it
 * (the report rollups built on it are taken down first and backfilled after it).
 */
describe('pipelines migration (real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let contactId: number;

  beforeAll(async () => {
    contactId = await spec.ctx.contact('M', 'm');
    const runner = spec.ctx.get(DataSource).createQueryRunner();
    try {
      await new DealSnapshotDays1763700003730().down(runner);
      await new DealForecastMonths1763700003720().down(runner);
      await new DealFunnelRollups1763700003710().down(runner);
      await new DealStageTotals1763700003700().down(runner);
      await new Pipelines1763700003000().down(runner);
      const deal = (title: string, stage: string | null, status: string, probability: number | null, createdAt: string) =>
        runner.query(
          `INSERT INTO deals (title, value, contact_id, stage, status, probability, created_at, closed_at, created_by)
           VALUES ($1, 100, $2, $3, $4, $5, $6, CASE WHEN $4 = 'open' THEN NULL ELSE $6::timestamptz + interval '1 day' END, $7)`,
          [title, contactId, stage, status, probability, createdAt, spec.who.userId],
        );
      await deal('a', 'proposal', 'open', 60, '2026-01-01T00:00:00Z');
      await deal('b', 'qualification', 'open', 20, '2026-01-02T00:00:00Z');
      await deal('c', 'proposal', 'won', null, '2026-01-03T00:00:00Z');
      await deal('d', null, 'open', null, '2026-01-04T00:00:00Z');
      await deal('e', 'closed-won', 'won', 100, '2026-01-05T00:00:00Z');
      await deal('f', null, 'lost', null, '2026-01-06T00:00:00Z');
      await new Pipelines1763700003000().up(runner);
      await new DealStageTotals1763700003700().up(runner);
      // Migrations run in a transaction (the ledger's rebuild locks it).
      await runner.startTransaction();
      await new DealFunnelRollups1763700003710().up(runner);
      await runner.commitTransaction();
      await new DealForecastMonths1763700003720().up(runner);
      await new DealSnapshotDays1763700003730().up(runner);
    } finally {
      await runner.release();
    }
  });

  it('makes one default pipeline, strictStages false, a stage per distinct value (typed by the statuses using it), plus the missing types', async () => {
    const list = await spec.ctx.get(PipelinesService).list({});
    expect(list.total).toBe(1);
    const [p] = list.pipelines;
    expect(p).toMatchObject({ name: 'Sales', isDefault: true, strictStages: false });
    expect(p.stages.map((s) => [s.name, s.type, s.probability, s.order])).toEqual([
      ['qualification', 'open', 20, 0],
      ['proposal', 'open', 60, 1],
      ['closed-won', 'won', 100, 2],
      ['Lost', 'lost', 0, 3],
    ]);
  });

  it('moves every deal into it: the stage of its name when the type fits its status, else the first stage of its status; one ledger row each', async () => {
    const deals = spec.ctx.get(DealsService);
    const all = (await deals.list({ orderBy: 'title' })).deals;
    expect(all.map((d) => [d.title, d.stage, d.status, d.probability])).toEqual([
      ['a', 'proposal', 'open', 60],
      ['b', 'qualification', 'open', 20],
      ['c', 'closed-won', 'won', 100],
      ['d', 'qualification', 'open', 20],
      ['e', 'closed-won', 'won', 100],
      ['f', 'Lost', 'lost', 0],
    ]);
    expect(all.find((d) => d.title === 'a')?.entered_stage_at).toBe('2026-01-01T00:00:00+00:00');
    const rows = await spec.ctx.query<{ deal_id: number; from_stage_id: number | null; to_stage_id: number; at: Date; by: number }>(
      `SELECT deal_id, from_stage_id, to_stage_id, at, by FROM deal_stage_changes ORDER BY deal_id`,
    );
    expect(rows).toHaveLength(6);
    for (const d of all) {
      const row = rows.find((r) => r.deal_id === d.id);
      expect(row).toMatchObject({ from_stage_id: null, to_stage_id: d.stage_id, by: spec.who.userId });
      expect(row?.at.toISOString().slice(0, 19)).toBe(d.entered_stage_at.slice(0, 19));
    }
    // The report rollups are backfilled from the moved deals and their ledger rows.
    const [sums] = await spec.ctx.query<{ entries: number; deals: number }>(
      `SELECT (SELECT sum(entries) FROM deal_funnel_days)::int AS entries, (SELECT sum(deals) FROM deal_stage_totals)::int AS deals`,
    );
    expect(sums).toEqual({ entries: 6, deals: 6 });
    // Old clients keep working: a new free-text stage joins the default pipeline.
    const made = await deals.create({ title: 'g', value: 1, contact_id: contactId, stage: 'negotiation' }, spec.who);
    expect(made).toMatchObject({ stage: 'negotiation', status: 'open' });
  });
});
