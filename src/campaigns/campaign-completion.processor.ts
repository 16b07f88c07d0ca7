import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { JobQueue } from '../jobs/job-queue.js';
import { CampaignsService } from './campaigns.service.js';

export const COMPLETION_SCHEDULER_ID = 'campaigns:complete-expired';

/**
 * Marks campaigns whose endDate has passed as completed, every CAMPAIGN_COMPLETION_INTERVAL_MS
 * (default one minute). The job is one idempotent UPDATE, so a duplicate or overlapping run is harmless.
 */
@Injectable()
export class CampaignCompletionProcessor implements OnModuleInit {
  private readonly logger = new Logger('CampaignCompletion');

  constructor(
    private readonly jobs: JobQueue,
    private readonly campaigns: CampaignsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    this.jobs.handle('campaigns.complete-expired', async () => {
      const completed = await this.campaigns.completeExpired();
      if (completed) this.logger.log({ msg: 'campaigns completed', count: completed });
      return { completed };
    });
    try {
      await this.jobs.upsertSchedule(COMPLETION_SCHEDULER_ID, 'campaigns.complete-expired', {}, { everyMs: this.config.campaignCompletionIntervalMs });
    } catch (e) {
      // The schedule lives in the queue's store; a later boot (or the existing schedule) covers a failure here.
      this.logger.error({ msg: 'could not schedule the campaign completion job', err: (e as Error).message });
    }
  }
}
