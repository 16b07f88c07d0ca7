import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { outsideTransaction } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { JobQueue } from '../jobs/job-queue.js';
import { APPLY_BATCH, ScoringService } from './scoring.service.js';

/**
 * Applies the published recordEvent scoring rules to the change feed, in every process that runs
 * background work (APP_ROLE worker or all; the same process without Redis). A loop like the segment
 * refresher's: what is to do lives in the database (events past the applier's cursor), so no lost or
 * duplicated job can skip or repeat an application (the ledger's unique (rule, event) key guards the
 * rest). A pass runs as soon as the sequencer of this process numbers new events, and every
 * SCORING_APPLY_INTERVAL_MS: an event is applied well within 5 s of its commit.
 */
@Injectable()
export class ScoringApplier implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('ScoringApplier');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly scoring: ScoringService,
    private readonly events: EventsService,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (!['worker', 'all'].includes(this.config.role) || !this.jobs.runsWorkers) return;
    this.unsubscribe = this.events.onSequenced(() => this.kick());
    this.arm(0);
  }

  private arm(delay: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = outsideTransaction(() => setTimeout(() => void this.tick(), delay));
    this.timer.unref();
  }

  /** Runs a pass soon (or once more after the running one). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.arm(0);
  }

  private async tick(): Promise<void> {
    if (this.running || this.stopped) return;
    this.running = (async () => {
      do {
        this.again = false;
        try {
          // Until caught up (a full batch means more may wait), or another process holds the cursor.
          while (!this.stopped && (await this.scoring.applyFeed()) === APPLY_BATCH);
        } catch (e) {
          this.logger.warn({ msg: 'scoring rule pass failed', err: e instanceof Error ? e.message : String(e) });
        }
      } while (this.again && !this.stopped);
    })();
    await this.running;
    this.running = null;
    this.arm(this.config.scoringApplyIntervalMs);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}
