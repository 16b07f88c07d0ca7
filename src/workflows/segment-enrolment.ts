import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { DeferJobError, JobQueue } from '../jobs/job-queue.js';
import { EnrollmentsService } from './enrollments.service.js';
import { SegmentEnrolmentRepository } from './segment-enrolment.repository.js';
import type { Workflow } from './workflow.entity.js';
import { WorkflowsRepository } from './workflows.repository.js';

/** Members enrolled in the activating transaction: a small segment is enrolled when the activation answers. */
export const ENROL_INLINE = 5_000;
/** Members enrolled per transaction by the background job. */
export const ENROL_CHUNK = 50_000;
/** How long a job waits for the activating transaction to become visible before giving up (it was rolled back). */
const VISIBLE_WITHIN_MS = 60_000;

type ChunkOutcome = { kind: 'missing' } | { kind: 'done' } | { kind: 'chunk'; enrolled: number; finished: boolean };

/**
 * Activating a segment_entered workflow enrols the segment's current members (unless
 * `enrollExisting` is false), set-based: the first ENROL_INLINE members in the activating
 * transaction, the rest by the `workflows.enrol-segment` job, ENROL_CHUNK members per transaction in
 * contact id order, each chunk one INSERT ... SELECT from segment_members with its workflow.enrolled
 * events written by the same statement, the cursor moved in the chunk's transaction (a run killed
 * midway resumes after the last chunk committed; the recovery queues a lost job again). Each chunk
 * follows the reenrollment rule on the workflow's current version, and skips the members a trigger
 * enrolled since the activation (they joined meanwhile); a workflow no longer active ends it (a later
 * activation starts it again from the first member, as the activation always enrolled).
 */
@Injectable()
export class SegmentEnrolment {
  private readonly logger = new Logger('Workflows');

  constructor(
    private readonly repo: SegmentEnrolmentRepository,
    private readonly workflows: WorkflowsRepository,
    private readonly enrolling: EnrollmentsService,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
  ) {}

  /** In the activating transaction `tx` (the workflow row locked): the first members now, the job for the rest. */
  async start(w: Workflow, tx: Tx): Promise<void> {
    if (w.trigger.type !== 'segment_entered' || w.trigger.enrollExisting === false) return;
    const first = w.steps[0]?.key;
    if (!first) return;
    const now = this.clock.now();
    const segmentId = w.trigger.segmentId;
    const base = { workflowId: w.id, version: w.version, stepKey: first, reenrollment: w.settings.reenrollment, segmentId, startedAt: now, at: now };
    const r = await this.repo.enrolChunk({ ...base, afterContactId: 0, limit: ENROL_INLINE }, tx);
    if (r.enrolled) this.enrolling.notify();
    const more = r.taken === ENROL_INLINE;
    await this.repo.start(w.id, segmentId, now, r.last ?? 0, r.enrolled, more ? null : now, tx);
    if (!more) return;
    try {
      // Queued before the commit; a run that starts first waits for it (DeferJobError), the recovery covers a failure here.
      await this.jobs.enqueue(
        'workflows.enrol-segment',
        { workflowId: w.id, queuedAt: Date.now() },
        { jobId: JOB_IDS.workflowEnrolSegment(w.id), rerun: true },
      );
    } catch (e) {
      this.logger.warn({ msg: 'could not queue the segment enrolment; the recovery will', workflowId: w.id, err: (e as Error).message });
    }
  }

  /** The job: chunk after chunk until the segment's members are enrolled (or the workflow is no longer active). */
  async run(workflowId: number, queuedAt: number): Promise<void> {
    for (;;) {
      const o = await this.transactions.run((tx) => this.chunk(workflowId, tx));
      if (o.kind === 'missing') {
        if (Date.now() - queuedAt < VISIBLE_WITHIN_MS) throw new DeferJobError(`workflow ${workflowId}'s segment enrolment is not visible yet`, 500);
        return;
      }
      if (o.kind === 'done') return;
      if (o.enrolled) this.enrolling.notify();
      if (o.finished) return;
    }
  }

  /** One chunk in `tx`: the workflow row (shared) before the enrolment's (the activation's lock order). */
  private async chunk(workflowId: number, tx: Tx): Promise<ChunkOutcome> {
    const w = await this.workflows.findForShare(workflowId, tx);
    const row = await this.repo.lock(workflowId, tx);
    if (!row) return { kind: 'missing' };
    if (row.finishedAt) return { kind: 'done' };
    const now = this.clock.now();
    const first = w?.steps[0]?.key;
    if (!w || w.status !== 'active' || w.trigger.type !== 'segment_entered' || !first) {
      await this.repo.advance(workflowId, row.afterContactId, 0, now, tx);
      return { kind: 'done' };
    }
    const r = await this.repo.enrolChunk(
      {
        workflowId,
        version: w.version,
        stepKey: first,
        reenrollment: w.settings.reenrollment,
        segmentId: row.segmentId,
        afterContactId: row.afterContactId,
        startedAt: row.startedAt,
        at: now,
        limit: ENROL_CHUNK,
      },
      tx,
    );
    const finished = r.taken < ENROL_CHUNK;
    await this.repo.advance(workflowId, r.last ?? row.afterContactId, r.enrolled, finished ? now : null, tx);
    return { kind: 'chunk', enrolled: r.enrolled, finished };
  }

  /** Queues again every unfinished enrolment (a job already queued or running is not duplicated). */
  async recover(): Promise<void> {
    for (const id of await this.repo.open(500))
      await this.jobs.enqueue('workflows.enrol-segment', { workflowId: id, queuedAt: Date.now() }, { jobId: JOB_IDS.workflowEnrolSegment(id) });
  }
}
