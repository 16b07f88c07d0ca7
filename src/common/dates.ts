/** Wire format for timestamps (decisions §1): ISO 8601, second precision, explicit offset. */
export function iso(d: Date | string | null | undefined): string | null {
  if (d === null || d === undefined) return null;
  const date = d instanceof Date ? d : new Date(d);
  if (Number.isNaN(date.getTime())) return null;
  return date.toISOString().slice(0, 19) + '+00:00';
}

/** Same as iso() for values that are never null (audit creation times). */
export const isoRequired = (d: Date | string): string => iso(d) ?? '';

/** ISO 8601 date-time with an explicit offset (Z or ±hh:mm); a value without one is refused. */
export const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;

export function parseIsoWithOffset(value: string): Date | null {
  if (!ISO_WITH_OFFSET.test(value)) return null;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return null;
  const year = d.getUTCFullYear();
  return year < 1 || year > 9999 ? null : d;
}

const CALENDAR_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A calendar date written YYYY-MM-DD that exists (2026-02-30 does not; years 0001-9999). */
export function isCalendarDate(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const m = CALENDAR_DATE.exec(value);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (y < 1 || mo < 1 || mo > 12 || d < 1) return false;
  // Date.UTC reads years 0-99 as 1900-1999: set the year on its own.
  const date = new Date(Date.UTC(2000, mo - 1, d));
  date.setUTCFullYear(y);
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}
