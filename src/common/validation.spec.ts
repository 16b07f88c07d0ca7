import { describe, expect, it } from '@jest/globals';
import { toE164 } from './validation.js';

describe('toE164', () => {
  it('normalizes parseable numbers and refuses the rest', () => {
    expect(toE164('(415) 555-0100')).toBe('+14155550100');
    expect(toE164('+44 20 7946 0958')).toBe('+442079460958');
    expect(toE164('12')).toBeNull();
    expect(toE164('not a phone')).toBeNull();
  });
});
