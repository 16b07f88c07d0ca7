import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The forecast without reading every open deal of the window (README "Pipelines", bench/RESULTS.md
 * "Wave 10"): 12 months at 1M deals read ~200k index entries per request (p99 1.9 s at 4
 * connections). deal_forecast_months holds, per (pipeline, month of the expected close date,
 * stage, owner), the open deals' count, value, Σ value × own probability and Σ value of the deals
 * without one (weighted at read time by the stage's current probability). The forecast reads the
 * whole months of its window here and the partial months at its ends from deals_forecast_idx;
 * with a company filter it reads the index only.
 *
 * Kept as deal_stage_totals is: statement-level triggers on deals, one of 8 shard rows per key
 * chosen by backend, rows locked in key order within a statement. owner_id 0 stands for "none".
 */
export class DealForecastMonths1763700003720 implements MigrationInterface {
  name = 'DealForecastMonths1763700003720';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE deal_forecast_months (
        pipeline_id  integer NOT NULL,
        month        date NOT NULL,
        stage_id     integer NOT NULL,
        owner_id     integer NOT NULL,
        shard        smallint NOT NULL,
        deals        bigint NOT NULL,
        value        numeric NOT NULL,
        own_weighted numeric NOT NULL,
        stage_weighted_value numeric NOT NULL,
        PRIMARY KEY (pipeline_id, month, stage_id, owner_id, shard)
      )`);
    const delta = (rows: string, sign: 1 | -1) =>
      `SELECT r.pipeline_id, date_trunc('month', r.expected_close_date::timestamp)::date AS month, r.stage_id, COALESCE(r.owner_id, 0) AS owner_id, ${sign} AS deals,
              ${sign} * r.value AS value, ${sign} * COALESCE(r.value * r.probability, 0) AS own_weighted,
              ${sign} * CASE WHEN r.probability IS NULL THEN r.value ELSE 0 END AS stage_weighted_value
       FROM ${rows} r
       WHERE r.status = 'open' AND r.expected_close_date IS NOT NULL AND r.pipeline_id IS NOT NULL AND r.stage_id IS NOT NULL`;
    const apply = (source: string) => `
          INSERT INTO deal_forecast_months (pipeline_id, month, stage_id, owner_id, shard, deals, value, own_weighted, stage_weighted_value)
          SELECT d.pipeline_id, d.month, d.stage_id, d.owner_id, pg_backend_pid() % 8, sum(d.deals), sum(d.value), sum(d.own_weighted), sum(d.stage_weighted_value)
          FROM (${source}) d
          GROUP BY 1, 2, 3, 4
          HAVING sum(d.deals) <> 0 OR sum(d.value) <> 0 OR sum(d.own_weighted) <> 0 OR sum(d.stage_weighted_value) <> 0
          ORDER BY 1, 2, 3, 4
          ON CONFLICT (pipeline_id, month, stage_id, owner_id, shard) DO UPDATE SET
            deals = deal_forecast_months.deals + EXCLUDED.deals,
            value = deal_forecast_months.value + EXCLUDED.value,
            own_weighted = deal_forecast_months.own_weighted + EXCLUDED.own_weighted,
            stage_weighted_value = deal_forecast_months.stage_weighted_value + EXCLUDED.stage_weighted_value;`;
    await q.query(`
      CREATE FUNCTION deal_forecast_months_track() RETURNS trigger LANGUAGE plpgsql AS $$
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
      INSERT INTO deal_forecast_months (pipeline_id, month, stage_id, owner_id, shard, deals, value, own_weighted, stage_weighted_value)
      SELECT d.pipeline_id, d.month, d.stage_id, d.owner_id, 0, sum(d.deals), sum(d.value), sum(d.own_weighted), sum(d.stage_weighted_value)
      FROM (${delta('deals', 1)}) d GROUP BY 1, 2, 3, 4`);
    await q.query(
      `CREATE TRIGGER deals_forecast_months_ins AFTER INSERT ON deals REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION deal_forecast_months_track()`,
    );
    await q.query(
      `CREATE TRIGGER deals_forecast_months_upd AFTER UPDATE ON deals REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_forecast_months_track()`,
    );
    await q.query(
      `CREATE TRIGGER deals_forecast_months_del AFTER DELETE ON deals REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION deal_forecast_months_track()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['ins', 'upd', 'del']) await q.query(`DROP TRIGGER IF EXISTS deals_forecast_months_${t} ON deals`);
    await q.query(`DROP FUNCTION IF EXISTS deal_forecast_months_track()`);
    await q.query(`DROP TABLE IF EXISTS deal_forecast_months`);
  }
}
