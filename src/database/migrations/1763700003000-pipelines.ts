import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Deal pipelines (README "Pipelines"): ordered stages with a probability and a type, every deal in
 * one stage of one pipeline, and the stage ledger every move appends to.
 *
 * - pipelines: at most one default (pipelines_default_key). strict_stages: whether writing an
 *   unknown stage name to a deal is a 400 (pipelines created through the API) or adds the stage
 *   (the default pipeline this migration creates, so that clients writing free-text stages keep working).
 * - pipeline_stages: a removed stage keeps its row (removed_at set) so that the ledger's history
 *   still names it; names are unique among a pipeline's current stages.
 * - deals.pipeline_id / stage_id / entered_stage_at: where the deal is and since when. deals.stage
 *   keeps the stage's name (the search index and the free-text contract read it); deals.probability
 *   is the deal's own value, null meaning "the stage's"; deals.status follows the stage's type.
 * - deal_stage_changes: append-only, one row per stage change (creation included, from_stage_id
 *   null), written in the transaction of the change. No foreign key on the stage ids (the history
 *   outlives a deleted pipeline); rows go with their deal.
 *
 * Existing deals: one default pipeline "Sales" (strict_stages false) with a stage per distinct
 * stage value. A stage used only by won deals is a won stage, only by lost deals a lost stage,
 * otherwise an open one; stages "Won" and "Lost" are added when no stage has that type, and "New"
 * when no stage is open. A deal goes to the stage of its name when the stage's type is its status;
 * otherwise (no stage, or e.g. a won deal whose stage is open) to the first stage of its status's
 * type. Each deal gets one ledger row at its creation time.
 */
