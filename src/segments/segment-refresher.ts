import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { EventsService } from '../events/events.service.js';
import { JobQueue } from '../jobs/job-queue.js';
import { SegmentRefreshService } from './segment-refresh.service.js';
import { REFRESH_BATCH, SegmentsService } from './segments.service.js';
import { outsideTransaction } from '../database/transactions.js';
import { TrackingIntakeService } from '../tracking/tracking-intake.service.js';

/**
 * Keeps dynamic segments fresh, in every process that runs background work (APP_ROLE worker or
 * all; the same process without Redis). A loop, like the event sequencer's, rather than queued
 * jobs: what is to do lives in the database (a segment whose built_version is not its
 * filter_version; change events past the refresh cursor), so no lost or duplicated job can leave a
 * segment stale, and two processes running the loop at once only wait for each other's locks.
 *
 * Each pass: rebuild the pending segments, then re-evaluate the contacts of new change events
 * until caught up, then the contacts with new tracked events (behavioural segments), then the
 * segments whose filter depends on time whose last evaluation is TIME_REFRESH_MS old by the clock. A pass runs every SEGMENT_REFRESH_INTERVAL_MS, as soon as the sequencer of this
 * process numbers new events, and right after a segment is created or its filter changes here.
 */
@Injectable()
export class SegmentRefresher implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('SegmentRefresher');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  private unsubscribeTracked: (() => void) | null = null;

  constructor(
    private readonly segments: SegmentsService,
    private readonly refresh: SegmentRefreshService,
    private readonly events: EventsService,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly intake: TrackingIntakeService,
  ) {}

  onApplicationBootstrap(): void {
    if (!['worker', 'all'].includes(this.config.role) || !this.jobs.runsWorkers) return;
    this.segments.onWorkNeeded(() => this.kick());
    this.unsubscribe = this.events.onSequenced(() => this.kick());
    // New tracked events committed by this process: their contacts are re-evaluated at once
    // (another process's intake is picked up by the next pass, SEGMENT_REFRESH_INTERVAL_MS).
    this.unsubscribeTracked = this.intake.onTracked((batch) => {
      if (batch.contactIds.length) this.kick();
    });
    this.arm(0);
  }

  private arm(delay: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    // Woken from inside a unit of work (a segment saved in a transaction): the passes run outside it.
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
          await this.pass();
        } catch (e) {
          this.logger.warn({ msg: 'segment refresh pass failed', err: e instanceof Error ? e.message : String(e) });
        }
      } while (this.again && !this.stopped);
    })();
    await this.running;
    this.running = null;
    this.arm(this.config.segmentRefreshIntervalMs);
  }

  /**
   * One pass: the change events until caught up (or another process has the cursor), with the
   * pending rebuilds before each batch, so a new segment is not kept waiting by a backlog of events.
   */
  async pass(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      await this.refresh.buildPending();
      const read = await this.refresh.refreshChanges();
      if (read < REFRESH_BATCH) break;
    }
    // Contacts with new tracked events, until the queue is empty (or held by another process).
    while (!this.stopped && (await this.refresh.refreshTracked()) >= REFRESH_BATCH);
    // Segments whose filter depends on time, when their last such evaluation is old enough by the clock.
    if (!this.stopped) await this.refresh.refreshTimeWindows();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribeTracked?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}
