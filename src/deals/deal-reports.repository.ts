import { Injectable } from '@nestjs/common';
import { Transactions } from '../database/transactions.js';

/** A pipeline's current stages as the reports take them (from PipelinesService: this feature does not read pipeline tables). */
export interface ReportStage {
  id: number;
  probability: number;
  position: number;
  type: string;
}

/** The optional owner and company filters of every report. */
export interface ReportFilters {
  ownerId: number | null;
  companyId: number | null;
}

export interface ForecastRow {
  key: string | null;
  count: number;
  value: string;
  weighted: string;
}

export interface FunnelRow {
  stage_id: number;
  entered: number;
  moved_on: number;
  lost: number;
  reached_next: number;
  reached_won: number;
  median_seconds: number | null;
  p90_seconds: number | null;
}

/** A funnel row from the rollups: the finished stays by length bucket (sf_stay_bucket) in place of percentiles. */
export interface RolledFunnelRow extends FunnelRow {
  buckets: number[];
  bucket_stays: number[];
}

export interface SnapshotRow {
  stage_id: number;
  count: number;
  value: string;
  weighted: string;
}

/** `$n::int IS NULL OR d.owner_id = $n` and the same for the company: the filters at parameters $a and $b. */
const filters = (a: number, b: number) => `($${a}::int IS NULL OR d.owner_id = $${a}) AND ($${b}::int IS NULL OR d.company_id = $${b})`;
/** The pipeline's stages as a relation (ids, probabilities, positions, types at $a..$a+3). */
const stagesRelation = (a: number) => `unnest($${a}::int[], $${a + 1}::int[], $${a + 2}::int[], $${a + 3}::text[]) AS s(id, probability, position, type)`;
/**
 * The stages (st) and, per stage, the ids of the non-lost stages after it and of the won stages
 * (stage_sets): "reached a later stage" and "reached won" are overlaps of a row's later stages with these.
 */
const funnelStages = (a: number) => `WITH st AS (SELECT * FROM ${stagesRelation(a)}),
       stage_sets AS (
         SELECT s.id, s.type, s.position,
                ARRAY(SELECT n.id FROM st n WHERE n.type <> 'lost' AND n.position > s.position) AS after_ids,
                ARRAY(SELECT n.id FROM st n WHERE n.type = 'won') AS won_ids
         FROM st s)`;

/**
 * A window cut at UTC midnights: [from, firstDay) and [endDay, to) are read from the ledger, the
 * whole days [firstDay, endDay) from the rollups. When no whole day fits, firstDay = endDay = to.
 */
export interface DayWindow {
  from: Date;
  to: Date;
  firstDay: Date;
  endDay: Date;
}

const DAY_MS = 86_400_000;

/** Cuts [from, to) at the UTC midnights inside it. */
export function dayWindow(from: Date, to: Date): DayWindow {
  const firstDay = Math.ceil(from.getTime() / DAY_MS) * DAY_MS;
  const endDay = Math.floor(to.getTime() / DAY_MS) * DAY_MS;
  if (firstDay >= endDay) return { from, to, firstDay: to, endDay: to };
  return { from, to, firstDay: new Date(firstDay), endDay: new Date(endDay) };
}

/** The day after a YYYY-MM-DD date. */
const nextDay = (date: string) => new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);

/**
 * The whole months inside [from, to] (dates): [firstMonth, endMonth) as first days of months; the
 * days [from, firstMonth) and [endMonth, to] are read from deals. No whole month: both are to's next day.
 */
export function monthWindow(from: string, to: string): { firstMonth: string; endMonth: string } {
  const first = new Date(`${from.slice(0, 7)}-01T00:00:00Z`);
  if (from.slice(8) !== '01') first.setUTCMonth(first.getUTCMonth() + 1);
  const end = new Date(`${nextDay(to).slice(0, 7)}-01T00:00:00Z`);
  if (first.getTime() >= end.getTime()) return { firstMonth: nextDay(to), endMonth: nextDay(to) };
  return { firstMonth: first.toISOString().slice(0, 10), endMonth: end.toISOString().slice(0, 10) };
}

const stageParams = (stages: readonly ReportStage[]) => [
  stages.map((s) => s.id),
  stages.map((s) => s.probability),
  stages.map((s) => s.position),
  stages.map((s) => s.type),
];

/**
 * The pipeline reports' SQL over deals and the stage ledger (deal_stage_changes). Indexes: the
 * forecast reads deals_forecast_idx; the funnel deal_stage_changes_pipeline_at_idx then each
 * deal's rows by deal_stage_changes_deal_idx; the snapshot deal_stage_totals less
 * deals_pipeline_entered_idx for deals that stayed put since asOf, and deals_entered_stage_idx + the
 * deal index for those that moved since.
 */
