import { describe, expect, it } from '@jest/globals';
import { nestingDepth, toE164 } from './validation.js';

describe('nestingDepth', () => {
  it('counts object and array levels without recursion', () => {
    expect(nestingDepth({}, 32)).toBe(1);
    expect(nestingDepth({ a: { b: [1, { c: 2 }] } }, 32)).toBe(4);
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(nestingDepth(deep, 32)).toBe(33);
  });
});

describe('toE164', () => {
  it('normalizes parseable numbers and refuses the rest', () => {
    expect(toE164('(415) 555-0100')).toBe('+14155550100');
    expect(toE164('+44 20 7946 0958')).toBe('+442079460958');
    expect(toE164('12')).toBeNull();
    expect(toE164('not a phone')).toBeNull();
  });
});
