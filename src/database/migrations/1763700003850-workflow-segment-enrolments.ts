import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Workflows: the enrolment of a segment's current members when a segment_entered workflow becomes
 * active, run in the background chunk by chunk (src/workflows/segment-enrolment.ts). One row per
 * workflow: the segment, when the activation happened (the injected clock; members a trigger
 * enrolled since are not enrolled again), the last contact id done (the cursor, committed with
 * each chunk, so a run killed midway resumes after it), how many were enrolled, and when it ended.
 */
export class WorkflowSegmentEnrolments1763700003850 implements MigrationInterface {
  name = 'WorkflowSegmentEnrolments1763700003850';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE workflow_segment_enrolments (
        workflow_id int PRIMARY KEY REFERENCES workflows(id) ON DELETE CASCADE,
        segment_id int NOT NULL,
        started_at timestamptz NOT NULL,
        after_contact_id int NOT NULL DEFAULT 0,
        enrolled bigint NOT NULL DEFAULT 0,
        finished_at timestamptz NULL
      )`);
    await q.query(`CREATE INDEX workflow_segment_enrolments_open_idx ON workflow_segment_enrolments (workflow_id) WHERE finished_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE workflow_segment_enrolments`);
  }
}
