import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The intake's definitions without a hot row (issue 29, intake throughput): every batch used to
 * upsert the `tracked_event_definitions` row of each event name it carried, so concurrent batches of
 * the same names waited for each other's commit on those few rows. A batch now appends its
 * per-name additions to `tracked_definition_deltas` (an insert that never conflicts); they are folded
 * into the definitions by one folder at a time (after intakes, every few seconds, by the hourly
 * partitions job, and before every read of the definitions, so a read sees every committed call).
 */
/**
 * Folds the waiting deltas into the definitions (the rows visible to the statement; a delta
 * committed meanwhile waits for the next fold): counts added, first/last seen widened, observed
 * property types united. Names in order (one folder at a time holds the rows anyway).
 */
export const FOLD_DEFINITIONS_SQL = `
  WITH gone AS (
    DELETE FROM tracked_definition_deltas RETURNING name, count, first_at, last_at, property_types
  ), sums AS (
    SELECT name, sum(count) AS count, min(first_at) AS first_at, max(last_at) AS last_at FROM gone GROUP BY name
  ), types AS (
    SELECT name, jsonb_object_agg(k, true) AS t FROM (SELECT DISTINCT name, jsonb_object_keys(property_types) AS k FROM gone) s GROUP BY name
  )
  INSERT INTO tracked_event_definitions AS d (name, count, first_seen_at, last_seen_at, property_types)
  SELECT s.name, s.count, s.first_at, s.last_at, COALESCE(t.t, '{}'::jsonb) FROM sums s LEFT JOIN types t USING (name) ORDER BY s.name
  ON CONFLICT (name) DO UPDATE
    SET count = d.count + excluded.count, first_seen_at = LEAST(d.first_seen_at, excluded.first_seen_at),
        last_seen_at = GREATEST(d.last_seen_at, excluded.last_seen_at),
        property_types = CASE WHEN excluded.property_types <@ d.property_types THEN d.property_types ELSE d.property_types || excluded.property_types END`;

export class TrackedIntake1763700003500 implements MigrationInterface {
  name = 'TrackedIntake1763700003500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tracked_definition_deltas (
        name           text NOT NULL,
        count          bigint NOT NULL,
        first_at       timestamptz NOT NULL,
        last_at        timestamptz NOT NULL,
        property_types jsonb NOT NULL DEFAULT '{}'::jsonb
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    // Fold what waits before the table goes, so no count is lost.
    await q.query(FOLD_DEFINITIONS_SQL);
    await q.query(`DROP TABLE tracked_definition_deltas`);
  }
}
