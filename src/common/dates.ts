/** Wire format for timestamps (docs/decisions/wire-format.md): ISO 8601, second precision, explicit offset. */
export function iso(d: Date | string | null | undefined): string | null {
  if (d === null || d === undefined) return null;
  const date = d instanceof Date ? d : new Date(d);
  if (Number.isNaN(date.getTime())) return null;
  return date.toISOString().slice(0, 19) + '+00:00';
}

/** Same as iso() for values that are never null (audit creation times). */
export const isoRequired = (d: Date | string): string => iso(d) ?? '';

/**
 * ISO 8601 date-time with an explicit offset (docs/decisions/wire-format.md): `Z`, `±hh:mm`, `±hhmm` or the hours-only
 * `±hh`; a value without one is refused. Seconds and a fraction of up to 9 digits are optional.
 */
export const ISO_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|([+-])(\d{2})(?::?(\d{2}))?)$/i;

const isLeap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const daysInMonth = (year: number, month: number): number => (month === 2 ? (isLeap(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31);

/**
 * Parses an ISO 8601 date-time with an offset, checking every part itself: the JavaScript Date parser
 * refuses an hours-only offset and silently rolls impossible dates over (2026-02-30 → March 2).
 */
export function parseIsoWithOffset(value: string): Date | null {
  const m = ISO_WITH_OFFSET.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] === undefined ? 0 : Number(m[7].padEnd(3, '0').slice(0, 3));
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = m[11] === undefined ? 0 : Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, ms);
  const result = new Date(d.getTime() - offsetMinutes * 60_000);
  const utcYear = result.getUTCFullYear();
  return utcYear < 1 || utcYear > 9999 ? null : result;
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
