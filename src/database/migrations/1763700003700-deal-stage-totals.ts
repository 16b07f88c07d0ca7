import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The snapshot's "deals still in the stage they were in at asOf" without reading every deal of the
 * pipeline (README "Pipelines", bench/RESULTS.md "Wave 10"): at 1M deals the snapshot summed ~1M
 * deal rows per request (~2 s). deal_stage_totals holds, per (pipeline, stage, owner, company), the
 * deals' count, value, Σ value × own probability (deals with a probability of their own) and
 * Σ value (deals without one, weighted at read time by the stage's current probability, so a
 * stage's probability change needs no rewrite). The snapshot subtracts the deals that entered their
 * stage after asOf (deals_pipeline_entered_idx) from these totals.
 *
 * Statement-level triggers on deals add each statement's changes grouped by key to one of 8 shard
 * rows chosen by backend (as broadcast_message_counts does), so concurrent writers rarely wait on
 * one counter row, and rows are locked in key order within a statement. owner_id / company_id 0
 * stand for "none" (ids start at 1). Exact and transactional: the totals are the sum of the shards.
 */
export class DealStageTotals1763700003700 implements MigrationInterface {
  name = 'DealStageTotals1763700003700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE deal_stage_totals (
        pipeline_id  integer NOT NULL,
        stage_id     integer NOT NULL,
        owner_id     integer NOT NULL,
        company_id   integer NOT NULL,
        shard        smallint NOT NULL,
        deals        bigint NOT NULL,
        value        numeric NOT NULL,
        own_weighted numeric NOT NULL,
        stage_weighted_value numeric NOT NULL,
        PRIMARY KEY (pipeline_id, stage_id, owner_id, company_id, shard)
      )`);
    // One delta per key of the statement's old rows (negated) and new rows; keys whose delta is zero are skipped.
    const delta = (rows: string, sign: 1 | -1) =>
      `SELECT r.pipeline_id, r.stage_id, COALESCE(r.owner_id, 0) AS owner_id, COALESCE(r.company_id, 0) AS company_id, ${sign} AS deals,
              ${sign} * r.value AS value, ${sign} * COALESCE(r.value * r.probability, 0) AS own_weighted,
              ${sign} * CASE WHEN r.probability IS NULL THEN r.value ELSE 0 END AS stage_weighted_value
       FROM ${rows} r WHERE r.pipeline_id IS NOT NULL AND r.stage_id IS NOT NULL`;
    const apply = (source: string) => `
          INSERT INTO deal_stage_totals (pipeline_id, stage_id, owner_id, company_id, shard, deals, value, own_weighted, stage_weighted_value)
          SELECT d.pipeline_id, d.stage_id, d.owner_id, d.company_id, pg_backend_pid() % 8, sum(d.deals), sum(d.value), sum(d.own_weighted), sum(d.stage_weighted_value)
          FROM (${source}) d
          GROUP BY 1, 2, 3, 4
          HAVING sum(d.deals) <> 0 OR sum(d.value) <> 0 OR sum(d.own_weighted) <> 0 OR sum(d.stage_weighted_value) <> 0
          ORDER BY 1, 2, 3, 4
          ON CONFLICT (pipeline_id, stage_id, owner_id, company_id, shard) DO UPDATE SET
            deals = deal_stage_totals.deals + EXCLUDED.deals,
            value = deal_stage_totals.value + EXCLUDED.value,
            own_weighted = deal_stage_totals.own_weighted + EXCLUDED.own_weighted,
            stage_weighted_value = deal_stage_totals.stage_weighted_value + EXCLUDED.stage_weighted_value;`;
    await q.query(`
      CREATE FUNCTION deal_stage_totals_track() RETURNS trigger LANGUAGE plpgsql AS $$
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
      INSERT INTO deal_stage_totals (pipeline_id, stage_id, owner_id, company_id, shard, deals, value, own_weighted, stage_weighted_value)
      SELECT d.pipeline_id, d.stage_id, d.owner_id, d.company_id, 0, sum(d.deals), sum(d.value), sum(d.own_weighted), sum(d.stage_weighted_value)
      FROM (${delta('deals', 1)}) d GROUP BY 1, 2, 3, 4`);
    await q.query(
      `CREATE TRIGGER deals_stage_totals_ins AFTER INSERT ON deals REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION deal_stage_totals_track()`,
    );
    await q.query(
      `CREATE TRIGGER deals_stage_totals_upd AFTER UPDATE ON deals REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_stage_totals_track()`,
    );
    await q.query(
      `CREATE TRIGGER deals_stage_totals_del AFTER DELETE ON deals REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION deal_stage_totals_track()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['ins', 'upd', 'del']) await q.query(`DROP TRIGGER IF EXISTS deals_stage_totals_${t} ON deals`);
    await q.query(`DROP FUNCTION IF EXISTS deal_stage_totals_track()`);
    await q.query(`DROP TABLE IF EXISTS deal_stage_totals`);
  }
}
