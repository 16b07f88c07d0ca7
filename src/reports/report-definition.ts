/**
 * What a report is, as plain logic (unit-tested in report-definition.spec.ts): types, columns,
 * filters and their validation, date ranges, schedules, and the SQL each type runs. All
 * aggregation happens in PostgreSQL; nothing here loops over deals.
 */
import type { ErrorDetail } from '../common/errors.js';
import { nextCronTime } from '../jobs/cron.js';

export const REPORT_TYPES = ['sales', 'marketing'] as const;
export type ReportType = (typeof REPORT_TYPES)[number];

export const REPORT_SCHEDULES = ['daily', 'weekly', 'monthly'] as const;
export type ReportSchedule = (typeof REPORT_SCHEDULES)[number];

/**
 * Columns a report may show, per type, in their output order.
 * - sales: date (close day, UTC, YYYY-MM-DD), product, salesperson (the deal owner's name),
 *   revenue (sum of value), quantity (sum of quantity). Rows are grouped by the dimension columns
 *   the report shows (date, product, salesperson); without any, one row holds the totals.
 * - marketing: one row per campaign: campaignId, campaign (name), members, messages (all text
 *   messages of the campaign), and the text messages by status: draft, queued, sent, delivered, failed.
 */
export const REPORT_COLUMNS: Record<ReportType, readonly string[]> = {
  sales: ['date', 'product', 'salesperson', 'revenue', 'quantity'],
  marketing: ['campaignId', 'campaign', 'members', 'messages', 'draft', 'queued', 'sent', 'delivered', 'failed'],
};

/** Filters each type accepts. */
export const REPORT_FILTERS: Record<ReportType, readonly string[]> = {
  sales: ['dateRange', 'salesTeam', 'products'],
  marketing: ['dateRange'],
};

export const DATE_RANGES = ['today', 'last_7_days', 'last_30_days', 'this_month', 'last_month', 'this_year'] as const;
const CUSTOM_RANGE = /^(\d{4})-(\d{2})-(\d{2})\.\.(\d{4})-(\d{2})-(\d{2})$/;

export interface ReportFilters {
  dateRange?: string;
  salesTeam?: string;
  products?: string[];
}

/** Most rows a result keeps; the summary still covers every matching record. */
export const MAX_RESULT_ROWS = 50_000;

function utcDate(y: number, m: number, d: number): Date | null {
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d ? date : null;
}

/**
 * A dateRange as a half-open interval [from, to) of UTC instants, relative to `now`. Days are UTC
 * days; "last_7_days" and "last_30_days" include today; a custom range includes both end days.
 * Null for an invalid value.
 */
/** The interval of a dateRange that validateFilters() already accepted. */
function knownDateRange(range: string, now: Date): { from: Date; to: Date } {
  const interval = dateRangeInterval(range, now);
  if (!interval) throw new Error(`unknown dateRange ${range} reached the report query`);
  return interval;
}

export function dateRangeInterval(range: string, now: Date): { from: Date; to: Date } | null {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  const day = (offset: number) => new Date(Date.UTC(y, m, d + offset));
  switch (range) {
    case 'today':
      return { from: day(0), to: day(1) };
    case 'last_7_days':
      return { from: day(-6), to: day(1) };
    case 'last_30_days':
      return { from: day(-29), to: day(1) };
    case 'this_month':
      return { from: new Date(Date.UTC(y, m, 1)), to: new Date(Date.UTC(y, m + 1, 1)) };
    case 'last_month':
      return { from: new Date(Date.UTC(y, m - 1, 1)), to: new Date(Date.UTC(y, m, 1)) };
    case 'this_year':
      return { from: new Date(Date.UTC(y, 0, 1)), to: new Date(Date.UTC(y + 1, 0, 1)) };
  }
  const c = CUSTOM_RANGE.exec(range);
  if (!c) return null;
  const from = utcDate(+c[1], +c[2], +c[3]);
  const last = utcDate(+c[4], +c[5], +c[6]);
  if (!from || !last || last < from) return null;
  return { from, to: new Date(last.getTime() + 86_400_000) };
}

