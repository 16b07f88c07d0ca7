import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The feed numbers transactions, not event rows (docs/decisions/events-and-webhooks.md).
 *
 * Before: a writer inserted its event with `sequence` NULL and the sequencer then UPDATEd every event
 * row with its number, which wrote each event twice (a second heap tuple, three more index entries,
 * a dead tuple left for vacuum). Now an event row is written once, keyed by the transaction that
 * wrote it (`tx`, its 64-bit transaction id) and `insert_order`; the sequencer records one small row
 * per committed transaction in `event_transactions` (the range of sequence numbers its events take,
 * in insert order), found from the snapshot the previous pass saw (`event_feed_state.snap`): only
 * transactions still running then, or started after it, can have become visible since.
 *
 * Existing events keep their numbers: each becomes a transaction of its own with a negative key
 * (−sequence), which no real transaction id can equal. The uuid `id` stays (the webhook id) without
 * an index: nothing looks an event up by it.
 */
export class EventTransactions1763700002640 implements MigrationInterface {
  name = 'EventTransactions1763700002640';

  async up(q: QueryRunner): Promise<void> {
    // Number whatever the old sequencer had not numbered yet, as it would have.
    await q.query(`
      WITH pending AS (SELECT id, row_number() OVER (ORDER BY insert_order) AS rn FROM events WHERE sequence IS NULL),
           counter AS (UPDATE event_feed_state SET last_sequence = last_sequence + (SELECT count(*) FROM pending)
                        RETURNING last_sequence - (SELECT count(*) FROM pending) AS base)
      UPDATE events e SET sequence = counter.base + pending.rn FROM pending, counter WHERE e.id = pending.id`);
    await q.query(`
      CREATE TABLE event_transactions (
        tx bigint PRIMARY KEY,
        first_sequence bigint NOT NULL,
        last_sequence bigint NOT NULL,
        at timestamptz NOT NULL,
        CHECK (last_sequence >= first_sequence)
      )`);
    await q.query(`INSERT INTO event_transactions (tx, first_sequence, last_sequence, at) SELECT -sequence, sequence, sequence, occurred_at FROM events`);
    await q.query(`CREATE UNIQUE INDEX event_transactions_last_uq ON event_transactions (last_sequence)`);
    await q.query(`ALTER TABLE events ADD COLUMN tx bigint`);
    await q.query(`UPDATE events SET tx = -sequence`);
    await q.query(`ALTER TABLE events ALTER COLUMN tx SET NOT NULL, ALTER COLUMN tx SET DEFAULT (pg_current_xact_id()::text::bigint)`);
    await q.query(`ALTER TABLE events DROP CONSTRAINT events_pkey`);
    await q.query(`DROP INDEX events_sequence_uq, events_unsequenced_idx, events_type_sequence_idx`);
    await q.query(`ALTER TABLE events DROP COLUMN sequence`);
    await q.query(`ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (tx, insert_order)`);
    await q.query(`ALTER TABLE event_feed_state ADD COLUMN snap pg_snapshot`);
    await q.query(`UPDATE event_feed_state SET snap = pg_current_snapshot()`);
    await q.query(`ALTER TABLE event_feed_state ALTER COLUMN snap SET NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE event_feed_state DROP COLUMN snap`);
    await q.query(`ALTER TABLE events ADD COLUMN sequence bigint`);
    await q.query(`
      UPDATE events e SET sequence = t.first_sequence + r.rn - 1
        FROM (SELECT tx, insert_order, row_number() OVER (PARTITION BY tx ORDER BY insert_order) AS rn FROM events) r, event_transactions t
       WHERE r.tx = e.tx AND r.insert_order = e.insert_order AND t.tx = e.tx`);
    await q.query(`ALTER TABLE events DROP CONSTRAINT events_pkey`);
    await q.query(`ALTER TABLE events DROP COLUMN tx`);
    await q.query(`ALTER TABLE events ADD PRIMARY KEY (id)`);
    await q.query(`CREATE UNIQUE INDEX events_sequence_uq ON events (sequence) WHERE sequence IS NOT NULL`);
    await q.query(`CREATE INDEX events_unsequenced_idx ON events (insert_order) WHERE sequence IS NULL`);
    await q.query(`CREATE INDEX events_type_sequence_idx ON events (type, sequence) WHERE sequence IS NOT NULL`);
    await q.query(`DROP TABLE event_transactions`);
  }
}
