import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { EventsService } from '../events/events.service.js';
import { BackgroundLoop, runsBackgroundWork } from '../jobs/background-loop.js';
import { JobQueue } from '../jobs/job-queue.js';
import { TrackingIntakeService } from '../tracking/tracking-intake.service.js';
import { APPLY_BATCH, ScoringService, TRACKED_APPLY_BATCH } from './scoring.service.js';

/**
 * Applies the published scoring rules to the change feed (recordEvent rules) and to the tracked
 * events queued for scoring (trackedEvent rules), in every process that runs
 * background work (APP_ROLE worker or all; the same process without Redis). A BackgroundLoop, as the
 * segment refresher is: what is to do lives in the database (events past the applier's cursor), so
 * no lost or duplicated job can skip or repeat an application (the ledger's unique (rule, event) key
 * guards the rest). A pass runs as soon as the sequencer of this process numbers new events, and
 * every SCORING_APPLY_INTERVAL_MS: an event is applied well within 5 s of its commit.
 */
@Injectable()
export class ScoringApplier implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly loop: BackgroundLoop;
  private unsubscribe: (() => void) | null = null;
  private unsubscribeTracked: (() => void) | null = null;

  constructor(
    private readonly scoring: ScoringService,
    private readonly events: EventsService,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly intake: TrackingIntakeService,
  ) {
    this.loop = new BackgroundLoop('scoring rule', () => this.pass(), config.scoringApplyIntervalMs, new Logger('ScoringApplier'));
  }

  onApplicationBootstrap(): void {
    if (!runsBackgroundWork(this.config, this.jobs)) return;
    this.unsubscribe = this.events.onSequenced(() => this.kick());
    // Tracked events committed by this process (another process's are picked up by the next pass).
    this.unsubscribeTracked = this.intake.onTracked((batch) => {
      if (batch.contactIds.length) this.kick();
    });
    this.loop.start();
  }

  /** Runs a pass soon (or once more after the running one). */
  kick(): void {
    this.loop.kick();
  }

  /**
   * One pass: the feed until caught up (a full batch means more may wait), or another process holds
   * the cursor; then the tracked events queued for scoring until the queue is empty.
   */
  async pass(): Promise<void> {
    while (!this.loop.stopping && (await this.scoring.applyFeed()) === APPLY_BATCH);
    while (!this.loop.stopping && (await this.scoring.applyQueuedTracked()) === TRACKED_APPLY_BATCH);
  }

  async onModuleDestroy(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribeTracked?.();
    await this.loop.stop();
  }
}
