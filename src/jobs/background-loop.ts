import type { Logger } from '@nestjs/common';
import type { AppConfig } from '../config/config.js';
import { outsideTransaction } from '../database/transactions.js';
import type { JobQueue } from './job-queue.js';

/** Whether this process runs background work: APP_ROLE worker or all, with workers (always so without Redis). */
export function runsBackgroundWork(config: Pick<AppConfig, 'role'>, jobs: Pick<JobQueue, 'runsWorkers'>): boolean {
  return ['worker', 'all'].includes(config.role) && jobs.runsWorkers;
}

/**
 * A loop of passes over work that lives in the database (a feed cursor, a queue table), rather than
 * queued jobs: no lost or duplicated job can skip or repeat a piece of it, and two processes running
 * the same loop only wait for each other's locks. One pass runs at a time: `start()` runs one at once,
 * `kick()` runs one soon (or once more after the running one, when kicked while it runs), and one
 * runs every `intervalMs` after the last ended. A pass that throws is logged and the loop goes on.
 * `stop()` ends the loop and waits for a running pass. Used by the segment refresher and the scoring
 * rule applier.
 */
export class BackgroundLoop {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  /**
   * @param what names the pass in the log line of its failure (`<what> pass failed`).
   * @param pass one pass; it may check `stopping` between its steps to end early.
   */
  constructor(
    private readonly what: string,
    private readonly pass: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  /** True once stop() was called: a pass ends at its next step. */
  get stopping(): boolean {
    return this.stopped;
  }

  start(): void {
    this.arm(0);
  }

  /** Runs a pass soon (or once more after the running one). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.arm(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private arm(delay: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    // Kicked from inside a unit of work (a record saved in a transaction): the passes run outside it.
    this.timer = outsideTransaction(() => setTimeout(() => void this.tick(), delay));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.running || this.stopped) return;
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.pass();
        } catch (e) {
          this.logger.warn({ msg: `${this.what} pass failed`, err: e instanceof Error ? e.message : String(e) });
        }
      } while (this.again && !this.stopped);
    })();
    await this.running;
    this.running = null;
    this.arm(this.intervalMs);
  }
}
