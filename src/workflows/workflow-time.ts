/**
 * Time rules of workflows, pure (every function takes `now`): durations, the next time of day and
 * send windows in a workflow's IANA time zone. Wall-clock times are turned into instants with the
 * Intl API (the zone's offset at that instant), so daylight-saving changes are handled: a time of
 * day that does not exist on a spring-forward day runs at the first instant after the gap, one
 * that happens twice on a fall-back day runs at its first occurrence.
 */

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
/** The longest wait a duration may express (a year). */
export const MAX_DURATION_MS = 366 * UNIT_MS.d;

/** "30s", "15m", "2h", "3d", "1w" as milliseconds; null when it is not one (or zero, or over a year). */
export function parseDuration(s: unknown): number | null {
  if (typeof s !== 'string') return null;
  const m = /^(\d{1,6})([smhdw])$/.exec(s.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return ms > 0 && ms <= MAX_DURATION_MS ? ms : null;
}

/** "+2d" (a duration after now) as milliseconds; null otherwise. */
export function parseRelative(s: unknown): number | null {
  if (typeof s !== 'string' || !s.startsWith('+')) return null;
  return parseDuration(s.slice(1));
}

/** "HH:MM" (24 h) as minutes after midnight; null otherwise. */
export function parseTimeOfDay(s: unknown): number | null {
  if (typeof s !== 'string') return null;
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(s);
  return m ? Number(m[1]) * 60 + Number(m[2]) : null;
}

/** Whether `tz` is an IANA time zone name this runtime knows (e.g. Europe/Paris, UTC; not "+02:00"). */
export function isTimeZone(tz: unknown): tz is string {
  if (typeof tz !== 'string' || !/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(tz)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      weekday: 'short',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** The wall-clock reading of an instant in a time zone; weekday 1 = Monday … 7 = Sunday (ISO). */
export interface ZonedParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: number;
}

const WEEKDAYS: Record<string, number> = { Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6, Sun: 7 };

export function zonedParts(at: Date, tz: string): ZonedParts {
  const out: Record<string, string> = {};
  for (const p of formatter(tz).formatToParts(at)) out[p.type] = p.value;
  return {
    year: Number(out.year),
    month: Number(out.month),
    day: Number(out.day),
    hour: Number(out.hour),
    minute: Number(out.minute),
    second: Number(out.second),
    weekday: WEEKDAYS[out.weekday],
  };
}

/** The zone's offset from UTC at an instant, in milliseconds (Paris in summer: +7,200,000). */
function offsetAt(ms: number, tz: string): number {
  const p = zonedParts(new Date(ms), tz);
  const asUtc = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return asUtc - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant at which the zone's clocks read the given wall-clock time. In a spring-forward gap
 * the wall time does not exist: the answer is the same time after the gap (02:30 → 03:30); on a
 * fall-back day the first of the two instants.
 */
export function zonedTime(year: number, month: number, day: number, minutes: number, tz: string): Date {
  const wall = Date.UTC(year, month - 1, day, Math.floor(minutes / 60), minutes % 60);
  // The offsets a day before and a day after (zones change their offset at most once in two days).
  const before = wall - offsetAt(wall - 86_400_000, tz);
  const after = wall - offsetAt(wall + 86_400_000, tz);
  const reads = (ms: number) => ms + offsetAt(ms, tz) === wall;
  const valid = [before, after].filter(reads);
  if (valid.length) return new Date(Math.min(...valid));
  // In a gap: the offset before the change puts the wall time just after the gap (02:30 → 03:30).
  return new Date(before);
}

/** The calendar day `days` after the given one (month and year roll over). */
function addDays(year: number, month: number, day: number, days: number): { year: number; month: number; day: number } {
  const d = new Date(Date.UTC(year, month - 1, day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** The next instant (strictly after `now`) at which the zone's clocks read `minutes` after midnight. */
export function nextTimeOfDay(now: Date, minutes: number, tz: string): Date {
  const p = zonedParts(now, tz);
  for (let i = 0; i < 3; i++) {
    const d = addDays(p.year, p.month, p.day, i);
    const at = zonedTime(d.year, d.month, d.day, minutes, tz);
    if (at.getTime() > now.getTime()) return at;
  }
  throw new Error('unreachable: a time of day recurs within three days');
}

/** When SMS may be sent: from and to as "HH:MM" in the workflow's time zone, on the ISO weekdays listed (1 = Monday). */
export interface SendWindow {
  from: string;
  to: string;
  days: number[];
}

/**
 * `now` when it falls inside the window, else the next instant the window opens. A window whose
 * `to` is before its `from` runs over midnight (22:00–06:00); the day named is the day it opens.
 */
export function nextInWindow(now: Date, w: SendWindow, tz: string): Date {
  const from = parseTimeOfDay(w.from) ?? 0;
  const to = parseTimeOfDay(w.to) ?? 24 * 60;
  const p = zonedParts(now, tz);
  const nowMin = p.hour * 60 + p.minute;
  const days = new Set(w.days);
  const inside = (weekday: number, min: number): boolean => {
    if (from < to) return days.has(weekday) && min >= from && min < to;
    // Over midnight: the evening part belongs to this day, the morning part to the day before.
    return (days.has(weekday) && min >= from) || (days.has(weekday === 1 ? 7 : weekday - 1) && min < to);
  };
  if (inside(p.weekday, nowMin)) return now;
  for (let i = 0; i < 9; i++) {
    const d = addDays(p.year, p.month, p.day, i);
    const weekday = ((p.weekday - 1 + i) % 7) + 1;
    if (!days.has(weekday)) continue;
    const at = zonedTime(d.year, d.month, d.day, from, tz);
    if (at.getTime() > now.getTime()) return at;
  }
  return now; // no day at all: validation refuses an empty days list
}
