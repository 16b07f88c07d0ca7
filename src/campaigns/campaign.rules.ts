/**
 * Campaign rules that need no database: statuses and date order (the completion job's statement is in campaigns.repository.ts).
 * Kept free of Nest and TypeORM so that the unit spec can import them.
 */
import { fieldError } from '../common/errors.js';

export const CAMPAIGN_STATUSES = ['active', 'inactive', 'completed'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
/** A new campaign starts active or inactive; `completed` is reached by editing or by the completion job. */
export const CREATE_STATUSES = ['active', 'inactive'] as const;
export const DEFAULT_CAMPAIGN_STATUS: CampaignStatus = 'active';

/** `endDate` may equal `startDate` but never precede it; either may be null (open-ended). */
export function checkDateOrder(startDate: Date | null, endDate: Date | null): void {
  if (startDate && endDate && endDate.getTime() < startDate.getTime()) {
    throw fieldError('endDate', `must not be before startDate (${startDate.toISOString()})`);
  }
}

/** The status a newly created campaign may have (also for a PUT that creates a record). */
export function checkCreateStatus(status: CampaignStatus | null | undefined): CampaignStatus {
  if (status === undefined || status === null) return DEFAULT_CAMPAIGN_STATUS;
  if (!(CREATE_STATUSES as readonly string[]).includes(status)) {
    throw fieldError('status', `must be ${CREATE_STATUSES.join(' or ')} when a campaign is created`);
  }
  return status;
}

/** Properties that may be omitted from an edit but never set to null (shared by every resource). */
export { rejectNulls } from '../common/errors.js';
