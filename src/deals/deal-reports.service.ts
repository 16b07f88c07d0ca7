import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { isCalendarDate, iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { fieldError } from '../common/errors.js';
import { type DealStage, PipelinesService } from '../pipelines/pipelines.service.js';
import { DealReportsRepository, type FunnelRow, type ReportFilters, type ReportStage, dayWindow } from './deal-reports.repository.js';

/** The longest window a report takes: five years (a window over it is a 400). */
export const MAX_WINDOW_MS = 5 * 365.25 * 86_400_000;
const DAY_MS = 86_400_000;
/**
 * An unfiltered funnel whose window holds at most this many ledger rows (counted from the rollups)
 * is computed exactly from the rows; above it, it answers from the daily rollups (README
 * "Pipelines": counts of entries, percentiles from length buckets within 4.9%).
 */
export const FUNNEL_EXACT_ROWS = 20_000;
/** Length buckets of the stays (sf_stay_bucket): [1.1^b, 1.1^(b+1)) seconds, -1 for under a second. */
const BUCKET_RATIO = 1.1;

type Query = Record<string, unknown>;

/** 400 naming the first query parameter that is not one of `allowed`. */
function onlyParameters(query: Query, allowed: readonly string[]): void {
  const unknown = Object.keys(query).find((k) => !allowed.includes(k));
  if (unknown !== undefined) throw fieldError(unknown, `is not a parameter of this report (it takes ${allowed.join(', ')})`);
}

function text(query: Query, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v === '') throw fieldError(name, 'must be given once, not empty');
  return v;
}

function idParam(query: Query, name: string): number | null {
  const v = text(query, name);
  if (v === undefined) return null;
  if (!/^[1-9]\d{0,9}$/.test(v) || Number(v) > 2147483647) throw fieldError(name, 'must be an id (a whole number from 1 to 2147483647)');
  return Number(v);
}

/** An instant: ISO 8601 with an offset, or a calendar date (its midnight UTC). */
function instantParam(query: Query, name: string): Date | undefined {
  const v = text(query, name);
  if (v === undefined) return undefined;
  const d = isCalendarDate(v) ? new Date(`${v}T00:00:00Z`) : parseIsoWithOffset(v);
  if (!d) throw fieldError(name, 'must be an ISO 8601 date-time with an offset (e.g. 2026-03-01T00:00:00Z) or a date YYYY-MM-DD');
  return d;
}

function dateParam(query: Query, name: string): string | undefined {
  const v = text(query, name);
  if (v !== undefined && !isCalendarDate(v)) throw fieldError(name, 'must be a date written YYYY-MM-DD, e.g. 2026-11-21');
  return v;
}

function windowCheck(fromMs: number, toMs: number): void {
  if (fromMs > toMs) throw fieldError('from', 'must not be after to');
  if (toMs - fromMs > MAX_WINDOW_MS) throw fieldError('to', 'the window from..to must not exceed 5 years');
}

const money = (v: string | null | undefined) => Number(v ?? 0);
const ratio = (n: number, d: number) => (d === 0 ? null : Math.round((n / d) * 10_000) / 10_000);
const reportStages = (stages: DealStage[]): ReportStage[] => stages.map((s, i) => ({ id: s.id, probability: s.probability, position: i, type: s.type }));
const stageOut = (s: DealStage, order: number) => ({ stageId: s.id, name: s.name, type: s.type, order });

/**
 * The pipeline reports (README "Pipelines"): the forecast of open deals, the funnel from the
 * ledger, and the pipeline as it stood at an instant. "Now" is the injected clock's.
 */
@Injectable()
export class DealReportsService {
  constructor(
    private readonly reports: DealReportsRepository,
    private readonly pipelines: PipelinesService,
    private readonly clock: Clock,
  ) {}

  /** FUNNEL_EXACT_ROWS (a spec lowers it to read a small data set through the rollups). */
  funnelExactRows = FUNNEL_EXACT_ROWS;

  private filters(query: Query): ReportFilters {
    return { ownerId: idParam(query, 'ownerId'), companyId: idParam(query, 'companyId') };
  }

  /** Open deals by expected close date in [from, to] (default: this month and the eleven after it), by month or by owner. */
  async forecast(pipelineId: number, query: Query) {
    onlyParameters(query, ['from', 'to', 'groupBy', 'ownerId', 'companyId']);
    const groupBy = text(query, 'groupBy') ?? 'month';
    if (groupBy !== 'month' && groupBy !== 'owner') throw fieldError('groupBy', 'must be month or owner');
    const now = this.clock.now();
    const from = dateParam(query, 'from') ?? `${now.toISOString().slice(0, 7)}-01`;
    const to = dateParam(query, 'to') ?? lastDayOfYearAfter(from);
    windowCheck(Date.parse(from), Date.parse(to));
    const f = this.filters(query);
    const stages = await this.pipelines.stagesForReport(pipelineId);
    const rows = await this.reports.forecast(pipelineId, reportStages(stages), from, to, groupBy, f);
    const groups = rows.map((r) => ({
      ...(groupBy === 'month' ? { month: r.key } : { ownerId: r.key === null ? null : Number(r.key) }),
      count: r.count,
      value: money(r.value),
      weightedValue: money(r.weighted),
    }));
    const totals = {
      count: groups.reduce((n, g) => n + g.count, 0),
      value: round2(groups.reduce((n, g) => n + g.value, 0)),
      weightedValue: round2(groups.reduce((n, g) => n + g.weightedValue, 0)),
    };
    return { forecast: { pipelineId, from, to, groupBy, ownerId: f.ownerId, companyId: f.companyId, groups, totals } };
  }

