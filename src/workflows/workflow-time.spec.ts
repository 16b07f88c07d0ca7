import { describe, expect, it } from '@jest/globals';
import { isTimeZone, nextInWindow, nextTimeOfDay, parseDuration, zonedTime } from './workflow-time.js';

describe('workflow time rules', () => {
  it('parses durations', () => {
    expect(parseDuration('2d')).toBe(2 * 86_400_000);
    expect(parseDuration('90m')).toBe(90 * 60_000);
    expect(parseDuration('0s')).toBeNull();
    expect(parseDuration('2 days')).toBeNull();
    expect(parseDuration('400d')).toBeNull();
  });

  it('knows IANA zones and refuses offsets', () => {
    expect(isTimeZone('Europe/Paris')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('+02:00')).toBe(false);
    expect(isTimeZone('Nowhere/City')).toBe(false);
  });

  it('turns a wall-clock time into the instant, across daylight-saving changes', () => {
    // Paris: UTC+1 in winter, UTC+2 in summer.
    expect(zonedTime(2026, 1, 15, 9 * 60, 'Europe/Paris').toISOString()).toBe('2026-01-15T08:00:00.000Z');
    expect(zonedTime(2026, 7, 15, 9 * 60, 'Europe/Paris').toISOString()).toBe('2026-07-15T07:00:00.000Z');
    // 2026-03-29 02:30 does not exist in Paris (02:00 → 03:00): the same time after the gap.
    expect(zonedTime(2026, 3, 29, 2 * 60 + 30, 'Europe/Paris').toISOString()).toBe('2026-03-29T01:30:00.000Z');
    // 2026-10-25 02:30 happens twice (03:00 → 02:00): the first one (still UTC+2).
    expect(zonedTime(2026, 10, 25, 2 * 60 + 30, 'Europe/Paris').toISOString()).toBe('2026-10-25T00:30:00.000Z');
    // New York, spring forward on 2026-03-08.
    expect(zonedTime(2026, 3, 8, 9 * 60, 'America/New_York').toISOString()).toBe('2026-03-08T13:00:00.000Z');
    expect(zonedTime(2026, 3, 7, 9 * 60, 'America/New_York').toISOString()).toBe('2026-03-07T14:00:00.000Z');
  });

  it('finds the next time of day in the zone', () => {
    // 2026-03-07 20:00 in New York (UTC-5) → next 09:00 is on the 8th, after the change (UTC-4).
    const now = new Date('2026-03-08T01:00:00Z');
    expect(nextTimeOfDay(now, 9 * 60, 'America/New_York').toISOString()).toBe('2026-03-08T13:00:00.000Z');
    // Already past 09:00 today: tomorrow.
    expect(nextTimeOfDay(new Date('2026-01-15T08:30:00Z'), 9 * 60, 'Europe/Paris').toISOString()).toBe('2026-01-16T08:00:00.000Z');
    // Before 09:00 today: today.
    expect(nextTimeOfDay(new Date('2026-01-15T07:30:00Z'), 9 * 60, 'Europe/Paris').toISOString()).toBe('2026-01-15T08:00:00.000Z');
  });

  it('answers now inside a send window, else its next opening', () => {
    const w = { from: '09:00', to: '20:00', days: [1, 2, 3, 4, 5] };
    // Thursday 2026-01-15 12:00 Paris: inside.
    const inside = new Date('2026-01-15T11:00:00Z');
    expect(nextInWindow(inside, w, 'Europe/Paris')).toBe(inside);
    // Thursday 21:00 Paris: Friday 09:00.
    expect(nextInWindow(new Date('2026-01-15T20:00:00Z'), w, 'Europe/Paris').toISOString()).toBe('2026-01-16T08:00:00.000Z');
    // Saturday 10:00 Paris: Monday 09:00.
    expect(nextInWindow(new Date('2026-01-17T09:00:00Z'), w, 'Europe/Paris').toISOString()).toBe('2026-01-19T08:00:00.000Z');
  });
});
