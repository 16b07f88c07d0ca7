import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { outsideTransaction } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { JobQueue } from '../jobs/job-queue.js';
import { TrackingIntakeService } from '../tracking/tracking-intake.service.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowEngine } from './workflow-engine.js';
import { WorkflowTriggers } from './workflow-triggers.js';

/** Enrollments one claim takes (run set-based as one batch: WorkflowEngine.processBatch). */
export const CLAIM_BATCH = 500;
/** Batches claimed and run at once: one runs its statements while the other's wait on the database. */
const LANES = 2;

/**
 * Runs due enrollments in every process that runs background work (APP_ROLE worker or all), as a
 * loop rather than one job per enrollment: what is due lives in PostgreSQL (a waiting enrollment
 * is a row with next_at), so a million waits cost rows, not Redis memory, and no lost job leaves
 * one stuck. A pass claims due enrollments (FOR UPDATE SKIP LOCKED on the (next_at) index, with a
 * lease: a runner that dies leaves claims that others take over once the lease passed) and runs
 * them, until none is due.
 *
 * Each pass first follows the triggers (workflow-triggers.ts: the change feed, due schedules).
 * A pass starts at once when work appears: an enrolment or trigger in this process (kick), a new
 * event numbered by this process's sequencer (enrolments and steps elsewhere write events), tracked
 * events stored by this process's intake, and
 * at the earliest due time it knows of; otherwise every WORKFLOW_POLL_INTERVAL_MS.
 */
@Injectable()
export class WorkflowRunner implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('WorkflowRunner');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  private unsubscribeTracked: (() => void) | null = null;

  constructor(
    private readonly engine: WorkflowEngine,
    private readonly triggers: WorkflowTriggers,
    private readonly enrolling: EnrollmentsService,
    private readonly enrollments: EnrollmentsRepository,
    private readonly events: EventsService,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
    private readonly intake: TrackingIntakeService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Whether this process runs the loop. */
  get enabled(): boolean {
    return ['worker', 'all'].includes(this.config.role) && this.jobs.runsWorkers;
  }

  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    this.unsubscribe = this.events.onSequenced(() => this.kick());
    this.unsubscribeTracked = this.intake.onTracked(() => this.kick());
    this.enrolling.onEnrolled(() => this.kick());
    this.arm(0);
  }

  private arm(delay: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = outsideTransaction(() => setTimeout(() => void this.tick(), Math.max(0, delay)));
    this.timer.unref();
  }

  /** Runs a pass soon (or once more after the running one). */
  kick(): void {
    if (this.stopped || !this.enabled) return;
    if (this.running) this.again = true;
    else this.arm(0);
  }

  private async tick(): Promise<void> {
    if (this.running || this.stopped) return;
    let delay = this.config.workflowPollIntervalMs;
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.triggers.follow();
          await this.runDue();
          const next = await this.enrollments.nextDue();
          if (next) delay = Math.min(delay, next.getTime() - this.clock.nowMs());
        } catch (e) {
          this.logger.warn({ msg: 'workflow pass failed', err: e instanceof Error ? e.message : String(e) });
        }
      } while (this.again && !this.stopped);
    })();
    await this.running;
    this.running = null;
    this.arm(Math.max(delay, 10));
  }

  /**
   * Claims and runs due enrollments until none is due, in LANES lanes each claiming its own batch
   * (SKIP LOCKED keeps them apart); answers how many were processed.
   */
  async runDue(): Promise<number> {
    let total = 0;
    const lane = async () => {
      while (!this.stopped) {
        const token = randomUUID();
        const ids = await this.enrollments.claimDue(this.clock.now(), CLAIM_BATCH, token, this.config.workflowLeaseMs);
        if (!ids.length) return;
        // Claims this runner could not finish (stopping) are left to expire.
        await this.engine.processBatch(ids, token);
        total += ids.length;
        if (ids.length < CLAIM_BATCH) return;
      }
    };
    await Promise.all(Array.from({ length: LANES }, lane));
    return total;
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
