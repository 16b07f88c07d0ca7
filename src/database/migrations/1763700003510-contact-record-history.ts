import { type MigrationInterface, type QueryRunner } from 'typeorm';
import { EVENT_CONTACT_SQL } from './1763700002700-tracked-events.js';

/**
 * A contact's record history beyond the change feed's retention (docs/decisions/contact-timeline.md):
 * the feed keeps events EVENT_RETENTION_DAYS; when its retention deletes them, the events about a
 * contact that still exists move, in the same statement, to `contact_record_history`, which the
 * timeline reads beside the kept feed. Nothing is added to the write path: the feed's writers insert
 * their event as before, and the archive is written once per event, by the hourly prune.
 *
 * An archived event keeps its id, type, time, number, data and previous values; it goes with its
 * contact (ON DELETE CASCADE). History pruned before this migration is not recovered.
 */

/** The contact id an event (columns type, data) is about, as an integer, or NULL (EVENT_CONTACT_SQL, guarded for the cast). */
export const EVENT_CONTACT_ID_SQL = `(CASE WHEN ${EVENT_CONTACT_SQL} ~ '^[1-9][0-9]{0,9}$' AND (${EVENT_CONTACT_SQL})::bigint <= 2147483647 THEN (${EVENT_CONTACT_SQL})::int END)`;

export class ContactRecordHistory1763700003510 implements MigrationInterface {
  name = 'ContactRecordHistory1763700003510';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE contact_record_history (
        contact_id  integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        occurred_at timestamptz NOT NULL,
        sequence    bigint NOT NULL,
        id          uuid NOT NULL,
        type        text NOT NULL,
        data        jsonb NOT NULL,
        previous    jsonb,
        PRIMARY KEY (contact_id, occurred_at, sequence)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE contact_record_history`);
  }
}
