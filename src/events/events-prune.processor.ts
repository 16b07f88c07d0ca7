import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { EventsService } from './events.service.js';

const PRUNE_EVERY_MS = 60 * 60_000;

/** Retention of the event feed: the hourly `events.prune` job deletes events older than EVENT_RETENTION_DAYS. */
@Injectable()
export class EventsPruneProcessor implements OnModuleInit {
  private readonly logger = new Logger('Events');

  constructor(
    private readonly jobs: JobQueue,
    private readonly events: EventsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('events.prune', async () => {
      const removed = await this.events.prune(this.config.eventRetentionDays);
      if (removed) this.logger.log({ msg: 'events pruned', removed, retentionDays: this.config.eventRetentionDays });
      return { removed };
    });
    this.jobs.onWorkerStart('events: schedule pruning', async () => {
      await this.jobs.upsertSchedule(JOB_IDS.eventsPruneSchedule, 'events.prune', {}, { everyMs: PRUNE_EVERY_MS });
    });
  }
}
