import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The transactional outbox and event feed (docs/decisions/events-and-webhooks.md). A writer inserts its event row in the same
 * transaction as the change, with `sequence` NULL. The sequencer (one at a time, under an advisory
 * lock) later numbers committed, unsequenced rows in insert order from the one-row counter in
 * `event_feed_state`, so `sequence` increases in the order events become visible to readers: a
 * reader that has seen sequence N never later finds a new event below N.
 *
 * `insert_order` only orders the events of one sequencing pass (several events of one transaction
 * keep their order); `pruned_through` is the highest sequence removed by retention (410 below it).
 */
export class Events1763700000900 implements MigrationInterface {
  name = 'Events1763700000900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE events (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        sequence bigint NULL,
        type text NOT NULL,
        occurred_at timestamptz NOT NULL DEFAULT now(),
        data jsonb NOT NULL,
        previous jsonb NULL,
        insert_order bigint GENERATED ALWAYS AS IDENTITY
      )`);
    // Only the primary key and the unsequenced index are written by the writer's INSERT (the
    // "create contact" bench row pays for them); the others are written when the sequencer numbers the row.
    await q.query(`CREATE UNIQUE INDEX events_sequence_uq ON events (sequence) WHERE sequence IS NOT NULL`);
    await q.query(`CREATE INDEX events_unsequenced_idx ON events (insert_order) WHERE sequence IS NULL`);
    await q.query(`CREATE INDEX events_type_sequence_idx ON events (type, sequence) WHERE sequence IS NOT NULL`);
    await q.query(`
      CREATE TABLE event_feed_state (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        last_sequence bigint NOT NULL DEFAULT 0,
        pruned_through bigint NOT NULL DEFAULT 0
      )`);
    await q.query(`INSERT INTO event_feed_state DEFAULT VALUES`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE event_feed_state`);
    await q.query(`DROP TABLE events`);
  }
}