@Injectable()
export class DealReportsRepository {
  constructor(private readonly transactions: Transactions) {}

  /**
   * Open deals of the pipeline by expected close date in [from, to], grouped by month (YYYY-MM) or
   * owner id. The whole months of the window come from deal_forecast_months (unless filtered by
   * company), the days before and after them from an index-only scan of deals_forecast_idx grouped
   * by (close date or owner, stage) with plain sums. Weighted = round(Σ value × probability / 100, 2),
   * exact: Σ value × own probability plus Σ value (deals without one) × the stage's current probability.
   */
  forecast(pipelineId: number, stages: readonly ReportStage[], from: string, to: string, groupBy: 'month' | 'owner', f: ReportFilters): Promise<ForecastRow[]> {
    const m = f.companyId === null ? monthWindow(from, to) : { firstMonth: nextDay(to), endMonth: nextDay(to) };
    const [rowKey, monthKey, outer] =
      groupBy === 'month' ? ['d.expected_close_date', 'm.month', `to_char(g.k, 'YYYY-MM')`] : ['d.owner_id', 'NULLIF(m.owner_id, 0)', 'g.k::text'];
    // Open deals closing in [a, b), each range its own index-only scan.
    const days = (a: string, b: string) => `
         SELECT ${rowKey}, d.stage_id, count(*), sum(d.value), sum(d.value * d.probability), sum(d.value) FILTER (WHERE d.probability IS NULL)
         FROM deals d
         WHERE d.pipeline_id = $1 AND d.status = 'open' AND d.expected_close_date >= ${a} AND d.expected_close_date < ${b} AND ${filters(4, 5)}
         GROUP BY 1, 2`;
    return this.transactions.db.query<ForecastRow[]>(
      `WITH g AS (
         SELECT ${monthKey} AS k, m.stage_id, sum(m.deals) AS n, sum(m.value) AS value, sum(m.own_weighted) AS own, sum(m.stage_weighted_value) AS bare
         FROM deal_forecast_months m
         WHERE m.pipeline_id = $1 AND m.month >= $6::date AND m.month < $7::date AND ($4::int IS NULL OR m.owner_id = $4)
         GROUP BY 1, 2
         UNION ALL ${days('$2::date', '$6::date')}
         UNION ALL ${days('$7::date', '$3::date + 1')}
       )
       SELECT ${outer} AS key, sum(g.n)::int AS count, sum(g.value)::text AS value,
              round(sum(COALESCE(g.own, 0) + COALESCE(g.bare, 0) * s.probability) / 100.0, 2)::text AS weighted
       FROM g JOIN ${stagesRelation(8)} ON s.id = g.stage_id
       GROUP BY 1 ORDER BY 1 NULLS LAST`,
      [pipelineId, from, to, f.ownerId, f.companyId, m.firstMonth, m.endMonth, ...stageParams(stages)],
    );
  }

  /**
   * Per stage, the deals that entered it in [from, to) and what became of them afterwards (up to
   * now), exactly: distinct deals that entered; moved on (their next change went to a stage that is
   * not lost), lost (to a lost stage), reached a later stage or a won stage; median and p90 of the
   * finished stays. Each ledger row carries its deal's next row (left_at, next_stage_id) and later
   * stages (later_stage_ids), mapped here to the pipeline's current types and order.
   */
  funnelExact(pipelineId: number, stages: readonly ReportStage[], from: Date, to: Date, f: ReportFilters): Promise<FunnelRow[]> {
    const filtered = f.ownerId !== null || f.companyId !== null;
    return this.transactions.db.query<FunnelRow[]>(
      `${funnelStages(6)}
       SELECT l.to_stage_id AS stage_id,
              count(DISTINCT l.deal_id)::int AS entered,
              (count(DISTINCT l.deal_id) FILTER (WHERE l.left_at IS NOT NULL AND nx.type IS DISTINCT FROM 'lost'))::int AS moved_on,
              (count(DISTINCT l.deal_id) FILTER (WHERE nx.type = 'lost'))::int AS lost,
              (count(DISTINCT l.deal_id) FILTER (WHERE l.later_stage_ids && s.after_ids OR l.later_stage_ids && s.won_ids))::int AS reached_next,
              (count(DISTINCT l.deal_id) FILTER (WHERE s.type = 'won' OR l.later_stage_ids && s.won_ids))::int AS reached_won,
              (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM l.left_at - l.at)) FILTER (WHERE l.left_at IS NOT NULL))::float8 AS median_seconds,
              (percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM l.left_at - l.at)) FILTER (WHERE l.left_at IS NOT NULL))::float8 AS p90_seconds
       FROM deal_stage_changes l
       JOIN stage_sets s ON s.id = l.to_stage_id
       LEFT JOIN st nx ON nx.id = l.next_stage_id
       ${filtered ? `JOIN deals d ON d.id = l.deal_id AND ${filters(4, 5)}` : ''}
       WHERE l.pipeline_id = $1 AND l.at >= $2 AND l.at < $3 ${filtered ? '' : 'AND $4::int IS NULL AND $5::int IS NULL'}
       GROUP BY l.to_stage_id`,
      [pipelineId, from, to, f.ownerId, f.companyId, ...stageParams(stages)],
    );
  }

