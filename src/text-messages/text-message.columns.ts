import { columnMap } from '../database/column-map.js';
import { TextMessage } from './text-message.entity.js';

/** Row columns read beside the message's own: the campaign's name (null when the message has no campaign or it is gone). */
interface TextMessageExtras {
  campaignName: string | null;
}

/**
 * The text message's column map: the record's properties in the order the API shows them (the
 * sending machinery's columns, claim and provider, stay out of it) and the computed campaign.
 * Messages are written through the entity (TextMessagesService) and by the broadcast's set-based
 * statements (text-message.repository.ts), which insert their events with the record's jsonb.
 */
export const TEXT_MESSAGE_COLUMNS = columnMap<TextMessage, TextMessageExtras>(TextMessage, {
  campaignName: (t) => `(SELECT cp.name FROM campaigns cp WHERE cp.id = ${t}.campaign_id)`,
})({
  id: {},
  content: {},
  recipient: {},
  status: {},
  scheduledFor: {},
  sentAt: {},
  deliveredAt: {},
  failedAt: {},
  canceledAt: {},
  failureReason: {},
  failureCode: {},
  campaign: {
    sql: (r) =>
      `CASE WHEN ${r('campaignId')} IS NULL OR ${r('campaignName')} IS NULL THEN NULL ELSE jsonb_build_object('id', ${r('campaignId')}, 'name', ${r('campaignName')}) END`,
    value: (r) => (r.campaignName !== null && r.campaignId !== null ? { id: r.campaignId, name: r.campaignName } : null),
  },
  broadcastId: {},
  createdAt: {},
  modifiedAt: {},
  createdBy: {},
  createdByUser: {},
  modifiedBy: {},
  modifiedByUser: {},
  campaignId: { record: false },
});

/** A message row as the map's columns answer it (the stored properties and the campaign's name). */
export type TextMessageRow = Parameters<typeof TEXT_MESSAGE_COLUMNS.toRecord>[0];

/** A text message as the API returns it (and as its events carry it). */
export type TextMessageRecord = ReturnType<typeof TEXT_MESSAGE_COLUMNS.toRecord>;

/** The one mapper from a message (with its campaign's name, null when none) to the API record. */
export const toTextMessageRecord = (t: TextMessage, campaignName: string | null): TextMessageRecord =>
  TEXT_MESSAGE_COLUMNS.toRecord(Object.assign({ campaignName }, t));

/**
 * The message record (exactly toTextMessageRecord, from the column map) as jsonb over `r`, a row of
 * RECORD_COLUMNS: the event data of the set-based writes of broadcasts, which insert one event per
 * message in the same statement.
 */
export const RECORD_JSON = TEXT_MESSAGE_COLUMNS.recordJson('r');

/** A relation `r` of the record's columns over the written rows `u` (the campaign's name by a join: a set may be 100,000 messages). */
export const RECORD_ROWS = `SELECT ${TEXT_MESSAGE_COLUMNS.storedList('u')}, cp.name AS "campaignName" FROM u LEFT JOIN campaigns cp ON cp.id = u.campaign_id`;
