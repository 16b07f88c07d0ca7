import { describe, expect, it } from '@jest/globals';
import { normalizeColor } from './color.js';

describe('normalizeColor', () => {
  it.each([
    ['#4e5d9d', '#4e5d9d'],
    ['4E5D9D', '#4e5d9d'],
    ['#ABCDEF', '#abcdef'],
    [' 000000 ', '#000000'],
  ])('%s → %s', (input, out) => {
    expect(normalizeColor(input)).toBe(out);
  });

  it.each(['', '#', '#fff', 'fff', '#12345', '#1234567', '##123456', 'red', '#12345g', '0x123456'])('refuses %p', (input) => {
    expect(normalizeColor(input)).toBeNull();
  });
});
