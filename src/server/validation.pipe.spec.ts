import { describe, expect, it } from '@jest/globals';
import { nestingDepth } from './validation.pipe.js';

describe('nestingDepth', () => {
  it('counts object and array levels without recursion', () => {
    expect(nestingDepth({}, 32)).toBe(1);
    expect(nestingDepth({ a: { b: [1, { c: 2 }] } }, 32)).toBe(4);
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(nestingDepth(deep, 32)).toBe(33);
  });
});
