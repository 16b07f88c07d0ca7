import { Injectable } from '@nestjs/common';
import { outboxInsertSql } from '../database/outbox.js';
import { TableStatistics } from '../database/table-statistics.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { ENROLLMENT_JSON } from './enrollments.repository.js';
import type { Reenrollment } from './workflow-definition.js';

/** A workflow's enrolment of its segment's members, as stored (workflow_segment_enrolments). */
export interface SegmentEnrolmentRow {
  workflowId: number;
  segmentId: number;
  startedAt: Date;
  afterContactId: number;
  enrolled: number;
  finishedAt: Date | null;
}

/** One chunk to enrol: the workflow's current version and entry step, its reenrollment rule, the cursor. */
export interface EnrolChunk {
  workflowId: number;
  version: number;
  stepKey: string;
  reenrollment: Reenrollment;
  segmentId: number;
  /** Members after this contact id (the cursor). */
  afterContactId: number;
  /** When the enrolment started: a contact enrolled at or after it (by a trigger meanwhile) is not enrolled again. */
  startedAt: Date;
  at: Date;
  limit: number;
}

const COLUMNS = `workflow_id AS "workflowId", segment_id AS "segmentId", started_at AS "startedAt", after_contact_id AS "afterContactId",
  enrolled::int AS "enrolled", finished_at AS "finishedAt"`;

/**
 * Every query of workflow_segment_enrolments, and the chunk's set-based enrolment: one statement
 * that takes the next `limit` members of the segment in contact id order (the segment_members
 * primary key), inserts their enrollments under the reenrollment rule and writes their
 * workflow.enrolled events through the outbox writer (bench/workflows-enrol.mjs).
 */
@Injectable()
export class SegmentEnrolmentRepository {
  constructor(
    private readonly transactions: Transactions,
    private readonly statistics: TableStatistics,
  ) {}

  /**
   * Records the workflow's enrolment of its segment as started at `startedAt` (replacing an earlier
   * one: an activation starts it again), its cursor after the members enrolled so far; ended at
   * `finishedAt` when none is left.
   */
  async start(
    workflowId: number,
    segmentId: number,
    startedAt: Date,
    afterContactId: number,
    enrolled: number,
    finishedAt: Date | null,
    tx: Tx,
  ): Promise<void> {
    await tx.query(
      `INSERT INTO workflow_segment_enrolments (workflow_id, segment_id, started_at, after_contact_id, enrolled, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (workflow_id) DO UPDATE SET segment_id = $2, started_at = $3, after_contact_id = $4, enrolled = $5, finished_at = $6`,
      [workflowId, segmentId, startedAt, afterContactId, enrolled, finishedAt],
    );
  }

  /** The workflow's enrolment, locked until `tx` ends (a second run of its job waits here, then sees the cursor moved). */
  async lock(workflowId: number, tx: Tx): Promise<SegmentEnrolmentRow | null> {
    const rows: SegmentEnrolmentRow[] = await tx.query(`SELECT ${COLUMNS} FROM workflow_segment_enrolments WHERE workflow_id = $1 FOR UPDATE`, [workflowId]);
    return rows[0] ?? null;
  }

  async find(workflowId: number, tx?: Tx): Promise<SegmentEnrolmentRow | null> {
    const rows: SegmentEnrolmentRow[] = await this.transactions
      .handle(tx)
      .query(`SELECT ${COLUMNS} FROM workflow_segment_enrolments WHERE workflow_id = $1`, [workflowId]);
    return rows[0] ?? null;
  }

  /** The workflows whose enrolment has not finished (the recovery queues their jobs again). */
  async open(limit: number): Promise<number[]> {
    const rows: { id: number }[] = await this.transactions.db.query(
      `SELECT workflow_id AS id FROM workflow_segment_enrolments WHERE finished_at IS NULL ORDER BY workflow_id LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.id);
  }

  /** Moves the cursor past a chunk (and ends the enrolment when `finished`), in the chunk's transaction. */
  async advance(workflowId: number, afterContactId: number, enrolled: number, finishedAt: Date | null, tx: Tx): Promise<void> {
    await tx.query(`UPDATE workflow_segment_enrolments SET after_contact_id = $2, enrolled = enrolled + $3, finished_at = $4 WHERE workflow_id = $1`, [
      workflowId,
      afterContactId,
      enrolled,
      finishedAt,
    ]);
  }

  /**
   * Enrols the next `limit` members of the segment after the cursor, in one statement: each gets an
   * enrollment at the entry step unless the reenrollment rule refuses it (never: any earlier
   * enrollment; otherwise a running one, by the partial unique index, whatever races) or a trigger
   * enrolled it since the enrolment started; each new one with its workflow.enrolled event.
   * Answers how many members the chunk took, the last one's id (null: none left) and how many were enrolled.
   */
  async enrolChunk(c: EnrolChunk, tx: Tx): Promise<{ taken: number; last: number | null; enrolled: number }> {
    const rows: { taken: string; last: number | null; n: string }[] = await tx.query(
      `WITH chunk AS MATERIALIZED (SELECT m.contact_id AS id FROM segment_members m WHERE m.segment_id = $6 AND m.contact_id > $7 ORDER BY m.contact_id LIMIT $8),
            ins AS (INSERT INTO workflow_enrollments (workflow_id, version, contact_id, status, step_key, next_at, entered_at)
                    SELECT $1, $2, chunk.id, 'active', $3, $4, $4 FROM chunk
                     WHERE NOT EXISTS (SELECT 1 FROM workflow_enrollments x WHERE x.workflow_id = $1 AND x.contact_id = chunk.id
                                          AND (NOT $5::boolean OR x.entered_at >= $9))
                     ORDER BY chunk.id
                    ON CONFLICT (workflow_id, contact_id) WHERE status IN ('active', 'waiting') DO NOTHING
                    RETURNING *),
            ev AS (${outboxInsertSql(`'workflow.enrolled'`, ENROLLMENT_JSON('i'), 'NULL::jsonb', 'FROM (SELECT * FROM ins ORDER BY id) i')})
       SELECT (SELECT count(*) FROM chunk) AS taken, (SELECT max(id) FROM chunk) AS last, (SELECT count(*) FROM ins) AS n`,
      [c.workflowId, c.version, c.stepKey, c.at, c.reenrollment !== 'never', c.segmentId, c.afterContactId, c.limit, c.startedAt],
    );
    this.statistics.bulkWritten('workflow_enrollments', Number(rows[0].n));
    return { taken: Number(rows[0].taken), last: rows[0].last, enrolled: Number(rows[0].n) };
  }
}
