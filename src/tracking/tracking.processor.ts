import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { TrackingService } from './tracking.service.js';

const EVERY_MS = 60 * 60_000;

/**
 * The hourly `tracking.partitions` job: creates the monthly partitions of tracked_events ahead
 * (this month and the next two), drops those past TRACKING_RETENTION_DAYS (by the injected clock),
 * prunes messageIds older than 48 h and daily counts past the retention. Also run at worker start.
 */
@Injectable()
export class TrackingProcessor implements OnModuleInit {
  private readonly logger = new Logger('Tracking');

  constructor(
    private readonly jobs: JobQueue,
    private readonly tracking: TrackingService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('tracking.partitions', async () => {
      const r = await this.tracking.maintain();
      if (r.dropped.length) this.logger.log({ msg: 'tracked events past the retention dropped', partitions: r.dropped });
      return r;
    });
    this.jobs.onWorkerStart('tracking: partitions ahead and retention', async () => {
      await this.tracking.maintain();
      await this.jobs.upsertSchedule(JOB_IDS.trackingPartitionsSchedule, 'tracking.partitions', {}, { everyMs: EVERY_MS });
    });
  }
}