/** Problems with a report's filters for its type (empty when valid). */
export function validateFilters(type: ReportType, filters: unknown): ErrorDetail[] {
  const errors: ErrorDetail[] = [];
  if (filters === null || typeof filters !== 'object' || Array.isArray(filters)) {
    return [{ field: 'filters', message: 'must be an object' }];
  }
  const f = filters as Record<string, unknown>;
  for (const key of Object.keys(f)) {
    if (!REPORT_FILTERS.sales.includes(key)) {
      errors.push({ field: `filters.${key}`, message: `is not a known filter; allowed for ${type} reports: ${REPORT_FILTERS[type].join(', ')}` });
    } else if (!REPORT_FILTERS[type].includes(key)) {
      errors.push({ field: `filters.${key}`, message: `applies only to sales reports; allowed for ${type} reports: ${REPORT_FILTERS[type].join(', ')}` });
    }
  }
  if (f.dateRange !== undefined) {
    if (typeof f.dateRange !== 'string' || dateRangeInterval(f.dateRange, new Date()) === null) {
      errors.push({
        field: 'filters.dateRange',
        message: `must be one of ${DATE_RANGES.join(', ')}, or YYYY-MM-DD..YYYY-MM-DD with valid dates, the first not after the second`,
      });
    }
  }
  if (
    f.salesTeam !== undefined &&
    (typeof f.salesTeam !== 'string' || f.salesTeam.trim() === '' || f.salesTeam.length > 100 || f.salesTeam.includes('\u0000'))
  ) {
    errors.push({ field: 'filters.salesTeam', message: 'must be a non-empty string of at most 100 characters' });
  }
  if (f.products !== undefined) {
    const p = f.products;
    if (!Array.isArray(p) || p.length > 100 || p.some((x) => typeof x !== 'string' || x.trim() === '' || x.length > 200 || x.includes('\u0000'))) {
      errors.push({ field: 'filters.products', message: 'must be an array of at most 100 non-empty strings (at most 200 characters each)' });
    }
  }
  return errors;
}

/** Problems with a report's columns for its type (empty when valid). */
export function validateColumns(type: ReportType, columns: unknown): ErrorDetail[] {
  const allowed = REPORT_COLUMNS[type];
  if (!Array.isArray(columns) || columns.length === 0) {
    return [{ field: 'columns', message: `must be a non-empty array; allowed for ${type} reports: ${allowed.join(', ')}` }];
  }
  const errors: ErrorDetail[] = [];
  const seen = new Set<string>();
  for (const c of columns) {
    if (typeof c !== 'string' || !allowed.includes(c)) {
      errors.push({ field: 'columns', message: `${JSON.stringify(c)} is not a ${type} column; allowed: ${allowed.join(', ')}` });
    } else if (seen.has(c)) {
      errors.push({ field: 'columns', message: `${c} is listed twice` });
    }
    if (typeof c === 'string') seen.add(c);
  }
  return errors;
}

/** A row with only the given columns, in their order. */
export function projectRow(row: Record<string, unknown>, columns: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of columns) out[c] = row[c] ?? null;
  return out;
}

export type SchedulePatterns = Record<ReportSchedule, string>;

/**
 * The next time a report runs on its schedule, or null when it has none or is unpublished
 * (unpublished reports only run on demand). daily = every day 00:00 UTC, weekly = Mondays
 * 00:00 UTC, monthly = the 1st 00:00 UTC (the default patterns; see REPORT_SCHEDULE_*).
 */
export function nextRunAt(schedule: ReportSchedule | null, isPublished: boolean, patterns: SchedulePatterns, now: Date): Date | null {
  if (!schedule || !isPublished) return null;
  return nextCronTime(patterns[schedule], now);
}

export interface BuiltQuery {
  sql: string;
  params: unknown[];
}

const SALES_DIMENSIONS: Record<string, { group: string[]; select: string }> = {
  date: { group: [`(d.closed_at AT TIME ZONE 'UTC')::date`], select: `to_char((d.closed_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS "date"` },
  product: { group: ['d.product'], select: 'd.product AS "product"' },
  salesperson: { group: ['d.owner_id', 'u.name'], select: 'u.name AS "salesperson"' },
};

/**
 * Won deals, filtered by close time (dateRange), the owner's team (salesTeam) and product, grouped
 * by the dimension columns the report shows, with a grand-total row from the same scan
 * (GROUPING SETS). The partial index deals_won_closed_idx covers it (index-only where visible).
 */
export function buildSalesQuery(filters: ReportFilters, columns: readonly string[], now: Date): BuiltQuery {
  const params: unknown[] = [];
  const where = [`d.status = 'won'`];
  if (filters.dateRange) {
    const range = knownDateRange(filters.dateRange, now);
    params.push(range.from.toISOString(), range.to.toISOString());
    where.push(`d.closed_at >= $${params.length - 1}`, `d.closed_at < $${params.length}`);
  }
  if (filters.salesTeam) {
    params.push(filters.salesTeam);
    where.push(`u.team = $${params.length}`);
  }
  if (filters.products?.length) {
    params.push(filters.products);
    where.push(`d.product = ANY($${params.length}::text[])`);
  }
  const dims = (['date', 'product', 'salesperson'] as const).filter((c) => columns.includes(c));
  const needsUsers = !!filters.salesTeam || dims.includes('salesperson');
  const groupExprs = dims.flatMap((c) => SALES_DIMENSIONS[c].group);
  const selects = dims.map((c) => SALES_DIMENSIONS[c].select);
  const grouping = groupExprs.length ? `GROUPING SETS ((${groupExprs.join(', ')}), ())` : '()';
  const isTotal = groupExprs.length ? `(GROUPING(${groupExprs.join(', ')}) <> 0)` : 'true';
  const order = dims.map((c) => `"${c}" ASC NULLS LAST`);
  const sql = `
    SELECT ${[...selects, `round(coalesce(sum(d.value), 0), 2)::float8 AS "revenue"`, `coalesce(sum(d.quantity), 0)::float8 AS "quantity"`, `${isTotal} AS "__total"`].join(', ')}
    FROM deals d${needsUsers ? ' LEFT JOIN users u ON u.id = d.owner_id' : ''}
    WHERE ${where.join(' AND ')}
    GROUP BY ${grouping}
    ORDER BY "__total" DESC${order.length ? ', ' + order.join(', ') : ''}
    LIMIT ${MAX_RESULT_ROWS + 2}`;
  return { sql, params };
}

