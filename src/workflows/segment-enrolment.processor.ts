import { Injectable, type OnModuleInit } from '@nestjs/common';
import { JOB_IDS, RECOVERY_EVERY_MS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { SegmentEnrolment } from './segment-enrolment.js';

/**
 * The segment enrolment jobs: `workflows.enrol-segment` runs one workflow's enrolment from its
 * cursor (safe to run twice: the enrolment's row lock orders two runs, the second finds the cursor
 * moved); `workflows.enrol-segment-recover` queues again the unfinished ones (worker start, then
 * every RECOVERY_EVERY_MS).
 */
@Injectable()
export class SegmentEnrolmentProcessor implements OnModuleInit {
  constructor(
    private readonly jobs: JobQueue,
    private readonly enrolment: SegmentEnrolment,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('workflows.enrol-segment', (p) => this.enrolment.run(p.workflowId, p.queuedAt));
    this.jobs.handle('workflows.enrol-segment-recover', () => this.enrolment.recover());
    this.jobs.onWorkerStart('workflows: queue unfinished segment enrolments', async () => {
      await this.enrolment.recover();
      await this.jobs.upsertSchedule(JOB_IDS.workflowEnrolSegmentRecoverSchedule, 'workflows.enrol-segment-recover', {}, { everyMs: RECOVERY_EVERY_MS });
    });
  }
}
