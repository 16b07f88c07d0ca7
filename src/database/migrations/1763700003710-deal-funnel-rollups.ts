import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The funnel without window functions over every ledger row of the window (README "Pipelines",
 * bench/RESULTS.md "Wave 10"): at 10M ledger rows a 90-day funnel read 1.2M rows and their deals'
 * histories (~10 s).
 *
 * - deal_stage_changes gains what the funnel derived per row from the deal's later rows, written
 *   by a statement trigger whenever a deal's ledger gains (or loses) rows: left_at and
 *   next_stage_id (the deal's next row, in (at, id) order: the end of this stay and where it went)
 *   and later_stage_ids (the distinct stages of all the deal's later rows). A stage change updates
 *   the previous row and the earlier rows that had not yet seen the new stage (a deal has few rows).
 *   The reports map stage ids to the pipeline's current types and order at read time, so renaming,
 *   reordering or retyping stages needs no rewrite.
 * - deal_funnel_days: per (pipeline, UTC day of `at`, stage, next stage (0: not left yet), later
 *   stages) the number of ledger rows; deal_stay_buckets: per (pipeline, day, stage, bucket) the
 *   number of finished stays whose length in seconds falls in the bucket (sf_stay_bucket: powers
 *   of 1.1, so a bucket's geometric middle is within 4.9% of any stay in it). Both are a function of
 *   the ledger's rows, kept by statement triggers on deal_stage_changes (insert, update, delete)
 *   in the writing transaction, each delta on one of 8 shard rows chosen by backend (as
 *   broadcast_message_counts).
 *
 * Backfill: the ledger is rebuilt once with the three columns computed (writes are blocked
 * meanwhile: SHARE lock), which at 10M rows is faster than updating 9M rows in place and leaves
 * no dead rows; then both rollups are grouped from it.
 */
export class DealFunnelRollups1763700003710 implements MigrationInterface {
  name = 'DealFunnelRollups1763700003710';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION sf_int_set(int[]) RETURNS int[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
      $$ SELECT ARRAY(SELECT DISTINCT u FROM unnest($1) u WHERE u IS NOT NULL ORDER BY u) $$`);
    await q.query(`
      CREATE FUNCTION sf_stay_bucket(seconds float8) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
      $$ SELECT CASE WHEN seconds < 1 THEN -1 ELSE floor(ln(seconds) / ln(1.1))::smallint END $$`);

    // The rebuilt ledger, its rows linked as the trigger below links them.
    await q.query(`LOCK TABLE deal_stage_changes IN SHARE MODE`);
    await q.query(`
      CREATE TABLE deal_stage_changes_linked AS
      SELECT id, deal_id, pipeline_id, from_stage_id, to_stage_id, at, by, value, probability, left_at, next_stage_id,
             sf_int_set(later) AS later_stage_ids
      FROM (
        SELECT c.*, lead(c.at) OVER w AS left_at, lead(c.to_stage_id) OVER w AS next_stage_id,
               array_agg(c.to_stage_id) OVER (w ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
        FROM deal_stage_changes c
        WINDOW w AS (PARTITION BY c.deal_id ORDER BY c.at, c.id)
      ) x`);
    await q.query(`ALTER SEQUENCE deal_stage_changes_id_seq OWNED BY NONE`);
    await q.query(`DROP TABLE deal_stage_changes`);
    await q.query(`ALTER TABLE deal_stage_changes_linked RENAME TO deal_stage_changes`);
    await q.query(`
      ALTER TABLE deal_stage_changes
        ALTER COLUMN id SET DEFAULT nextval('deal_stage_changes_id_seq'),
        ALTER COLUMN id SET NOT NULL, ALTER COLUMN deal_id SET NOT NULL, ALTER COLUMN pipeline_id SET NOT NULL,
        ALTER COLUMN to_stage_id SET NOT NULL, ALTER COLUMN at SET NOT NULL, ALTER COLUMN value SET NOT NULL,
        ALTER COLUMN probability SET NOT NULL,
        ALTER COLUMN later_stage_ids SET DEFAULT '{}', ALTER COLUMN later_stage_ids SET NOT NULL`);
    await q.query(`ALTER SEQUENCE deal_stage_changes_id_seq OWNED BY deal_stage_changes.id`);
    await q.query(`ALTER TABLE deal_stage_changes ADD CONSTRAINT deal_stage_changes_pkey PRIMARY KEY (id)`);
    await q.query(`ALTER TABLE deal_stage_changes ADD CONSTRAINT deal_stage_changes_deal_id_fkey FOREIGN KEY (deal_id) REFERENCES deals(id) ON DELETE CASCADE`);
    await q.query(`CREATE INDEX deal_stage_changes_deal_idx ON deal_stage_changes (deal_id, at, id) INCLUDE (pipeline_id, to_stage_id, value, probability)`);
    await q.query(`CREATE INDEX deal_stage_changes_pipeline_at_idx ON deal_stage_changes (pipeline_id, at) INCLUDE (deal_id)`);

    // Links the rows of the deals a statement touched: the rows whose derived columns changed are updated.
    const link = (rows: string) => `
          WITH linked AS (
            SELECT x.id, x.left_at, x.next_stage_id, sf_int_set(x.later) AS later_stage_ids
            FROM (
              SELECT c.id, lead(c.at) OVER w AS left_at, lead(c.to_stage_id) OVER w AS next_stage_id,
                     array_agg(c.to_stage_id) OVER (w ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
              FROM deal_stage_changes c WHERE c.deal_id IN (SELECT DISTINCT deal_id FROM ${rows})
              WINDOW w AS (PARTITION BY c.deal_id ORDER BY c.at, c.id)
            ) x
          )
          UPDATE deal_stage_changes c SET left_at = l.left_at, next_stage_id = l.next_stage_id, later_stage_ids = l.later_stage_ids
          FROM linked l
          WHERE c.id = l.id
            AND (c.left_at IS DISTINCT FROM l.left_at OR c.next_stage_id IS DISTINCT FROM l.next_stage_id OR c.later_stage_ids <> l.later_stage_ids);`;
    await q.query(`
      CREATE FUNCTION deal_stage_changes_link() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          ${link('new_rows')}
        ELSE
          ${link('old_rows')}
        END IF;
        RETURN NULL;
      END $$`);

    await q.query(`
      CREATE TABLE deal_funnel_days (
        pipeline_id     integer NOT NULL,
        day             date NOT NULL,
        stage_id        integer NOT NULL,
        next_stage_id   integer NOT NULL,
        later_stage_ids integer[] NOT NULL,
        shard           smallint NOT NULL,
        entries         bigint NOT NULL,
        PRIMARY KEY (pipeline_id, day, stage_id, next_stage_id, later_stage_ids, shard)
      )`);
    await q.query(`
      CREATE TABLE deal_stay_buckets (
        pipeline_id integer NOT NULL,
        day         date NOT NULL,
        stage_id    integer NOT NULL,
        bucket      smallint NOT NULL,
        shard       smallint NOT NULL,
        stays       bigint NOT NULL,
        PRIMARY KEY (pipeline_id, day, stage_id, bucket, shard)
      )`);
    const entries = (rows: string, sign: 1 | -1) =>
      `SELECT r.pipeline_id, (r.at AT TIME ZONE 'UTC')::date AS day, r.to_stage_id AS stage_id, COALESCE(r.next_stage_id, 0) AS next_stage_id,
              r.later_stage_ids, ${sign} AS n FROM ${rows} r`;
    const stays = (rows: string, sign: 1 | -1) =>
      `SELECT r.pipeline_id, (r.at AT TIME ZONE 'UTC')::date AS day, r.to_stage_id AS stage_id,
              sf_stay_bucket(extract(epoch FROM r.left_at - r.at)::float8) AS bucket, ${sign} AS n FROM ${rows} r WHERE r.left_at IS NOT NULL`;
    const applyEntries = (source: string) => `
          INSERT INTO deal_funnel_days (pipeline_id, day, stage_id, next_stage_id, later_stage_ids, shard, entries)
          SELECT d.pipeline_id, d.day, d.stage_id, d.next_stage_id, d.later_stage_ids, pg_backend_pid() % 8, sum(d.n)
          FROM (${source}) d GROUP BY 1, 2, 3, 4, 5 HAVING sum(d.n) <> 0 ORDER BY 1, 2, 3, 4, 5
          ON CONFLICT (pipeline_id, day, stage_id, next_stage_id, later_stage_ids, shard) DO UPDATE SET entries = deal_funnel_days.entries + EXCLUDED.entries;`;
    const applyStays = (source: string) => `
          INSERT INTO deal_stay_buckets (pipeline_id, day, stage_id, bucket, shard, stays)
          SELECT d.pipeline_id, d.day, d.stage_id, d.bucket, pg_backend_pid() % 8, sum(d.n)
          FROM (${source}) d GROUP BY 1, 2, 3, 4 HAVING sum(d.n) <> 0 ORDER BY 1, 2, 3, 4
          ON CONFLICT (pipeline_id, day, stage_id, bucket, shard) DO UPDATE SET stays = deal_stay_buckets.stays + EXCLUDED.stays;`;
    await q.query(`
      CREATE FUNCTION deal_funnel_track() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          ${applyEntries(entries('new_rows', 1))}
          ${applyStays(stays('new_rows', 1))}
        ELSIF TG_OP = 'DELETE' THEN
          ${applyEntries(entries('old_rows', -1))}
          ${applyStays(stays('old_rows', -1))}
        ELSE
          ${applyEntries(`${entries('old_rows', -1)} UNION ALL ${entries('new_rows', 1)}`)}
          ${applyStays(`${stays('old_rows', -1)} UNION ALL ${stays('new_rows', 1)}`)}
        END IF;
        RETURN NULL;
      END $$`);
    await q.query(`
      INSERT INTO deal_funnel_days (pipeline_id, day, stage_id, next_stage_id, later_stage_ids, shard, entries)
      SELECT d.pipeline_id, d.day, d.stage_id, d.next_stage_id, d.later_stage_ids, 0, sum(d.n) FROM (${entries('deal_stage_changes', 1)}) d GROUP BY 1, 2, 3, 4, 5`);
    await q.query(`
      INSERT INTO deal_stay_buckets (pipeline_id, day, stage_id, bucket, shard, stays)
      SELECT d.pipeline_id, d.day, d.stage_id, d.bucket, 0, sum(d.n) FROM (${stays('deal_stage_changes', 1)}) d GROUP BY 1, 2, 3, 4`);

    await q.query(
      `CREATE TRIGGER deal_stage_changes_link_ins AFTER INSERT ON deal_stage_changes REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_stage_changes_link()`,
    );
    await q.query(
      `CREATE TRIGGER deal_stage_changes_link_del AFTER DELETE ON deal_stage_changes REFERENCING OLD TABLE AS old_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_stage_changes_link()`,
    );
    await q.query(
      `CREATE TRIGGER deal_stage_changes_funnel_ins AFTER INSERT ON deal_stage_changes REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_funnel_track()`,
    );
    await q.query(
      `CREATE TRIGGER deal_stage_changes_funnel_upd AFTER UPDATE ON deal_stage_changes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_funnel_track()`,
    );
    await q.query(
      `CREATE TRIGGER deal_stage_changes_funnel_del AFTER DELETE ON deal_stage_changes REFERENCING OLD TABLE AS old_rows
       FOR EACH STATEMENT EXECUTE FUNCTION deal_funnel_track()`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['link_ins', 'link_del', 'funnel_ins', 'funnel_upd', 'funnel_del'])
      await q.query(`DROP TRIGGER IF EXISTS deal_stage_changes_${t} ON deal_stage_changes`);
    await q.query(`DROP FUNCTION IF EXISTS deal_funnel_track()`);
    await q.query(`DROP FUNCTION IF EXISTS deal_stage_changes_link()`);
    await q.query(`DROP TABLE IF EXISTS deal_stay_buckets`);
    await q.query(`DROP TABLE IF EXISTS deal_funnel_days`);
    await q.query(`ALTER TABLE deal_stage_changes DROP COLUMN left_at, DROP COLUMN next_stage_id, DROP COLUMN later_stage_ids`);
    await q.query(`DROP FUNCTION IF EXISTS sf_stay_bucket(float8)`);
    await q.query(`DROP FUNCTION IF EXISTS sf_int_set(int[])`);
  }
}
