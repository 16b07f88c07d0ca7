import { describe, expect, it } from '@jest/globals';
import {
  buildSalesQuery,
  dateRangeInterval,
  nextRunAt,
  projectRow,
  REPORT_COLUMNS,
  shapeSalesResult,
  validateColumns,
  validateFilters,
} from './report-definition.js';

const at = (s: string) => new Date(s);
const iv = (range: string, now: string) => {
  const r = dateRangeInterval(range, at(now));
  return r && [r.from.toISOString(), r.to.toISOString()];
};

describe('dateRangeInterval (UTC days, half-open)', () => {
  const now = '2026-03-15T13:45:00Z';
  it.each([
    ['today', ['2026-03-15T00:00:00.000Z', '2026-03-16T00:00:00.000Z']],
    ['last_7_days', ['2026-03-09T00:00:00.000Z', '2026-03-16T00:00:00.000Z']],
    ['last_30_days', ['2026-02-14T00:00:00.000Z', '2026-03-16T00:00:00.000Z']],
    ['this_month', ['2026-03-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z']],
    ['last_month', ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']],
    ['this_year', ['2026-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']],
    ['2024-02-01..2024-02-29', ['2024-02-01T00:00:00.000Z', '2024-03-01T00:00:00.000Z']],
    ['2024-05-05..2024-05-05', ['2024-05-05T00:00:00.000Z', '2024-05-06T00:00:00.000Z']],
  ])('%s', (range, expected) => {
    expect(iv(range, now)).toEqual(expected);
  });

  it('crosses year boundaries for last_month in January', () => {
    expect(iv('last_month', '2026-01-10T00:00:00Z')).toEqual(['2025-12-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
  });

  it.each(['yesterday', '', '2024-02-30..2024-03-01', '2024-03-02..2024-03-01', '2024-3-1..2024-3-2', '2024-01-01...2024-01-02', 'TODAY'])(
    'refuses %j',
    (range) => {
      expect(dateRangeInterval(range, at(now))).toBeNull();
    },
  );
});

describe('validateFilters', () => {
  it('accepts the documented filters per type', () => {
    expect(validateFilters('sales', { dateRange: 'today', salesTeam: 'east', products: ['A', 'B'] })).toEqual([]);
    expect(validateFilters('marketing', { dateRange: '2024-01-01..2024-01-31' })).toEqual([]);
    expect(validateFilters('sales', {})).toEqual([]);
  });
  it('names every problem', () => {
    const fields = (f: unknown, type: 'sales' | 'marketing' = 'sales') => validateFilters(type, f).map((e) => e.field);
    expect(fields({ dateRange: 'soon' })).toEqual(['filters.dateRange']);
    expect(fields({ salesTeam: '' })).toEqual(['filters.salesTeam']);
    expect(fields({ products: ['ok', 3] })).toEqual(['filters.products']);
    expect(fields({ products: 'A' })).toEqual(['filters.products']);
    expect(fields({ region: 'x' })).toEqual(['filters.region']);
    expect(fields({ products: ['A'] }, 'marketing')).toEqual(['filters.products']);
    expect(fields([])).toEqual(['filters']);
    expect(fields(null)).toEqual(['filters']);
  });
});

describe('validateColumns and projectRow', () => {
  it('allows each type its own columns, once each, at least one', () => {
    expect(validateColumns('sales', [...REPORT_COLUMNS.sales])).toEqual([]);
    expect(validateColumns('marketing', ['campaign', 'sent'])).toEqual([]);
    expect(validateColumns('sales', ['campaign'])).toHaveLength(1);
    expect(validateColumns('marketing', ['revenue'])).toHaveLength(1);
    expect(validateColumns('sales', ['date', 'date'])).toHaveLength(1);
    expect(validateColumns('sales', [])).toHaveLength(1);
    expect(validateColumns('sales', 'date')).toHaveLength(1);
  });
  it('keeps only the given columns, in their order', () => {
    expect(projectRow({ date: 'd', product: 'p', revenue: 1, quantity: 2, __total: false }, ['revenue', 'product'])).toEqual({ revenue: 1, product: 'p' });
    expect(Object.keys(projectRow({ a: 1 }, ['b', 'a']))).toEqual(['b', 'a']);
  });
});

describe('nextRunAt', () => {
  const patterns = { daily: '0 0 * * *', weekly: '0 0 * * 1', monthly: '0 0 1 * *' };
  const now = at('2026-03-18T10:00:00Z'); // a Wednesday
  it('is the next period start in UTC', () => {
    expect(nextRunAt('daily', true, patterns, now)?.toISOString()).toBe('2026-03-19T00:00:00.000Z');
    expect(nextRunAt('weekly', true, patterns, now)?.toISOString()).toBe('2026-03-23T00:00:00.000Z');
    expect(nextRunAt('monthly', true, patterns, now)?.toISOString()).toBe('2026-04-01T00:00:00.000Z');
    expect(nextRunAt('daily', true, patterns, at('2026-03-19T00:00:00Z'))?.toISOString()).toBe('2026-03-20T00:00:00.000Z');
  });
  it('is null without a schedule or while unpublished', () => {
    expect(nextRunAt(null, true, patterns, now)).toBeNull();
    expect(nextRunAt('daily', false, patterns, now)).toBeNull();
  });
  it('follows a seconds pattern (test override)', () => {
    expect(nextRunAt('daily', true, { ...patterns, daily: '*/2 * * * * *' }, at('2026-03-18T10:00:01.500Z'))?.toISOString()).toBe('2026-03-18T10:00:02.000Z');
  });
});

describe('sales query and result shape', () => {
  it('groups by the dimension columns shown and binds every filter as a parameter', () => {
    const q = buildSalesQuery({ dateRange: 'today', salesTeam: "o'brien", products: ['A'] }, ['product', 'revenue'], at('2026-03-18T10:00:00Z'));
    expect(q.params).toEqual(['2026-03-18T00:00:00.000Z', '2026-03-19T00:00:00.000Z', "o'brien", ['A']]);
    expect(q.sql).toContain('GROUPING SETS ((d.product), ())');
    expect(q.sql).not.toContain("o'brien");
    expect(q.sql).toContain("d.status = 'won'");
    const none = buildSalesQuery({}, ['revenue'], new Date());
    expect(none.sql).toContain('GROUP BY ()');
    expect(none.sql).not.toContain('JOIN users');
  });
  it('separates the total row and converts numbers', () => {
    const out = shapeSalesResult(
      [
        { product: null, revenue: 30.5, quantity: '4', __total: true },
        { product: 'A', revenue: 10, quantity: '1', __total: false },
        { product: 'B', revenue: 20.5, quantity: '3', __total: false },
      ],
      ['product', 'quantity'],
    );
    expect(out.data).toEqual([
      { product: 'A', quantity: 1 },
      { product: 'B', quantity: 3 },
    ]);
    expect(out.summary).toMatchObject({ totalRevenue: 30.5, totalQuantity: 4, truncated: false });
    expect(shapeSalesResult([{ revenue: 7, quantity: 2, __total: true }], ['revenue']).data).toEqual([{ revenue: 7 }]);
  });
});
