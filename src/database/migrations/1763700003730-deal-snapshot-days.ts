import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The snapshot's deals that changed stage since `asOf` without one ledger probe per deal (README
 * "Pipelines", bench/RESULTS.md "Wave 10"): 30 days back at 1M deals probed ~38k deals (p99 ~0.5 s
 * at 4 connections). Those deals count in the stay that spanned asOf: the ledger rows with
 * at ≤ asOf < left_at, whose sums are (finished stays that ended after asOf) − (finished stays
 * that began after asOf). deal_snapshot_days holds both per (pipeline, UTC day, stage): edge 0 by
 * the day of `at`, edge 1 by the day of `left_at`, with the count, Σ value and Σ value ×
 * probability recorded on the row; the snapshot reads the days after asOf's day there and asOf's own
 * day from the ledger (deal_stage_changes_pipeline_at_idx and the new deal_stage_changes_pipeline_left_idx).
 *
 * Kept by statement triggers on deal_stage_changes (its rows gain left_at when the deal's next
 * change is linked), one of 8 shard rows per key chosen by backend, as the other report rollups.
 */
export class DealSnapshotDays1763700003730 implements MigrationInterface {
  name = 'DealSnapshotDays1763700003730';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE deal_snapshot_days (
        pipeline_id  integer NOT NULL,
        day          date NOT NULL,
        stage_id     integer NOT NULL,
        edge         smallint NOT NULL,
        shard        smallint NOT NULL,
        stays        bigint NOT NULL,
        value        numeric NOT NULL,
        own_weighted numeric NOT NULL,
        PRIMARY KEY (pipeline_id, day, stage_id, edge, shard)
      )`);
    const delta = (rows: string, sign: 1 | -1) =>
      `SELECT r.pipeline_id, (e.t AT TIME ZONE 'UTC')::date AS day, r.to_stage_id AS stage_id, e.edge, ${sign} AS stays,
              ${sign} * r.value AS value, ${sign} * r.value * r.probability AS own_weighted
       FROM ${rows} r CROSS JOIN LATERAL (VALUES (0::smallint, r.at), (1::smallint, r.left_at)) e(edge, t)
       WHERE r.left_at IS NOT NULL`;
    const apply = (source: string) => `
          INSERT INTO deal_snapshot_days (pipeline_id, day, stage_id, edge, shard, stays, value, own_weighted)
          SELECT d.pipeline_id, d.day, d.stage_id, d.edge, pg_backend_pid() % 8, sum(d.stays), sum(d.value), sum(d.own_weighted)
          FROM (${source}) d
          GROUP BY 1, 2, 3, 4
          HAVING sum(d.stays) <> 0 OR sum(d.value) <> 0 OR sum(d.own_weighted) <> 0
          ORDER BY 1, 2, 3, 4
          ON CONFLICT (pipeline_id, day, stage_id, edge, shard) DO UPDATE SET
            stays = deal_snapshot_days.stays + EXCLUDED.stays,
            value = deal_snapshot_days.value + EXCLUDED.value,
            own_weighted = deal_snapshot_days.own_weighted + EXCLUDED.own_weighted;`;
    await q.query(`
      CREATE FUNCTION deal_snapshot_days_track() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          ${apply(delta('new_rows', 1))}
        ELSIF TG_OP = 'DELETE' THEN
          ${apply(delta('old_rows', -1))}
        ELSE
          ${apply(`${delta('old_rows', -1)} UNION ALL ${delta('new_rows', 1)}`)}
        END IF;
        RETURN NULL;
      END $$`);
    await q.query(`
      INSERT INTO deal_snapshot_days (pipeline_id, day, stage_id, edge, shard, stays, value, own_weighted)
      SELECT d.pipeline_id, d.day, d.stage_id, d.edge, 0, sum(d.stays), sum(d.value), sum(d.own_weighted)
      FROM (${delta('deal_stage_changes', 1)}) d GROUP BY 1, 2, 3, 4`);
    await q.query(
      `CREATE INDEX deal_stage_changes_pipeline_left_idx ON deal_stage_changes (pipeline_id, left_at) INCLUDE (at, to_stage_id, value, probability)
       WHERE left_at IS NOT NULL`,
    );
    for (const [op, refs] of [
      ['INSERT', 'NEW TABLE AS new_rows'],
      ['UPDATE', 'OLD TABLE AS old_rows NEW TABLE AS new_rows'],
      ['DELETE', 'OLD TABLE AS old_rows'],
    ]) {
      await q.query(
        `CREATE TRIGGER deal_stage_changes_snapshot_${op.slice(0, 3).toLowerCase()} AFTER ${op} ON deal_stage_changes REFERENCING ${refs}
         FOR EACH STATEMENT EXECUTE FUNCTION deal_snapshot_days_track()`,
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['ins', 'upd', 'del']) await q.query(`DROP TRIGGER IF EXISTS deal_stage_changes_snapshot_${t} ON deal_stage_changes`);
    await q.query(`DROP FUNCTION IF EXISTS deal_snapshot_days_track()`);
    await q.query(`DROP INDEX IF EXISTS deal_stage_changes_pipeline_left_idx`);
    await q.query(`DROP TABLE IF EXISTS deal_snapshot_days`);
  }
}
