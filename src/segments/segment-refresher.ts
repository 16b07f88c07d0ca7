import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { EventsService } from '../events/events.service.js';
import { BackgroundLoop, runsBackgroundWork } from '../jobs/background-loop.js';
import { JobQueue } from '../jobs/job-queue.js';
import { SegmentRefreshService } from './segment-refresh.service.js';
import { REFRESH_BATCH, SegmentsService } from './segments.service.js';
import { TrackingIntakeService } from '../tracking/tracking-intake.service.js';

/**
 * Keeps dynamic segments fresh, in every process that runs background work (APP_ROLE worker or
 * all; the same process without Redis). A BackgroundLoop (src/jobs/background-loop.ts) rather than
 * queued jobs: what is to do lives in the database (a segment whose built_version is not its
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
  private readonly loop: BackgroundLoop;
  private unsubscribe: (() => void) | null = null;
  private unsubscribeTracked: (() => void) | null = null;

  constructor(
    private readonly segments: SegmentsService,
    private readonly refresh: SegmentRefreshService,
    private readonly events: EventsService,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly intake: TrackingIntakeService,
  ) {
    this.loop = new BackgroundLoop('segment refresh', () => this.pass(), config.segmentRefreshIntervalMs, new Logger('SegmentRefresher'));
  }

  onApplicationBootstrap(): void {
    if (!runsBackgroundWork(this.config, this.jobs)) return;
    this.segments.onWorkNeeded(() => this.kick());
    this.unsubscribe = this.events.onSequenced(() => this.kick());
    // New tracked events committed by this process: their contacts are re-evaluated at once
    // (another process's intake is picked up by the next pass, SEGMENT_REFRESH_INTERVAL_MS).
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
   * One pass: the change events until caught up (or another process has the cursor), with the
   * pending rebuilds before each batch, so a new segment is not kept waiting by a backlog of events.
   */
  async pass(): Promise<void> {
    for (;;) {
      if (this.loop.stopping) return;
      await this.refresh.buildPending();
      const read = await this.refresh.refreshChanges();
      if (read < REFRESH_BATCH) break;
    }
    // Contacts with new tracked events, until the queue is empty (or held by another process).
    while (!this.loop.stopping && (await this.refresh.refreshTracked()) >= REFRESH_BATCH);
    // Segments whose filter depends on time, when their last such evaluation is old enough by the clock.
    if (!this.loop.stopping) await this.refresh.refreshTimeWindows();
  }

  async onModuleDestroy(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribeTracked?.();
    await this.loop.stop();
  }
}
