import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * A broadcast's message counts by status without counting its messages: GET of a
 * 100,000-recipient broadcast counted 100,000 rows (55–100 ms) on every read while it was sending.
 * Statement-level triggers on text_messages add each statement's changes, grouped by broadcast and
 * status, to one of 8 shard rows (chosen by backend, so concurrent lanes never wait on each other's
 * counter rows); a broadcast's count for a status is the sum of its shards, exact and transactional.
 * Groups of a broadcast that no longer exists are skipped (deleting a broadcast sets its messages'
 * broadcast_id to NULL, and its counter rows go by cascade).
 */
export class BroadcastCounts1763700001800 implements MigrationInterface {
  name = 'BroadcastCounts1763700001800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE broadcast_message_counts (
        broadcast_id integer NOT NULL REFERENCES broadcasts(id) ON DELETE CASCADE,
        status       text NOT NULL,
        shard        smallint NOT NULL,
        n            bigint NOT NULL,
        PRIMARY KEY (broadcast_id, status, shard)
      )`);
    await q.query(`
      CREATE FUNCTION broadcast_message_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        -- Rows in (broadcast, status) order: concurrent statements lock counter rows in one order.
        IF TG_OP = 'INSERT' THEN
          INSERT INTO broadcast_message_counts (broadcast_id, status, shard, n)
          SELECT r.broadcast_id, r.status, pg_backend_pid() % 8, count(*) FROM new_rows r
          WHERE r.broadcast_id IS NOT NULL AND EXISTS (SELECT 1 FROM broadcasts b WHERE b.id = r.broadcast_id)
          GROUP BY 1, 2 ORDER BY 1, 2
          ON CONFLICT (broadcast_id, status, shard) DO UPDATE SET n = broadcast_message_counts.n + EXCLUDED.n;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO broadcast_message_counts (broadcast_id, status, shard, n)
          SELECT r.broadcast_id, r.status, pg_backend_pid() % 8, -count(*) FROM old_rows r
          WHERE r.broadcast_id IS NOT NULL AND EXISTS (SELECT 1 FROM broadcasts b WHERE b.id = r.broadcast_id)
          GROUP BY 1, 2 ORDER BY 1, 2
          ON CONFLICT (broadcast_id, status, shard) DO UPDATE SET n = broadcast_message_counts.n + EXCLUDED.n;
        ELSE
          INSERT INTO broadcast_message_counts (broadcast_id, status, shard, n)
          SELECT d.broadcast_id, d.status, pg_backend_pid() % 8, sum(d.n) FROM (
            SELECT broadcast_id, status, -1 AS n FROM old_rows WHERE broadcast_id IS NOT NULL
            UNION ALL
            SELECT broadcast_id, status, 1 FROM new_rows WHERE broadcast_id IS NOT NULL
          ) d
          WHERE EXISTS (SELECT 1 FROM broadcasts b WHERE b.id = d.broadcast_id)
          GROUP BY 1, 2 HAVING sum(d.n) <> 0 ORDER BY 1, 2
          ON CONFLICT (broadcast_id, status, shard) DO UPDATE SET n = broadcast_message_counts.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
      END $$`);
    await q.query(`
      INSERT INTO broadcast_message_counts (broadcast_id, status, shard, n)
      SELECT broadcast_id, status, 0, count(*) FROM text_messages WHERE broadcast_id IS NOT NULL GROUP BY 1, 2`);
    await q.query(
      `CREATE TRIGGER text_messages_broadcast_counts_ins AFTER INSERT ON text_messages REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION broadcast_message_counts_track()`,
    );
    await q.query(
      `CREATE TRIGGER text_messages_broadcast_counts_upd AFTER UPDATE ON text_messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION broadcast_message_counts_track()`,
    );
    await q.query(
      `CREATE TRIGGER text_messages_broadcast_counts_del AFTER DELETE ON text_messages REFERENCING OLD TABLE AS old_rows
       FOR EACH STATEMENT EXECUTE FUNCTION broadcast_message_counts_track()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['ins', 'upd', 'del']) await q.query(`DROP TRIGGER IF EXISTS text_messages_broadcast_counts_${t} ON text_messages`);
    await q.query(`DROP FUNCTION IF EXISTS broadcast_message_counts_track()`);
    await q.query(`DROP TABLE IF EXISTS broadcast_message_counts`);
  }
}
