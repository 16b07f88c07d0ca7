import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Workflows' untilEvent waits: the event that woke a waiting enrollment (null while it waits, and
 * when its timeout ran out instead), written with its due time moved to now in the transaction that
 * consumed the event, read by the step that resumes it; and when the wait began (the database's
 * time, as the change feed's occurred_at: a change event from before the wait does not wake it).
 */
export class WorkflowEventWaits1763700003300 implements MigrationInterface {
  name = 'WorkflowEventWaits1763700003300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE workflow_enrollments ADD COLUMN woken_by jsonb NULL, ADD COLUMN waiting_since timestamptz NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE workflow_enrollments DROP COLUMN woken_by, DROP COLUMN waiting_since`);
  }
}
