/**
 * Decimal numbers in request bodies. class-validator's `IsNumber({ maxDecimalPlaces })` counts
 * decimals from `String(value)`, which is exponent notation for small and large numbers
 * (`1e-7`), and throws a TypeError there (a 500). This counts them from the exponent instead.
 */
import { registerDecorator, type ValidationOptions } from 'class-validator';

/** Decimal places of a finite number as JavaScript writes it: 1.25 → 2, 1e-7 → 7, 1.5e-10 → 11, 1e21 → 0. */
export function decimalPlaces(value: number): number {
  if (!Number.isFinite(value)) return NaN;
  const m = /^-?\d+(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(value));
  if (!m) return NaN;
  const fraction = m[1]?.length ?? 0;
  const exponent = m[2] ? Number(m[2]) : 0;
  return Math.max(0, fraction - exponent);
}

/**
 * A finite JSON number with at most `maxDecimalPlaces` decimals (other types, NaN, Infinity and
 * more decimals are refused with one message, never a thrown error).
 */
export function IsDecimal(maxDecimalPlaces: number, options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isDecimal',
      target: object.constructor,
      propertyName,
      constraints: [maxDecimalPlaces],
      options: { message: `${propertyName} must be a number with at most ${maxDecimalPlaces} decimal places`, ...options },
      validator: {
        validate: (v: unknown) => typeof v === 'number' && Number.isFinite(v) && decimalPlaces(v) <= maxDecimalPlaces,
      },
    });
}
