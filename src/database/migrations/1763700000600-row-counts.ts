import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Exact row counts without scanning: `total` of an unfiltered list at a million rows would
 * otherwise cost a full count. Statement-level triggers add each statement's inserted or deleted
 * row count to one of 16 shard rows (chosen by backend, so concurrent writers rarely share one);
 * the total is the sum of the shards, exact and transactional like any other row.
 */
export class RowCounts1763700000600 implements MigrationInterface {
  name = 'RowCounts1763700000600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE row_counts (
        table_name text NOT NULL,
        shard      smallint NOT NULL,
        n          bigint NOT NULL,
        PRIMARY KEY (table_name, shard)
      )`);
    await q.query(`
      CREATE FUNCTION row_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE delta bigint;
      BEGIN
        IF TG_OP = 'INSERT' THEN SELECT count(*) INTO delta FROM new_rows;
        ELSE SELECT -count(*) INTO delta FROM old_rows;
        END IF;
        IF delta <> 0 THEN
          INSERT INTO row_counts (table_name, shard, n) VALUES (TG_TABLE_NAME, pg_backend_pid() % 16, delta)
          ON CONFLICT (table_name, shard) DO UPDATE SET n = row_counts.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
      END $$`);
    for (const table of ['contacts']) {
      await q.query(`INSERT INTO row_counts (table_name, shard, n) SELECT '${table}', 0, count(*) FROM ${table}`);
      await q.query(
        `CREATE TRIGGER ${table}_count_ins AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counts_track()`,
      );
      await q.query(
        `CREATE TRIGGER ${table}_count_del AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counts_track()`,
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER IF EXISTS contacts_count_ins ON contacts`);
    await q.query(`DROP TRIGGER IF EXISTS contacts_count_del ON contacts`);
    await q.query(`DROP FUNCTION IF EXISTS row_counts_track()`);
    await q.query(`DROP TABLE IF EXISTS row_counts`);
  }
}
