import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { ScoringJobsService } from './scoring-jobs.service.js';

/**
 * The scoring jobs: `scoring.decay` on a schedule (every SCORING_DECAY_CHECK_MS it applies the decay
 * periods that ended; each contact once per period), and `scoring.run` (a recompute or what-if run).
 */
@Injectable()
export class ScoringProcessor implements OnModuleInit {
  constructor(
    private readonly jobs: JobQueue,
    private readonly scoring: ScoringJobsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('scoring.decay', () => this.scoring.runDecay());
    this.jobs.handle('scoring.run', (p, ctx) => this.scoring.run(p.jobId, ctx.attempt >= ctx.maxAttempts));
    this.jobs.onWorkerStart('scoring: schedule decay', async () => {
      await this.jobs.upsertSchedule(JOB_IDS.scoringDecaySchedule, 'scoring.decay', {}, { everyMs: this.config.scoringDecayCheckMs });
    });
  }
}
