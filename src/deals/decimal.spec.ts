import { describe, expect, it } from '@jest/globals';
import { validateSync } from 'class-validator';
import { decimalPlaces, IsDecimal } from './decimal.js';

class Money {
  @IsDecimal(2)
  value: unknown;
}

const errorsFor = (value: unknown) => {
  const m = new Money();
  m.value = value;
  return validateSync(m);
};

describe('decimal numbers', () => {
  it.each([
    [0, 0],
    [-0, 0],
    [1.25, 2],
    [1e-7, 7],
    [1.5e-10, 11],
    [1e-320, 320],
    [5e-324, 324],
    [1e21, 0],
    [1e308, 0],
    [999999999999.99, 2],
  ])('%p has %p decimal places', (v, n) => {
    expect(decimalPlaces(v)).toBe(n);
  });

  it('is NaN for what is not a finite number', () => {
    expect(decimalPlaces(Infinity)).toBeNaN();
    expect(decimalPlaces(NaN)).toBeNaN();
  });

  it('the validator refuses more decimals, exponent notation included, and never throws', () => {
    for (const v of [1e-7, 0.0000001, 1e-320, 5e-324, 0.001, 1.005, Infinity, NaN, '1', null, {}]) {
      expect(errorsFor(v).map((e) => e.property)).toEqual(['value']);
    }
    for (const v of [0, -0, 1, 0.1, 12.34, 1e21]) expect(errorsFor(v)).toEqual([]);
    expect(Object.values(errorsFor(1e-7)[0].constraints ?? {})).toEqual(['value must be a number with at most 2 decimal places']);
  });
});
