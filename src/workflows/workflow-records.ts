import { createHash } from 'node:crypto';
import { auditOut } from '../common/audit.js';
import { iso, isoRequired } from '../common/dates.js';
import type { StepRunRow } from './enrollments.repository.js';
import type { Workflow, WorkflowEnrollment } from './workflow.entity.js';

/** Enrollment counts of a workflow, as its record's `stats`. */
export interface WorkflowStatsSummary {
  entered: number;
  active: number;
  completed: number;
  converted: number;
  exited: number;
  failed: number;
}

export function statsSummary(counts: Record<string, number>): WorkflowStatsSummary {
  const n = (s: string) => counts[s] ?? 0;
  return {
    entered: Object.values(counts).reduce((a, b) => a + b, 0),
    active: n('active') + n('waiting'),
    completed: n('completed'),
    converted: n('converted'),
    exited: n('exited'),
    failed: n('failed'),
  };
}

/** A workflow as the API returns it (the one mapper from row to record). */
export function toWorkflowRecord(w: Workflow, stats: WorkflowStatsSummary) {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    status: w.status,
    version: w.version,
    trigger: w.trigger,
    steps: w.steps,
    settings: w.settings,
    stats,
    ...auditOut(w),
  };
}

export type WorkflowRecord = ReturnType<typeof toWorkflowRecord>;

/** An enrollment as the API returns it; ENROLLMENT_JSON (enrollments.repository.ts) builds the same in SQL. */
export function toEnrollmentRecord(e: WorkflowEnrollment) {
  return {
    id: Number(e.id),
    workflowId: e.workflowId,
    version: e.version,
    contactId: e.contactId,
    status: e.status,
    stepKey: e.stepKey,
    nextAt: iso(e.nextAt),
    enteredAt: isoRequired(e.enteredAt),
    endedAt: iso(e.endedAt),
    error: e.error,
  };
}

export type EnrollmentRecord = ReturnType<typeof toEnrollmentRecord>;

export function toStepRunRecord(r: StepRunRow) {
  return { seq: r.seq, stepKey: r.step_key, stepType: r.step_type, outcome: r.outcome, detail: r.detail, ranAt: isoRequired(r.ran_at) };
}

/**
 * The stable id of what one step run of one enrollment sends outside the database (a webhook's
 * Webhook-Id): a UUID derived from the enrollment and the run's sequence number, the same however
 * many times the step's transaction is retried.
 */
export function stepRunId(enrollmentId: number, seq: number): string {
  const h = createHash('sha256').update(`workflow-step:${enrollmentId}:${seq}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 17), 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The bucket (0–99) of an enrollment at a split: deterministic, so a retried step takes the same branch. */
export function splitBucket(enrollmentId: number, stepKey: string): number {
  return createHash('sha256').update(`split:${enrollmentId}:${stepKey}`).digest().readUInt32BE(0) % 100;
}
