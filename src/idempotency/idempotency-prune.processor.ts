import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { IdempotencyService } from './idempotency.service.js';

const PRUNE_EVERY_MS = 60 * 60_000;

/** Retention of Idempotency-Keys: the hourly `idempotency.prune` job deletes keys past IDEMPOTENCY_TTL_HOURS. */
@Injectable()
export class IdempotencyPruneProcessor implements OnModuleInit {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly jobs: JobQueue,
    private readonly idempotency: IdempotencyService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('idempotency.prune', async () => {
      const removed = await this.idempotency.prune();
      if (removed) this.logger.log({ msg: 'idempotency keys pruned', removed });
      return { removed };
    });
    this.jobs.onWorkerStart('idempotency: schedule pruning', async () => {
      await this.jobs.upsertSchedule(JOB_IDS.idempotencyPruneSchedule, 'idempotency.prune', {}, { everyMs: PRUNE_EVERY_MS });
    });
  }
}
