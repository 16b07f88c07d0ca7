import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { checkCreateStatus, checkDateOrder, rejectNulls } from './campaign.rules.js';

function errorOf(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error('expected an AppError');
}

describe('campaign rules', () => {
  const d = (s: string) => new Date(s);

  it('accepts dates in order, equal dates and open ends', () => {
    expect(() => checkDateOrder(d('2026-01-01T00:00:00Z'), d('2026-02-01T00:00:00Z'))).not.toThrow();
    expect(() => checkDateOrder(d('2026-01-01T00:00:00Z'), d('2026-01-01T00:00:00Z'))).not.toThrow();
    expect(() => checkDateOrder(null, d('2026-01-01T00:00:00Z'))).not.toThrow();
    expect(() => checkDateOrder(d('2026-01-01T00:00:00Z'), null)).not.toThrow();
    expect(() => checkDateOrder(null, null)).not.toThrow();
  });

  it('refuses an endDate before the startDate, naming endDate', () => {
    const e = errorOf(() => checkDateOrder(d('2026-01-02T00:00:00Z'), d('2026-01-01T23:59:59Z')));
    expect(e.status).toBe(400);
    expect(e.code).toBe('validation_failed');
    expect(e.details?.[0].field).toBe('endDate');
  });

  it('compares instants, not the written offsets', () => {
    // 10:00+02:00 is 08:00Z: an end at 09:00Z is after it.
    expect(() => checkDateOrder(d('2026-01-01T10:00:00+02:00'), d('2026-01-01T09:00:00Z'))).not.toThrow();
    expect(() => checkDateOrder(d('2026-01-01T10:00:00Z'), d('2026-01-01T11:00:00+02:00'))).toThrow(AppError);
  });

  it('defaults a new campaign to active and refuses completed on create', () => {
    expect(checkCreateStatus(undefined)).toBe('active');
    expect(checkCreateStatus(null)).toBe('active');
    expect(checkCreateStatus('inactive')).toBe('inactive');
    expect(errorOf(() => checkCreateStatus('completed')).details?.[0].field).toBe('status');
  });

  it('refuses null for properties that cannot be cleared, listing each', () => {
    expect(() => rejectNulls({ name: 'x', description: null }, ['name'])).not.toThrow();
    const e = errorOf(() => rejectNulls({ name: null, status: null }, ['name', 'status']));
    expect(e.details?.map((x) => x.field)).toEqual(['name', 'status']);
  });
});
