/**
 * Pure rules of lead scoring (README "Lead scoring"): bounds, durations, which point groups a change
 * of points enters and leaves, decay amounts and periods, and which contact an event is about (the
 * filter registry of a tracked event's properties is tracking's trackedPropertiesRegistry).
 */
import { type AppError, notFound, validationError } from '../common/errors.js';
import { type FilterNode, parseFilterText, readJsonFilter } from '../lists/filter-syntax.js';

/** A single change of points is at most this, either way (and never 0). */
export const MAX_DELTA = 1_000_000;
/** A contact's points stay within these bounds (the integer column's range: ±2^31). */
export const MIN_POINTS = -2_147_483_648;
export const MAX_POINTS = 2_147_483_647;

/** Why a change of points is not made, as an error: 404 for a contact that does not exist, 400 naming `delta` otherwise. */
export function pointChangeError(reason: 'not_found' | 'invalid_delta' | 'out_of_bounds', contactId: number): AppError {
  if (reason === 'not_found') return notFound('Contact', contactId);
  if (reason === 'invalid_delta')
    return validationError(`delta must be a whole number other than 0, at most ${MAX_DELTA} either way`, [
      { field: 'delta', message: `must be a whole number other than 0, at most ${MAX_DELTA} either way` },
    ]);
  return validationError(`delta would take the contact's points beyond ${MIN_POINTS}..${MAX_POINTS}`, [
    { field: 'delta', message: `would take the points beyond ${MIN_POINTS}..${MAX_POINTS}` },
  ]);
}

/** Where points come from, as the ledger records it. */
export const POINT_SOURCES = ['manual', 'rule', 'workflow', 'decay', 'import'] as const;
export type PointSource = (typeof POINT_SOURCES)[number];

/** A duration: a number and a unit s, m, h, d or w (`1d`, `30m`). */
export const DURATION_PATTERN = /^([1-9]\d{0,5})([smhdw])$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Milliseconds of a duration written as DURATION_PATTERN says; null when it is not one. */
export function durationMs(text: string | null | undefined): number | null {
  const m = text ? DURATION_PATTERN.exec(text) : null;
  return m ? Number(m[1]) * UNIT_MS[m[2]] : null;
}

/** A published point group's range, as tiers are computed from it. */
export interface GroupRange {
  id: number;
  name: string;
  minimumPoints: number;
  maximumPoints: number;
  color: string | null;
}

const holds = (g: GroupRange, points: number) => points >= g.minimumPoints && points <= g.maximumPoints;

/** The groups a contact enters and leaves when its points go from `before` to `after` (each in id order). */
export function tierChanges(groups: readonly GroupRange[], before: number, after: number): { entered: GroupRange[]; left: GroupRange[] } {
  const entered: GroupRange[] = [];
  const left: GroupRange[] = [];
  for (const g of groups) {
    const was = holds(g, before);
    const is = holds(g, after);
    if (!was && is) entered.push(g);
    else if (was && !is) left.push(g);
  }
  return { entered, left };
}

/** The groups whose range holds `points`. */
export function groupsHolding(groups: readonly GroupRange[], points: number): GroupRange[] {
  return groups.filter((g) => holds(g, points));
}

/**
 * What one decay period does to `points`: `percent`% of them towards 0, rounded up (so a small score
 * reaches 0 instead of staying above it for ever). 0 when there is nothing to decay.
 */
export function decayDelta(points: number, percent: number): number {
  if (points === 0) return 0;
  const amount = Math.ceil((Math.abs(points) * percent) / 100);
  return points > 0 ? -Math.min(amount, points) : Math.min(amount, -points);
}

/** The index of the decay period `now` is in (1 for the first full period after `since`; 0 before it ends). */
export function decayPeriodIndex(since: Date, everyMs: number, now: Date): number {
  const elapsed = now.getTime() - since.getTime();
  return elapsed <= 0 ? 0 : Math.floor(elapsed / everyMs);
}

/**
 * The contact a change-feed event is about: the record itself for `contact.*` (data.id), else the
 * record's `contactId` (a deal's, an activity's, a campaign membership's); null when there is none.
 */
export function contactIdOf(type: string, data: Record<string, unknown>): number | null {
  const raw = type.startsWith('contact.') ? data.id : data.contactId;
  return typeof raw === 'number' && Number.isInteger(raw) && raw > 0 ? raw : null;
}

/** A tracked event's property names a filter may use (the registry's json keys). */

/** The filter read into its JSON tree (a syntax error throws the filter language's error). */
export function readFilter(raw: unknown): FilterNode {
  return typeof raw === 'string' ? parseFilterText(raw) : readJsonFilter(raw);
}
