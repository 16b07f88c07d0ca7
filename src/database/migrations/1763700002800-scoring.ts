import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Lead scoring (README "Lead scoring"):
 *
 * - `contacts.points`: the sum of the contact's ledger rows, kept in the same transaction as each row
 *   (never written otherwise); indexed for the filter and orderBy.
 * - `point_ledger`: every change of points, append-only (a trigger refuses UPDATE; rows go only with
 *   their contact). Unique keys make rule applications exactly once per (rule, source event) and
 *   decay exactly once per (contact, period).
 * - `scoring_rules`: rules on a change-feed event type or a tracked event name.
 * - `scoring_state`: one row, the feed position up to which rules were applied (it starts at the
 *   feed's current position), the decay settings, their version and the last decay period done.
 * - `scoring_jobs`: recompute and what-if runs with their progress and result.
 */
export class Scoring1763700002800 implements MigrationInterface {
  name = 'Scoring1763700002800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE contacts ADD COLUMN points integer NOT NULL DEFAULT 0`);
    await q.query(`CREATE INDEX contacts_points_idx ON contacts (points, id)`);
    await q.query(`
      CREATE TABLE point_ledger (
        id              bigserial PRIMARY KEY,
        contact_id      integer NOT NULL CONSTRAINT point_ledger_contact_id_fkey REFERENCES contacts(id) ON DELETE CASCADE,
        delta           integer NOT NULL CONSTRAINT point_ledger_delta_check CHECK (delta <> 0),
        reason          text NOT NULL,
        source          text NOT NULL CONSTRAINT point_ledger_source_check CHECK (source IN ('manual', 'rule', 'workflow', 'decay', 'import')),
        rule_id         integer NULL,
        source_event_id text NULL,
        decay_period    text NULL,
        details         jsonb NULL,
        at              timestamptz NOT NULL,
        by_user_id      integer NULL,
        by_user_name    text NULL
      )`);
    await q.query(`CREATE INDEX point_ledger_contact_idx ON point_ledger (contact_id, id)`);
    await q.query(
      `CREATE UNIQUE INDEX point_ledger_rule_event_uq ON point_ledger (rule_id, source_event_id) WHERE rule_id IS NOT NULL AND source_event_id IS NOT NULL`,
    );
    await q.query(`CREATE INDEX point_ledger_rule_contact_idx ON point_ledger (rule_id, contact_id, at) WHERE rule_id IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX point_ledger_decay_uq ON point_ledger (contact_id, decay_period) WHERE decay_period IS NOT NULL`);
    await q.query(`
      CREATE FUNCTION point_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'point_ledger is append-only' USING ERRCODE = 'check_violation', CONSTRAINT = 'point_ledger_append_only';
      END $$`);
    await q.query(`CREATE TRIGGER point_ledger_no_update BEFORE UPDATE ON point_ledger FOR EACH ROW EXECUTE FUNCTION point_ledger_append_only()`);
    await q.query(`
      CREATE TABLE scoring_rules (
        id               serial PRIMARY KEY,
        name             text NOT NULL,
        description      text NULL,
        is_published     boolean NOT NULL DEFAULT true,
        on_kind          text NOT NULL CONSTRAINT scoring_rules_on_kind_check CHECK (on_kind IN ('recordEvent', 'trackedEvent')),
        on_name          text NOT NULL,
        filter           jsonb NULL,
        delta            integer NOT NULL CONSTRAINT scoring_rules_delta_check CHECK (delta <> 0 AND delta BETWEEN -1000000 AND 1000000),
        repeatable       boolean NOT NULL DEFAULT true,
        max_per_contact  integer NULL CONSTRAINT scoring_rules_max_per_contact_check CHECK (max_per_contact >= 1),
        cooldown         text NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL DEFAULT now(),
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    await q.query(`CREATE INDEX scoring_rules_on_idx ON scoring_rules (on_kind, on_name) WHERE is_published`);
    for (const col of ['name', 'created_at', 'modified_at']) await q.query(`CREATE INDEX scoring_rules_${col}_idx ON scoring_rules (${col}, id)`);
    await q.query(`
      CREATE TABLE scoring_state (
        id             boolean PRIMARY KEY DEFAULT true CHECK (id),
        last_sequence  bigint NOT NULL DEFAULT 0,
        applied_at     timestamptz NULL,
        decay          jsonb NULL,
        decay_version  integer NOT NULL DEFAULT 0,
        decay_done     integer NOT NULL DEFAULT 0
      )`);
    await q.query(`INSERT INTO scoring_state (last_sequence) SELECT last_sequence FROM event_feed_state`);
    await q.query(`
      CREATE TABLE scoring_jobs (
        id           serial PRIMARY KEY,
        kind         text NOT NULL CHECK (kind IN ('recompute', 'what_if')),
        status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed', 'failed')),
        request      jsonb NULL,
        progress     jsonb NOT NULL DEFAULT '{}'::jsonb,
        result       jsonb NULL,
        error        text NULL,
        created_by   integer NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        started_at   timestamptz NULL,
        finished_at  timestamptz NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS scoring_jobs`);
    await q.query(`DROP TABLE IF EXISTS scoring_state`);
    await q.query(`DROP TABLE IF EXISTS scoring_rules`);
    await q.query(`DROP TABLE IF EXISTS point_ledger`);
    await q.query(`DROP FUNCTION IF EXISTS point_ledger_append_only()`);
    await q.query(`DROP INDEX IF EXISTS contacts_points_idx`);
    await q.query(`ALTER TABLE contacts DROP COLUMN IF EXISTS points`);
  }
}
