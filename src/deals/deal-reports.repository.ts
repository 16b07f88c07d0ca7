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
const stageParams = (stages: readonly ReportStage[]) => [
  stages.map((s) => s.id),
  stages.map((s) => s.probability),
  stages.map((s) => s.position),
  stages.map((s) => s.type),
];

/**
 * The pipeline reports' SQL over deals and the stage ledger (deal_stage_changes). Indexes: the
 * forecast reads deals_forecast_idx; the funnel deal_stage_changes_pipeline_at_idx then each
 * deal's rows by deal_stage_changes_deal_idx; the snapshot deals_pipeline_entered_idx for deals that
 * stayed put since asOf and deals_entered_stage_idx + the deal index for those that moved since.
 */
@Injectable()
export class DealReportsRepository {
  constructor(private readonly transactions: Transactions) {}

  /** Open deals of the pipeline by expected close date in [from, to], grouped by month (YYYY-MM) or owner id. */
  forecast(pipelineId: number, stages: readonly ReportStage[], from: string, to: string, groupBy: 'month' | 'owner', f: ReportFilters): Promise<ForecastRow[]> {
    const key = groupBy === 'month' ? `to_char(d.expected_close_date, 'YYYY-MM')` : `d.owner_id::text`;
    return this.transactions.db.query<ForecastRow[]>(
      `SELECT ${key} AS key, count(*)::int AS count, sum(d.value)::text AS value,
              round(sum(d.value * COALESCE(d.probability, s.probability) / 100.0), 2)::text AS weighted
       FROM deals d JOIN ${stagesRelation(6)} ON s.id = d.stage_id
       WHERE d.pipeline_id = $1 AND d.status = 'open' AND d.expected_close_date BETWEEN $2::date AND $3::date AND ${filters(4, 5)}
       GROUP BY 1 ORDER BY 1 NULLS LAST`,
      [pipelineId, from, to, f.ownerId, f.companyId, ...stageParams(stages)],
    );
  }

  /**
   * Per stage, the deals that entered it in [from, to) and what became of them afterwards (up to
   * now): moved on (their next change went to a stage that is not lost), lost (to a lost stage),
   * reached a later stage or a won stage, and the time of each finished stay.
   */
  funnel(pipelineId: number, stages: readonly ReportStage[], from: Date, to: Date, f: ReportFilters): Promise<FunnelRow[]> {
    return this.transactions.db.query<FunnelRow[]>(
      `WITH touched AS (
         SELECT DISTINCT deal_id FROM deal_stage_changes WHERE pipeline_id = $1 AND at >= $2 AND at < $3
       ), rows AS (
         SELECT l.deal_id, l.id, l.pipeline_id, l.to_stage_id, l.at, s.position, s.type
         FROM touched t JOIN deals d ON d.id = t.deal_id
         JOIN deal_stage_changes l ON l.deal_id = t.deal_id
         LEFT JOIN ${stagesRelation(6)} ON s.id = l.to_stage_id AND l.pipeline_id = $1
         WHERE ${filters(4, 5)}
       ), seq AS (
         SELECT r.*, lead(r.at) OVER w AS next_at, lead(r.type) OVER w AS next_type,
                max(CASE WHEN r.type <> 'lost' THEN r.position END) OVER later AS later_position,
                COALESCE(bool_or(r.type = 'won') OVER later, false) AS later_won
         FROM rows r
         WINDOW w AS (PARTITION BY r.deal_id ORDER BY r.at, r.id),
                later AS (PARTITION BY r.deal_id ORDER BY r.at, r.id ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
       )
       SELECT to_stage_id AS stage_id,
              count(DISTINCT deal_id)::int AS entered,
              (count(DISTINCT deal_id) FILTER (WHERE next_at IS NOT NULL AND next_type IS DISTINCT FROM 'lost'))::int AS moved_on,
              (count(DISTINCT deal_id) FILTER (WHERE next_type = 'lost'))::int AS lost,
              (count(DISTINCT deal_id) FILTER (WHERE later_won OR later_position > position))::int AS reached_next,
              (count(DISTINCT deal_id) FILTER (WHERE later_won OR type = 'won'))::int AS reached_won,
              (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM next_at - at)) FILTER (WHERE next_at IS NOT NULL))::float8 AS median_seconds,
              (percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM next_at - at)) FILTER (WHERE next_at IS NOT NULL))::float8 AS p90_seconds
       FROM seq WHERE type IS NOT NULL AND at >= $2 AND at < $3
       GROUP BY to_stage_id`,
      [pipelineId, from, to, f.ownerId, f.companyId, ...stageParams(stages)],
    );
  }

  /**
   * Per stage, the deals as they stood at `asOf`: a deal still in the stage it was in then counts
   * with its current value and probability; one that changed stage since counts in the stage of its
   * last ledger row at or before asOf, with the value and probability recorded there. A deal with no
   * row by then (created later) is absent.
   */
  snapshot(pipelineId: number, stages: readonly ReportStage[], asOf: Date, f: ReportFilters): Promise<SnapshotRow[]> {
    return this.transactions.db.query<SnapshotRow[]>(
      `WITH stayed AS (
         SELECT d.stage_id, d.value, COALESCE(d.probability, s.probability) AS probability
         FROM deals d JOIN ${stagesRelation(5)} ON s.id = d.stage_id
         WHERE d.pipeline_id = $1 AND d.entered_stage_at <= $2 AND ${filters(3, 4)}
       ), moved AS (
         SELECT l.to_stage_id AS stage_id, l.value, l.probability
         FROM deals d
         CROSS JOIN LATERAL (
           SELECT x.pipeline_id, x.to_stage_id, x.value, x.probability FROM deal_stage_changes x
           WHERE x.deal_id = d.id AND x.at <= $2 ORDER BY x.at DESC, x.id DESC LIMIT 1
         ) l
         WHERE d.entered_stage_at > $2 AND l.pipeline_id = $1 AND ${filters(3, 4)}
       )
       SELECT stage_id, count(*)::int AS count, sum(value)::text AS value, round(sum(value * probability / 100.0), 2)::text AS weighted
       FROM (SELECT * FROM stayed UNION ALL SELECT * FROM moved) x
       GROUP BY stage_id`,
      [pipelineId, asOf, f.ownerId, f.companyId, ...stageParams(stages)],
    );
  }
}