  /**
   * The funnel of a window, unfiltered, from the rollups: deal_funnel_days and deal_stay_buckets for
   * the whole UTC days in [from, to) plus the ledger rows of the partial days at its ends (read
   * once). Counts are of entries (a deal that entered a stage twice in the window counts twice);
   * per stage, the finished stays by length bucket (sf_stay_bucket) instead of percentiles.
   */
  funnelFromRollups(pipelineId: number, stages: readonly ReportStage[], w: DayWindow): Promise<RolledFunnelRow[]> {
    const days = (alias: string) =>
      `${alias}.pipeline_id = $1 AND ${alias}.day >= ($4::timestamptz AT TIME ZONE 'UTC')::date AND ${alias}.day < ($5::timestamptz AT TIME ZONE 'UTC')::date`;
    return this.transactions.db.query<RolledFunnelRow[]>(
      `${funnelStages(6)}, part AS MATERIALIZED (
         SELECT l.to_stage_id, l.next_stage_id, l.later_stage_ids, l.at, l.left_at FROM deal_stage_changes l
         WHERE l.pipeline_id = $1 AND ((l.at >= $2 AND l.at < $4) OR (l.at >= $5 AND l.at < $3))
       ), r AS (
         SELECT f.stage_id, f.next_stage_id, f.later_stage_ids, sum(f.entries) AS n FROM deal_funnel_days f WHERE ${days('f')} GROUP BY 1, 2, 3
         UNION ALL
         SELECT p.to_stage_id, COALESCE(p.next_stage_id, 0), p.later_stage_ids, count(*) FROM part p GROUP BY 1, 2, 3
       ), b AS (
         SELECT x.stage_id, x.bucket, sum(x.n) AS n FROM (
           SELECT k.stage_id, k.bucket, sum(k.stays) AS n FROM deal_stay_buckets k WHERE ${days('k')} GROUP BY 1, 2
           UNION ALL
           SELECT p.to_stage_id, sf_stay_bucket(extract(epoch FROM p.left_at - p.at)::float8), count(*) FROM part p WHERE p.left_at IS NOT NULL GROUP BY 1, 2
         ) x GROUP BY 1, 2
       ), c AS (
         SELECT r.stage_id,
                sum(r.n)::int AS entered,
                (sum(r.n) FILTER (WHERE r.next_stage_id <> 0 AND nx.type IS DISTINCT FROM 'lost'))::int AS moved_on,
                (sum(r.n) FILTER (WHERE nx.type = 'lost'))::int AS lost,
                (sum(r.n) FILTER (WHERE r.later_stage_ids && s.after_ids OR r.later_stage_ids && s.won_ids))::int AS reached_next,
                (sum(r.n) FILTER (WHERE s.type = 'won' OR r.later_stage_ids && s.won_ids))::int AS reached_won
         FROM r JOIN stage_sets s ON s.id = r.stage_id LEFT JOIN st nx ON nx.id = r.next_stage_id
         GROUP BY r.stage_id
       )
       SELECT c.*, NULL::float8 AS median_seconds, NULL::float8 AS p90_seconds,
              ARRAY(SELECT b.bucket FROM b WHERE b.stage_id = c.stage_id ORDER BY b.bucket) AS buckets,
              ARRAY(SELECT b.n::float8 FROM b WHERE b.stage_id = c.stage_id ORDER BY b.bucket) AS bucket_stays
       FROM c`,
      [pipelineId, w.from, w.to, w.firstDay, w.endDay, ...stageParams(stages)],
    );
  }

