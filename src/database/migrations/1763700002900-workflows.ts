import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Workflows (src/workflows): definitions and their versions, enrollments (one row per contact
 * per entry, durable in PostgreSQL: a waiting enrollment is a row with a due time, claimed by the
 * runner through the partial (next_at) index with FOR UPDATE SKIP LOCKED), the step history, and
 * the trigger follower's cursor over the change feed.
 */
export class Workflows1763700002900 implements MigrationInterface {
  name = 'Workflows1763700002900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE workflows (
        id serial PRIMARY KEY,
        name text NOT NULL,
        description text NULL,
        status text NOT NULL DEFAULT 'draft' CONSTRAINT workflows_status_check CHECK (status IN ('draft', 'active', 'paused', 'archived')),
        version integer NOT NULL DEFAULT 1,
        trigger jsonb NOT NULL,
        steps jsonb NOT NULL,
        settings jsonb NOT NULL,
        schedule_next_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NULL DEFAULT now(),
        created_by integer NULL,
        created_by_user text NULL,
        modified_by integer NULL,
        modified_by_user text NULL
      )`);
    await q.query(`CREATE INDEX workflows_trigger_type_idx ON workflows ((trigger->>'type')) WHERE status = 'active'`);
    await q.query(`
      CREATE TABLE workflow_versions (
        workflow_id integer NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
        version integer NOT NULL,
        trigger jsonb NOT NULL,
        steps jsonb NOT NULL,
        settings jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workflow_id, version)
      )`);
    await q.query(`
      CREATE TABLE workflow_enrollments (
        id bigserial PRIMARY KEY,
        workflow_id integer NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
        version integer NOT NULL,
        contact_id integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        status text NOT NULL DEFAULT 'active'
          CONSTRAINT workflow_enrollments_status_check CHECK (status IN ('active', 'waiting', 'completed', 'exited', 'converted', 'failed')),
        step_key text NULL,
        next_at timestamptz NULL,
        entered_at timestamptz NOT NULL,
        ended_at timestamptz NULL,
        error text NULL,
        step_seq integer NOT NULL DEFAULT 0,
        attempts integer NOT NULL DEFAULT 0,
        claim_token uuid NULL,
        claimed_until timestamptz NULL,
        CONSTRAINT workflow_enrollments_version_fkey FOREIGN KEY (workflow_id, version) REFERENCES workflow_versions(workflow_id, version)
      )`);
    // The runner's claim: due enrollments in due order, only those still running.
    await q.query(`CREATE INDEX workflow_enrollments_due_idx ON workflow_enrollments (next_at) WHERE status IN ('active', 'waiting')`);
    // At most one running enrollment per workflow and contact, whatever races (parallel enrolments, triggers).
    await q.query(
      `CREATE UNIQUE INDEX workflow_enrollments_running_uq ON workflow_enrollments (workflow_id, contact_id) WHERE status IN ('active', 'waiting')`,
    );
    await q.query(`CREATE INDEX workflow_enrollments_workflow_idx ON workflow_enrollments (workflow_id, contact_id)`);
    await q.query(`CREATE INDEX workflow_enrollments_contact_idx ON workflow_enrollments (contact_id)`);
    await q.query(`
      CREATE TABLE workflow_step_runs (
        id bigserial PRIMARY KEY,
        enrollment_id bigint NOT NULL REFERENCES workflow_enrollments(id) ON DELETE CASCADE,
        seq integer NOT NULL,
        step_key text NOT NULL,
        step_type text NOT NULL,
        outcome text NOT NULL,
        detail jsonb NULL,
        ran_at timestamptz NOT NULL,
        CONSTRAINT workflow_step_runs_seq_uq UNIQUE (enrollment_id, seq)
      )`);
    await q.query(`CREATE TABLE workflow_trigger_state (id integer PRIMARY KEY CHECK (id = 1), last_sequence bigint NOT NULL DEFAULT 0)`);
    // The follower starts at the feed's head: events written before workflows existed start nothing.
    await q.query(`INSERT INTO workflow_trigger_state (id, last_sequence) SELECT 1, COALESCE((SELECT last_sequence FROM event_feed_state), 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE workflow_trigger_state`);
    await q.query(`DROP TABLE workflow_step_runs`);
    await q.query(`DROP TABLE workflow_enrollments`);
    await q.query(`DROP TABLE workflow_versions`);
    await q.query(`DROP TABLE workflows`);
  }
}
