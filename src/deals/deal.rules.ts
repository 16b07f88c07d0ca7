/**
 * Deal rules that need no database: statuses, calendar dates and the closed_at rule.
 * Kept free of Nest and TypeORM so that the unit spec can import them.
 */
import { fieldError } from '../common/errors.js';

export const DEAL_STATUSES = ['open', 'won', 'lost'] as const;
export type DealStatus = (typeof DEAL_STATUSES)[number];
export const DEFAULT_DEAL_STATUS: DealStatus = 'open';
export const DEFAULT_DEAL_QUANTITY = 1;
/** numeric(14,2): the largest value the column holds. */
export const MAX_DEAL_VALUE = 999_999_999_999.99;

/** A calendar date written YYYY-MM-DD that exists: the shared rule (common/dates.ts). */
export { isCalendarDate } from '../common/dates.js';

export const isClosed = (status: DealStatus | null | undefined): boolean => status === 'won' || status === 'lost';

export interface ClosedAtInput {
  /** The stored deal before this change (null when the deal is being created). */
  previous: { status: DealStatus; closedAt: Date | null } | null;
  /** The status the deal has after this change. */
  status: DealStatus;
  /** closed_at as the request gives it: undefined when omitted, null when cleared. */
  supplied: Date | null | undefined;
  now: Date;
}

/**
 * When a deal was closed:
 * - an open deal has no close time: closed_at becomes null when a deal is (re)opened, and a
 *   closed_at sent with status open is a 400;
 * - a won or lost deal always has one: the supplied value; else the stored one when the deal was
 *   already closed (won → lost keeps it); else now, the moment it was closed.
 */
export function resolveClosedAt({ previous, status, supplied, now }: ClosedAtInput): Date | null {
  if (!isClosed(status)) {
    if (supplied) throw fieldError('closed_at', 'must be omitted or null while status is open');
    return null;
  }
  if (supplied) return supplied;
  if (previous && isClosed(previous.status) && previous.closedAt) return previous.closedAt;
  return now;
}

/** Properties that may be omitted from an edit but never set to null (shared by every resource). */
export { rejectNulls } from '../common/errors.js';