  /**
   * Per stage, the deals as they stood at `asOf`: a deal still in the stage it was in then counts
   * with its current value and probability; one that changed stage since counts in the stage of its
   * last ledger row at or before asOf, with the value and probability recorded there. A deal with no
   * row by then (created later) is absent.
   *
   * The deals that stayed are the pipeline's totals (deal_stage_totals, kept by triggers on deals)
   * minus the deals that entered their stage after asOf (deals_pipeline_entered_idx); those are then
   * placed from the ledger (deal_stage_changes_deal_idx). Own-probability and stage-probability
   * weights are summed apart, the stage's applied per group: the same exact numbers as per deal.
   */
  snapshot(pipelineId: number, stages: readonly ReportStage[], asOf: Date, f: ReportFilters): Promise<SnapshotRow[]> {
    const filtered = f.ownerId !== null || f.companyId !== null;
    // Filtered (by the deal's current owner or company): each deal that entered its stage after asOf, placed by its last row by then.
    const movedProbed = `
         SELECT l.to_stage_id AS stage_id, count(*) AS n, sum(l.value) AS value, sum(l.value * l.probability) AS own, 0 AS bare
         FROM deals d
         CROSS JOIN LATERAL (
           SELECT x.pipeline_id, x.to_stage_id, x.value, x.probability FROM deal_stage_changes x
           WHERE x.deal_id = d.id AND x.at <= $2 ORDER BY x.at DESC, x.id DESC LIMIT 1
         ) l
         WHERE d.entered_stage_at > $2 AND l.pipeline_id = $1 AND ${filters(3, 4)}
         GROUP BY l.to_stage_id`;
    // Unfiltered: the finished stays spanning asOf (at <= asOf < left_at) = those ended after asOf less those begun after it:
    // the days after asOf's from deal_snapshot_days, asOf's own day (up to midnight, $9) from the ledger.
    const movedFromDays = `
         SELECT m.stage_id, sum(CASE m.edge WHEN 1 THEN m.stays ELSE -m.stays END), sum(CASE m.edge WHEN 1 THEN m.value ELSE -m.value END),
                sum(CASE m.edge WHEN 1 THEN m.own_weighted ELSE -m.own_weighted END), 0
         FROM deal_snapshot_days m
         WHERE m.pipeline_id = $1 AND m.day > ($2::timestamptz AT TIME ZONE 'UTC')::date AND $3::int IS NULL AND $4::int IS NULL
         GROUP BY m.stage_id
         UNION ALL
         SELECT l.to_stage_id, count(*), sum(l.value), sum(l.value * l.probability), 0 FROM deal_stage_changes l
         WHERE l.pipeline_id = $1 AND l.left_at IS NOT NULL AND l.left_at > $2 AND l.left_at < $9
         GROUP BY l.to_stage_id
         UNION ALL
         SELECT l.to_stage_id, -count(*), -sum(l.value), -sum(l.value * l.probability), 0 FROM deal_stage_changes l
         WHERE l.pipeline_id = $1 AND l.at > $2 AND l.at < $9 AND l.left_at IS NOT NULL
         GROUP BY l.to_stage_id`;
    return this.transactions.db.query<SnapshotRow[]>(
      `WITH totals AS (
         SELECT t.stage_id, sum(t.deals) AS n, sum(t.value) AS value, sum(t.own_weighted) AS own, sum(t.stage_weighted_value) AS bare
         FROM deal_stage_totals t
         WHERE t.pipeline_id = $1 AND ($3::int IS NULL OR t.owner_id = $3) AND ($4::int IS NULL OR t.company_id = $4)
         GROUP BY t.stage_id
       ), since AS (
         SELECT d.stage_id, -count(*) AS n, -sum(d.value) AS value, -sum(d.value * d.probability) AS own,
                -sum(d.value) FILTER (WHERE d.probability IS NULL) AS bare
         FROM deals d
         WHERE d.pipeline_id = $1 AND d.entered_stage_at > $2 AND ${filters(3, 4)}
         GROUP BY d.stage_id
       ), moved AS (${filtered ? movedProbed : movedFromDays}
       )
       SELECT x.stage_id, sum(x.n)::int AS count, sum(x.value)::text AS value,
              round(sum(COALESCE(x.own, 0) + COALESCE(x.bare, 0) * s.probability) / 100.0, 2)::text AS weighted
       FROM (SELECT * FROM totals UNION ALL SELECT * FROM since UNION ALL SELECT * FROM moved) x
       JOIN ${stagesRelation(5)} ON s.id = x.stage_id
       GROUP BY x.stage_id`,
      [pipelineId, asOf, f.ownerId, f.companyId, ...stageParams(stages), ...(filtered ? [] : [new Date((Math.floor(asOf.getTime() / DAY_MS) + 1) * DAY_MS)])],
    );
  }
}
