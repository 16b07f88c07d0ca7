import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { isCalendarDate, rejectNulls, resolveClosedAt } from './deal.rules.js';

describe('deal rules', () => {
  const now = new Date('2026-11-21T10:15:00Z');
  const earlier = new Date('2026-10-01T09:00:00Z');
  const given = new Date('2026-11-01T12:00:00Z');

  describe('closed_at', () => {
    const cases: [string, Parameters<typeof resolveClosedAt>[0], Date | null][] = [
      ['a new open deal has none', { previous: null, status: 'open', supplied: undefined, now }, null],
      ['a new won deal without closed_at is stamped now', { previous: null, status: 'won', supplied: undefined, now }, now],
      ['a new lost deal with closed_at null is stamped now', { previous: null, status: 'lost', supplied: null, now }, now],
      ['a new won deal keeps the supplied closed_at', { previous: null, status: 'won', supplied: given, now }, given],
      ['open → won stamps now', { previous: { status: 'open', closedAt: null }, status: 'won', supplied: undefined, now }, now],
      ['open → lost takes the supplied value', { previous: { status: 'open', closedAt: null }, status: 'lost', supplied: given, now }, given],
      ['won stays won: keeps its closed_at', { previous: { status: 'won', closedAt: earlier }, status: 'won', supplied: undefined, now }, earlier],
      ['won → lost keeps the closed_at', { previous: { status: 'won', closedAt: earlier }, status: 'lost', supplied: undefined, now }, earlier],
      ['won with a new closed_at takes it', { previous: { status: 'won', closedAt: earlier }, status: 'won', supplied: given, now }, given],
      ['won without a stored closed_at is stamped now', { previous: { status: 'won', closedAt: null }, status: 'won', supplied: undefined, now }, now],
      ['won → open clears it', { previous: { status: 'won', closedAt: earlier }, status: 'open', supplied: undefined, now }, null],
      ['won → open with closed_at null clears it', { previous: { status: 'won', closedAt: earlier }, status: 'open', supplied: null, now }, null],
    ];
    it.each(cases)('%s', (_name, input, expected) => {
      expect(resolveClosedAt(input)).toEqual(expected);
    });

    it('refuses a closed_at on an open deal, naming closed_at', () => {
      let err: unknown;
      try {
        resolveClosedAt({ previous: null, status: 'open', supplied: given, now });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).status).toBe(400);
      expect((err as AppError).details?.[0].field).toBe('closed_at');
    });
  });

  describe('calendar dates', () => {
    it.each(['2026-11-21', '2024-02-29', '0001-01-01', '9999-12-31'])('accepts %s', (v) => {
      expect(isCalendarDate(v)).toBe(true);
    });
    it.each(['2026-02-30', '2025-02-29', '2026-13-01', '2026-00-10', '2026-1-5', '2026-11-21T00:00:00Z', '21.11.2026', '', '0000-01-01', 20261121, null])(
      'refuses %p',
      (v) => {
        expect(isCalendarDate(v)).toBe(false);
      },
    );
  });

  it('refuses null on required properties', () => {
    expect(() => rejectNulls({ title: null }, ['title', 'value'])).toThrow(AppError);
    expect(() => rejectNulls({ stage: null }, ['title', 'value'])).not.toThrow();
  });
});
