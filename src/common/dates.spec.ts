import { describe, expect, it } from '@jest/globals';
import { iso, parseIsoWithOffset } from './dates.js';

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
});
