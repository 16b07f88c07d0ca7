import { describe, expect, it } from '@jest/globals';
import { isCalendarDate, iso, parseIsoWithOffset } from './dates.js';

describe('dates', () => {
  it('formats with second precision and an explicit offset', () => {
    expect(iso(new Date('2026-11-21T10:15:00.123Z'))).toBe('2026-11-21T10:15:00+00:00');
    expect(iso(null)).toBeNull();
  });

  it('accepts ISO 8601 with an offset and refuses one without', () => {
    expect(parseIsoWithOffset('2026-11-21T10:15:00Z')?.toISOString()).toBe('2026-11-21T10:15:00.000Z');
    expect(parseIsoWithOffset('2026-11-21T12:15:00+02:00')?.toISOString()).toBe('2026-11-21T10:15:00.000Z');
    expect(parseIsoWithOffset('2026-11-21T10:15:00')).toBeNull();
    expect(parseIsoWithOffset('2026-11-21')).toBeNull();
    expect(parseIsoWithOffset('2026-13-45T10:15:00Z')).toBeNull();
    expect(parseIsoWithOffset('yesterday')).toBeNull();
  });

  it('isCalendarDate: YYYY-MM-DD that exists, years 0001-9999 (one rule for deals and date custom fields)', () => {
    for (const v of ['2026-11-21', '2024-02-29', '0001-01-01', '0050-02-28', '9999-12-31']) expect(isCalendarDate(v)).toBe(true);
    for (const v of [
      '2026-02-30',
      '2025-02-29',
      '0050-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-1-5',
      '0000-01-01',
      '2026-11-21T00:00:00Z',
      '',
      20261121,
      null,
    ]) {
      expect(isCalendarDate(v)).toBe(false);
    }
  });

  // An hours-only offset (`+02`) is valid ISO 8601 and is accepted like any other offset.
  it.each([
    ['2026-03-01T12:00:00+02', '2026-03-01T10:00:00.000Z'],
    ['2026-03-01T12:00:00-05', '2026-03-01T17:00:00.000Z'],
    ['2026-03-01T12:00+02', '2026-03-01T10:00:00.000Z'],
    ['2026-03-01T12:00:00.5+02', '2026-03-01T10:00:00.500Z'],
    ['2026-03-01T12:00:00+0230', '2026-03-01T09:30:00.000Z'],
    ['2026-03-01T12:00:00-02:30', '2026-03-01T14:30:00.000Z'],
    ['2026-03-01t12:00:00z', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T12:00:00.123456789Z', '2026-03-01T12:00:00.123Z'],
    ['2024-02-29T00:00:00+00', '2024-02-29T00:00:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59Z', '9999-12-31T23:59:59.000Z'],
  ])('accepts %s', (input, expected) => {
    expect(parseIsoWithOffset(input)?.toISOString()).toBe(expected);
  });

  it.each([
    '2026-03-01T12:00:00+2',
    '2026-03-01T12:00:00+020',
    '2026-03-01T12:00:00+02:',
    '2026-03-01T12:00:00+24:00',
    '2026-03-01T12:00:00+02:60',
    '2026-02-30T10:00:00Z',
    '2025-02-29T10:00:00Z',
    '2026-04-31T10:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T10:60:00Z',
    '2026-01-01T10:00:60Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:00:00-02',
    ' 2026-03-01T12:00:00Z',
    '2026-03-01 12:00:00Z',
  ])('refuses %s', (input) => {
    expect(parseIsoWithOffset(input)).toBeNull();
  });
});