/**
 * One row per campaign: members (added within dateRange when given) and its text messages by
 * status (created within dateRange when given). Counted per campaign in SQL.
 */
export function buildMarketingQuery(filters: ReportFilters, now: Date): BuiltQuery {
  const params: unknown[] = [];
  let memberRange = '';
  let messageRange = '';
  if (filters.dateRange) {
    const range = knownDateRange(filters.dateRange, now);
    params.push(range.from.toISOString(), range.to.toISOString());
    memberRange = ` AND m.added_at >= $1 AND m.added_at < $2`;
    messageRange = ` AND t.created_at >= $1 AND t.created_at < $2`;
  }
  const sql = `
    SELECT c.id AS "campaignId", c.name AS "campaign",
           coalesce(mm.members, 0)::float8 AS "members",
           coalesce(tt.messages, 0)::float8 AS "messages",
           coalesce(tt.draft, 0)::float8 AS "draft", coalesce(tt.queued, 0)::float8 AS "queued",
           coalesce(tt.sent, 0)::float8 AS "sent", coalesce(tt.delivered, 0)::float8 AS "delivered",
           coalesce(tt.failed, 0)::float8 AS "failed"
    FROM campaigns c
    LEFT JOIN (SELECT m.campaign_id, count(*) AS members FROM campaign_members m WHERE true${memberRange} GROUP BY m.campaign_id) mm
      ON mm.campaign_id = c.id
    LEFT JOIN (
      SELECT t.campaign_id, count(*) AS messages,
             count(*) FILTER (WHERE t.status = 'draft') AS draft, count(*) FILTER (WHERE t.status = 'queued') AS queued,
             count(*) FILTER (WHERE t.status = 'sent') AS sent, count(*) FILTER (WHERE t.status = 'delivered') AS delivered,
             count(*) FILTER (WHERE t.status = 'failed') AS failed
      FROM text_messages t WHERE t.campaign_id IS NOT NULL${messageRange} GROUP BY t.campaign_id) tt
      ON tt.campaign_id = c.id
    ORDER BY c.name ASC, c.id ASC
    LIMIT ${MAX_RESULT_ROWS + 1}`;
  return { sql, params };
}

export interface ReportOutput {
  data: Record<string, unknown>[];
  summary: Record<string, unknown>;
}

/** Turns the sales query's rows into the stored result: projected rows and the totals. */
export function shapeSalesResult(rows: Record<string, unknown>[], columns: readonly string[]): ReportOutput {
  const totalRow = rows.find((r) => r.__total === true);
  const detail = rows.filter((r) => r.__total !== true);
  const hasDims = columns.some((c) => c === 'date' || c === 'product' || c === 'salesperson');
  const data = (hasDims ? detail : totalRow ? [totalRow] : [])
    .slice(0, MAX_RESULT_ROWS)
    .map((r) => projectRow({ ...r, revenue: Number(r.revenue ?? 0), quantity: Number(r.quantity ?? 0) }, columns));
  return {
    data,
    summary: {
      totalRevenue: Number(totalRow?.revenue ?? 0),
      totalQuantity: Number(totalRow?.quantity ?? 0),
      rowCount: data.length,
      truncated: detail.length > MAX_RESULT_ROWS,
    },
  };
}

/** Turns the marketing query's rows into the stored result: projected rows and totals over all campaigns. */
export function shapeMarketingResult(rows: Record<string, unknown>[], columns: readonly string[]): ReportOutput {
  const n = (r: Record<string, unknown>, k: string) => Number(r[k] ?? 0);
  const sum = (k: string) => rows.reduce((acc, r) => acc + n(r, k), 0);
  const kept = rows.slice(0, MAX_RESULT_ROWS);
  return {
    data: kept.map((r) => projectRow(Object.fromEntries(Object.entries(r).map(([k, v]) => [k, k === 'campaign' ? v : Number(v)])), columns)),
    summary: {
      totalCampaigns: kept.length,
      totalMembers: sum('members'),
      totalMessages: sum('messages'),
      messagesByStatus: { draft: sum('draft'), queued: sum('queued'), sent: sum('sent'), delivered: sum('delivered'), failed: sum('failed') },
      rowCount: kept.length,
      truncated: rows.length > MAX_RESULT_ROWS,
    },
  };
}