  /** Per stage of the pipeline, the deals that entered it in [from, to) (default: the 90 days up to now) and what became of them. */
  async funnel(pipelineId: number, query: Query) {
    onlyParameters(query, ['from', 'to', 'ownerId', 'companyId']);
    const to = instantParam(query, 'to') ?? this.clock.now();
    const from = instantParam(query, 'from') ?? new Date(to.getTime() - 90 * DAY_MS);
    windowCheck(from.getTime(), to.getTime());
    const f = this.filters(query);
    const stages = await this.pipelines.stagesForReport(pipelineId);
    const { rows: found, exact } = await this.funnelRows(pipelineId, reportStages(stages), from, to, f);
    const rows = new Map(found.map((r) => [r.stage_id, r]));
    return {
      funnel: {
        pipelineId,
        from: isoRequired(from),
        to: isoRequired(to),
        ownerId: f.ownerId,
        companyId: f.companyId,
        exact,
        stages: stages.map((s, i) => {
          const r = rows.get(s.id);
          const entered = r?.entered ?? 0;
          return {
            ...stageOut(s, i),
            entered,
            movedOn: r?.moved_on ?? 0,
            lost: r?.lost ?? 0,
            conversionToNext: s.type === 'open' ? ratio(r?.reached_next ?? 0, entered) : null,
            conversionToWon: ratio(r?.reached_won ?? 0, entered),
            medianSecondsInStage: r?.median_seconds ?? null,
            p90SecondsInStage: r?.p90_seconds ?? null,
          };
        }),
      },
    };
  }

  /**
   * The funnel's rows: exact (distinct deals, exact percentiles) when filtered or when the window
   * holds few ledger rows; otherwise from the daily rollups, with percentiles from the stays' length buckets.
   */
  private async funnelRows(pipelineId: number, stages: ReportStage[], from: Date, to: Date, f: ReportFilters): Promise<{ rows: FunnelRow[]; exact: boolean }> {
    const exact = async () => ({ rows: await this.reports.funnelExact(pipelineId, stages, from, to, f), exact: true });
    if (f.ownerId !== null || f.companyId !== null) return exact();
    const rows = await this.reports.funnelFromRollups(pipelineId, stages, dayWindow(from, to));
    if (rows.reduce((n, r) => n + r.entered, 0) <= this.funnelExactRows) return exact();
    for (const r of rows) {
      const stays = r.buckets.map((bucket, i) => ({ bucket, n: r.bucket_stays[i] }));
      r.median_seconds = bucketPercentile(stays, 0.5);
      r.p90_seconds = bucketPercentile(stays, 0.9);
    }
    return { rows, exact: false };
  }

  /** Per stage, the deals, value and weighted value as they stood at `asOf` (default now; in the future: 400). */
  async snapshot(pipelineId: number, query: Query) {
    onlyParameters(query, ['asOf', 'ownerId', 'companyId']);
    const now = this.clock.now();
    const asOf = instantParam(query, 'asOf') ?? now;
    if (asOf.getTime() > now.getTime()) throw fieldError('asOf', `must not be in the future (now is ${iso(now)})`);
    const f = this.filters(query);
    const stages = await this.pipelines.stagesForReport(pipelineId);
    const rows = new Map((await this.reports.snapshot(pipelineId, reportStages(stages), asOf, f)).map((r) => [r.stage_id, r]));
    const out = stages.map((s, i) => {
      const r = rows.get(s.id);
      return { ...stageOut(s, i), count: r?.count ?? 0, value: money(r?.value), weightedValue: money(r?.weighted) };
    });
    const totals = {
      count: out.reduce((n, s) => n + s.count, 0),
      value: round2(out.reduce((n, s) => n + s.value, 0)),
      weightedValue: round2(out.reduce((n, s) => n + s.weightedValue, 0)),
    };
    return { snapshot: { pipelineId, asOf: isoRequired(asOf), ownerId: f.ownerId, companyId: f.companyId, stages: out, totals } };
  }
}

const round2 = (n: number) => Math.round(n * 100) / 100;

/** The last day of the twelve months starting at `from`'s month. */
function lastDayOfYearAfter(from: string): string {
  const d = new Date(`${from.slice(0, 7)}-01T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + 12);
  return new Date(d.getTime() - DAY_MS).toISOString().slice(0, 10);
}

/** A stay length standing for its bucket: the geometric middle (within 4.9% of any length in it); 0.5 s for stays under a second. */
const bucketLength = (bucket: number) => (bucket < 0 ? 0.5 : Math.round(BUCKET_RATIO ** (bucket + 0.5) * 1000) / 1000);

/**
 * percentile_cont over stays given as (bucket, count) in bucket order: the order statistics either
 * side of rank p × (n − 1), each taken as its bucket's length, interpolated as percentile_cont does.
 */
export function bucketPercentile(stays: readonly { bucket: number; n: number }[], p: number): number | null {
  const total = stays.reduce((n, s) => n + s.n, 0);
  if (total === 0) return null;
  const rank = p * (total - 1);
  const at = (k: number) => {
    let seen = 0;
    for (const s of stays) {
      seen += s.n;
      if (k < seen) return bucketLength(s.bucket);
    }
    return bucketLength(stays[stays.length - 1].bucket);
  };
  const lo = at(Math.floor(rank));
  const hi = at(Math.ceil(rank));
  return lo + (rank - Math.floor(rank)) * (hi - lo);
}
