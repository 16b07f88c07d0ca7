import { iso } from '../common/dates.js';
import type { TrackedEventRow } from './tracking.repository.js';

/** A tracked event as the API returns it. */
export function toTrackedEventRecord(r: TrackedEventRow) {
  return {
    id: Number(r.id),
    type: r.type,
    name: r.name,
    occurredAt: iso(r.occurredAt) as string,
    receivedAt: iso(r.receivedAt) as string,
    contactId: r.contactId,
    userId: r.userId,
    anonymousId: r.anonymousId,
    messageId: r.messageId,
    properties: r.properties,
    context: r.context,
    flags: r.flags,
  };
}
export type TrackedEventRecord = ReturnType<typeof toTrackedEventRecord>;
