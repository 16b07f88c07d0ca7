import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The tracked-event stream's consumers (src/tracking/tracked-event-queue.repository.ts):
 *
 * - `tracked_event_interest`: per consumer ('scoring', 'workflows', ...), the event names it acts on
 *   (`*` for every name), kept by that consumer as its rules and workflows change.
 * - `tracked_event_queue`: one row per attributed track event and interested consumer, written by the
 *   intake in the transaction that stores the event (and by an identify that attributes anonymous
 *   events), deleted by the consumer in the transaction that applies it: exactly once, durable, and
 *   events no consumer wants cost one join against an empty table.
 */
export class TrackedEventQueue1763700003150 implements MigrationInterface {
  name = 'TrackedEventQueue1763700003150';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tracked_event_interest (
        consumer text NOT NULL,
        name     text NOT NULL,
        PRIMARY KEY (consumer, name)
      )`);
    await q.query(`CREATE INDEX tracked_event_interest_name_idx ON tracked_event_interest (name)`);
    await q.query(`
      CREATE TABLE tracked_event_queue (
        id          bigserial PRIMARY KEY,
        consumer    text NOT NULL,
        event_id    bigint NOT NULL,
        occurred_at timestamptz NOT NULL,
        queued_at   timestamptz NOT NULL
      )`);
    await q.query(`CREATE INDEX tracked_event_queue_consumer_idx ON tracked_event_queue (consumer, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE tracked_event_queue`);
    await q.query(`DROP TABLE tracked_event_interest`);
  }
}