export class Pipelines1763700003000 implements MigrationInterface {
  name = 'Pipelines1763700003000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE pipelines (
        id               serial PRIMARY KEY,
        name             text NOT NULL,
        is_default       boolean NOT NULL DEFAULT false,
        strict_stages    boolean NOT NULL DEFAULT true,
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL DEFAULT now(),
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX pipelines_default_key ON pipelines (is_default) WHERE is_default`);
    for (const col of ['name', 'created_at', 'modified_at']) await q.query(`CREATE INDEX pipelines_${col}_idx ON pipelines (${col}, id)`);
    await q.query(`CREATE INDEX pipelines_search_trgm ON pipelines USING gin (sf_text(name) gin_trgm_ops)`);
    await q.query(`CREATE INDEX pipelines_changed_at_idx ON pipelines ((COALESCE(modified_at, created_at)))`);
    await q.query(`
      CREATE TABLE pipeline_stages (
        id          serial PRIMARY KEY,
        pipeline_id integer NOT NULL CONSTRAINT pipeline_stages_pipeline_id_fkey REFERENCES pipelines(id) ON DELETE CASCADE,
        name        text NOT NULL,
        position    integer NOT NULL,
        probability integer NOT NULL CONSTRAINT pipeline_stages_probability_check CHECK (probability BETWEEN 0 AND 100),
        type        text NOT NULL CONSTRAINT pipeline_stages_type_check CHECK (type IN ('open', 'won', 'lost')),
        removed_at  timestamptz NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX pipeline_stages_name_key ON pipeline_stages (pipeline_id, name) WHERE removed_at IS NULL`);
    await q.query(`CREATE INDEX pipeline_stages_pipeline_idx ON pipeline_stages (pipeline_id, position, id)`);

    await q.query(`
      ALTER TABLE deals
        ADD COLUMN pipeline_id integer NULL CONSTRAINT deals_pipeline_id_fkey REFERENCES pipelines(id),
        ADD COLUMN stage_id integer NULL CONSTRAINT deals_stage_id_fkey REFERENCES pipeline_stages(id),
        ADD COLUMN entered_stage_at timestamptz NULL`);
    await q.query(`
      CREATE TABLE deal_stage_changes (
        id            bigserial PRIMARY KEY,
        deal_id       integer NOT NULL CONSTRAINT deal_stage_changes_deal_id_fkey REFERENCES deals(id) ON DELETE CASCADE,
        pipeline_id   integer NOT NULL,
        from_stage_id integer NULL,
        to_stage_id   integer NOT NULL,
        at            timestamptz NOT NULL,
        by            integer NULL,
        value         numeric(14,2) NOT NULL,
        probability   integer NOT NULL
      )`);

    await this.moveExistingDeals(q);

    await q.query(`ALTER TABLE deals ALTER COLUMN pipeline_id SET NOT NULL, ALTER COLUMN stage_id SET NOT NULL, ALTER COLUMN entered_stage_at SET NOT NULL`);
    // A deal inserted without a stage by SQL of its own (a seed, a test's arrangement, a restore) lands where the API would put
    // it: the default pipeline (unless given), the stage of its name and status there, else the first stage of its status.
    // The API always sets the columns, so the trigger's body is one test for it.
    await q.query(`
      CREATE FUNCTION deals_default_placement() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        found_id integer;
        found_name text;
      BEGIN
        IF NEW.stage_id IS NULL THEN
          IF NEW.pipeline_id IS NULL THEN
            SELECT id INTO NEW.pipeline_id FROM pipelines WHERE is_default;
          END IF;
          SELECT s.id, s.name INTO found_id, found_name FROM pipeline_stages s
           WHERE s.pipeline_id = NEW.pipeline_id AND s.removed_at IS NULL AND s.type = NEW.status
           ORDER BY (s.name IS NOT DISTINCT FROM NEW.stage) DESC, s.position, s.id LIMIT 1;
          NEW.stage_id := found_id;
          NEW.stage := found_name;
        END IF;
        IF NEW.entered_stage_at IS NULL THEN
          NEW.entered_stage_at := COALESCE(NEW.created_at, now());
        END IF;
        RETURN NEW;
      END $$`);
    await q.query(`CREATE TRIGGER deals_default_placement BEFORE INSERT ON deals FOR EACH ROW EXECUTE FUNCTION deals_default_placement()`);
    // The deals list's pipeline.id / stage.id filters, a stage's deals (moves, removal), the forecast (open deals by expected close date)
    // and the snapshot (deals by the time they entered their stage).
    await q.query(`CREATE INDEX deals_pipeline_stage_idx ON deals (pipeline_id, stage_id, id)`);
    await q.query(`CREATE INDEX deals_stage_idx ON deals (stage_id, id)`);
    await q.query(
      `CREATE INDEX deals_forecast_idx ON deals (pipeline_id, expected_close_date) INCLUDE (value, probability, stage_id, owner_id, company_id) WHERE status = 'open'`,
    );
    await q.query(`CREATE INDEX deals_entered_stage_idx ON deals (entered_stage_at, id)`);
    await q.query(
      `CREATE INDEX deals_pipeline_entered_idx ON deals (pipeline_id, entered_stage_at) INCLUDE (stage_id, value, probability, owner_id, company_id)`,
    );
    // Contacts' and companies' deals.status / deals.stage.id conditions.
    await q.query(`CREATE INDEX deals_contact_status_idx ON deals (contact_id, status, stage_id)`);
    await q.query(`CREATE INDEX deals_company_status_idx ON deals (company_id, status, stage_id) WHERE company_id IS NOT NULL`);
    // The ledger: a deal's history (and its row at an instant, for the snapshot); a pipeline's entries in a window (the funnel).
    await q.query(`CREATE INDEX deal_stage_changes_deal_idx ON deal_stage_changes (deal_id, at, id) INCLUDE (pipeline_id, to_stage_id, value, probability)`);
    await q.query(`CREATE INDEX deal_stage_changes_pipeline_at_idx ON deal_stage_changes (pipeline_id, at) INCLUDE (deal_id)`);
  }

  private async moveExistingDeals(q: QueryRunner): Promise<void> {
    const [{ id: pipelineId }] = (await q.query(`INSERT INTO pipelines (name, is_default, strict_stages) VALUES ('Sales', true, false) RETURNING id`)) as {
      id: number;
    }[];
    // One stage per distinct stage value: won (or lost) when only won (or lost) deals use it, else open.
    await q.query(
      `WITH used AS (
         SELECT stage AS name,
                CASE WHEN bool_and(status = 'won') THEN 'won' WHEN bool_and(status = 'lost') THEN 'lost' ELSE 'open' END AS type,
                round(avg(probability))::int AS avg_probability
         FROM deals WHERE stage IS NOT NULL AND stage <> '' GROUP BY stage)
       INSERT INTO pipeline_stages (pipeline_id, name, position, probability, type)
       SELECT $1, name, (row_number() OVER (ORDER BY CASE type WHEN 'open' THEN 0 WHEN 'won' THEN 1 ELSE 2 END, avg_probability NULLS LAST, name)) * 10,
              COALESCE(avg_probability, CASE type WHEN 'won' THEN 100 ELSE 0 END), type
       FROM used`,
      [pipelineId],
    );
    // A stage of each type the pipeline lacks: New first, Won and Lost last.
    for (const [type, name, position, probability] of [
      ['open', 'New', 0, 10],
      ['won', 'Won', 1_000_000, 100],
      ['lost', 'Lost', 1_000_001, 0],
    ] as const) {
      await q.query(
        `INSERT INTO pipeline_stages (pipeline_id, name, position, probability, type)
         SELECT $1, $2 || CASE WHEN EXISTS (SELECT 1 FROM pipeline_stages WHERE pipeline_id = $1 AND name = $2) THEN ' (' || $3 || ')' ELSE '' END, $4, $5, $3
         WHERE NOT EXISTS (SELECT 1 FROM pipeline_stages WHERE pipeline_id = $1 AND type = $3)`,
        [pipelineId, name, type, position, probability],
      );
    }
    // Positions 0, 1, 2, ... in stage order.
    await q.query(
      `UPDATE pipeline_stages s SET position = o.n - 1
       FROM (SELECT id, row_number() OVER (ORDER BY position, id) AS n FROM pipeline_stages WHERE pipeline_id = $1) o WHERE o.id = s.id`,
      [pipelineId],
    );
    await q.query(
      `UPDATE deals d SET pipeline_id = $1, stage_id = COALESCE(
         (SELECT s.id FROM pipeline_stages s WHERE s.pipeline_id = $1 AND s.name = d.stage AND s.type = d.status),
         (SELECT s.id FROM pipeline_stages s WHERE s.pipeline_id = $1 AND s.type = d.status ORDER BY s.position, s.id LIMIT 1)),
         entered_stage_at = d.created_at`,
      [pipelineId],
    );
    await q.query(`UPDATE deals d SET stage = s.name FROM pipeline_stages s WHERE s.id = d.stage_id AND d.stage IS DISTINCT FROM s.name`);
    await q.query(
      `INSERT INTO deal_stage_changes (deal_id, pipeline_id, from_stage_id, to_stage_id, at, by, value, probability)
       SELECT d.id, d.pipeline_id, NULL, d.stage_id, d.entered_stage_at, d.created_by, d.value, COALESCE(d.probability, s.probability)
       FROM deals d JOIN pipeline_stages s ON s.id = d.stage_id ORDER BY d.id`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER deals_default_placement ON deals`);
    await q.query(`DROP FUNCTION deals_default_placement()`);
    await q.query(`DROP TABLE deal_stage_changes`);
    for (const index of ['deals_contact_status_idx', 'deals_company_status_idx']) await q.query(`DROP INDEX IF EXISTS ${index}`);
    await q.query(`ALTER TABLE deals DROP COLUMN entered_stage_at, DROP COLUMN stage_id, DROP COLUMN pipeline_id`);
    await q.query(`DROP TABLE pipeline_stages`);
    await q.query(`DROP TABLE pipelines`);
  }
}
