import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Tracked events (src/tracking/, README "Tracked events"):
 *
 * - `contacts.external_id`: the id a tracking client knows a contact by (Segment's userId), unique
 *   when set; `contacts.email` may be empty for a contact created from a userId alone (the API's
 *   create and PUT still require it).
 * - `tracked_events`: append-only, partitioned by month on `occurred_at` (declarative RANGE
 *   partitions, created ahead by the `tracking.partitions` job and on demand by the intake, dropped
 *   whole past TRACKING_RETENTION_DAYS). No foreign key to contacts: contact ids are never reused,
 *   and a deleted contact's events go with their partitions.
 * - `tracked_message_ids`: Segment's messageId, kept at least 24 h (48 h), so a retried batch
 *   stores nothing twice.
 * - `tracked_event_daily`: per contact, per event name, per UTC day: count and first/last time,
 *   written in the insert's transaction; behavioural filters read it, never the raw events.
 * - `tracked_event_definitions`: each event name with its count, first/last seen and its
 *   properties' observed types (`"<key>:<type>": true`).
 * - `anonymous_ids`: which contact an anonymousId was linked to by an identify (null: not yet).
 * - `tracked_segment_queue`: contacts with new tracked events, for the segment refresher.
 * - `segments.time_evaluated_at`: when (by the injected clock) a segment whose filter depends on
 *   the time was last re-evaluated as a whole.
 */
/** The contact id (as text) an event of the change feed is about; the timeline's query repeats it (tracking.repository.ts). */
export const EVENT_CONTACT_SQL = `(CASE WHEN type LIKE 'contact.%' THEN data->>'id' ELSE coalesce(data->>'contactId', data->>'contact_id') END)`;

export class TrackedEvents1763700002700 implements MigrationInterface {
  name = 'TrackedEvents1763700002700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE contacts ADD COLUMN external_id text`);
    await q.query(`CREATE UNIQUE INDEX contacts_external_id_uq ON contacts (external_id) WHERE external_id IS NOT NULL`);
    await q.query(`ALTER TABLE contacts ALTER COLUMN email DROP NOT NULL`);

    await q.query(`CREATE SEQUENCE tracked_events_id_seq AS bigint`);
    await q.query(`
      CREATE TABLE tracked_events (
        id           bigint NOT NULL DEFAULT nextval('tracked_events_id_seq'),
        occurred_at  timestamptz NOT NULL,
        received_at  timestamptz NOT NULL,
        type         text NOT NULL CHECK (type IN ('track', 'identify')),
        name         text,
        contact_id   integer,
        user_id      text,
        anonymous_id text,
        message_id   text NOT NULL,
        properties   jsonb NOT NULL DEFAULT '{}'::jsonb,
        context      jsonb,
        flags        jsonb,
        PRIMARY KEY (occurred_at, id)
      ) PARTITION BY RANGE (occurred_at)`);
    await q.query(`CREATE INDEX tracked_events_contact_idx ON tracked_events (contact_id, occurred_at DESC, id DESC)`);
    await q.query(`CREATE INDEX tracked_events_name_idx ON tracked_events (name, occurred_at DESC, id DESC)`);
    await q.query(`CREATE INDEX tracked_events_id_idx ON tracked_events (id)`);
    await q.query(`CREATE INDEX tracked_events_anonymous_idx ON tracked_events (anonymous_id) WHERE contact_id IS NULL`);

    await q.query(`
      CREATE TABLE tracked_message_ids (
        message_id  text PRIMARY KEY,
        received_at timestamptz NOT NULL
      )`);
    await q.query(`CREATE INDEX tracked_message_ids_received_idx ON tracked_message_ids (received_at)`);

    await q.query(`
      CREATE TABLE tracked_event_daily (
        contact_id integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        name       text NOT NULL,
        day        date NOT NULL,
        count      integer NOT NULL,
        first_at   timestamptz NOT NULL,
        last_at    timestamptz NOT NULL,
        PRIMARY KEY (contact_id, name, day)
      )`);
    await q.query(`CREATE INDEX tracked_event_daily_name_idx ON tracked_event_daily (name, day, contact_id)`);

    await q.query(`
      CREATE TABLE tracked_event_definitions (
        name          text PRIMARY KEY,
        count         bigint NOT NULL,
        first_seen_at timestamptz NOT NULL,
        last_seen_at  timestamptz NOT NULL,
        property_types jsonb NOT NULL DEFAULT '{}'::jsonb
      )`);

    await q.query(`
      CREATE TABLE anonymous_ids (
        anonymous_id text PRIMARY KEY,
        contact_id   integer REFERENCES contacts(id) ON DELETE CASCADE,
        linked_at    timestamptz
      )`);
    await q.query(`CREATE INDEX anonymous_ids_contact_idx ON anonymous_ids (contact_id) WHERE contact_id IS NOT NULL`);

    // The timeline's record events: the contact an event is about (a contact.* event's record, or
    // the contactId / contact_id of the others), indexed once the sequencer numbers the event, so
    // the writer's insert pays nothing for it.
    await q.query(`CREATE INDEX events_contact_idx ON events (${EVENT_CONTACT_SQL}, occurred_at DESC)`);

    await q.query(`CREATE TABLE tracked_segment_queue (contact_id integer PRIMARY KEY)`);
    await q.query(`ALTER TABLE segments ADD COLUMN time_evaluated_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX events_contact_idx`);
    await q.query(`ALTER TABLE segments DROP COLUMN time_evaluated_at`);
    await q.query(`DROP TABLE tracked_segment_queue`);
    await q.query(`DROP TABLE anonymous_ids`);
    await q.query(`DROP TABLE tracked_event_definitions`);
    await q.query(`DROP TABLE tracked_event_daily`);
    await q.query(`DROP TABLE tracked_message_ids`);
    await q.query(`DROP TABLE tracked_events`);
    await q.query(`DROP SEQUENCE tracked_events_id_seq`);
    await q.query(`DELETE FROM contacts WHERE email IS NULL`);
    await q.query(`ALTER TABLE contacts ALTER COLUMN email SET NOT NULL`);
    await q.query(`DROP INDEX contacts_external_id_uq`);
    await q.query(`ALTER TABLE contacts DROP COLUMN external_id`);
  }
}
