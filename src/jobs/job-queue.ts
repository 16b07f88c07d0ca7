import { Logger } from '@nestjs/common';
import type { JobName, JobPayloads } from './job-names.js';

export interface EnqueueOptions {
  /**
   * Duplicate suppression: a job with the same id that is still waiting, delayed or running is not
   * added again (a finished one with that id is replaced).
   */
  jobId?: string;
  /**
   * The caller guarantees no earlier job ever had this id (it carries a counter, e.g. a message's
   * send count), so the check for a waiting or finished duplicate is skipped.
   */
  uniqueId?: boolean;
  /** Run no earlier than this many milliseconds from now. */
  delayMs?: number;
  /**
   * With `jobId`: this job must run (again) `delayMs` from now even when one with the id is already
   * queued or running. A queued one due later is brought forward; a running one gets one follow-up
   * job (id `followUpJobId(jobId)`, queued by the same rules, with no follow-up of its own), so that
   * work added while a job runs is never left waiting for it to be queued again. At most two jobs
   * with one id run at once (the job and its follow-up).
   */
  rerun?: boolean;
}

/** The id of the follow-up of a running job queued with `rerun`. */
export const followUpJobId = (jobId: string) => `${jobId}:again`;

export interface ScheduleOptions {
  /** Run every N milliseconds... */
  everyMs?: number;
  /** ...or on a cron pattern (UTC; 5 fields, or 6 with leading seconds). */
  pattern?: string;
  /** First run no earlier than this time. */
  startDate?: Date;
}

export interface JobContext {
  jobId: string;
  /** 1 on the first run. */
  attempt: number;
  /** The job's attempts (JOB_POLICY): on attempt === maxAttempts a failure is final. */
  maxAttempts: number;
}

export type JobHandler<N extends JobName> = (payload: JobPayloads[N], ctx: JobContext) => Promise<unknown>;

/**
 * Thrown by a handler to be run again later: counts as a failed attempt, waits `retryAfterMs` when
 * given (e.g. a provider's Retry-After), else the job's backoff.
 */
export class RetryableJobError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** Thrown by a handler to be run again after `delayMs` without using up an attempt (waiting on something else). */
export class DeferJobError extends Error {
  constructor(
    message: string,
    readonly delayMs: number,
  ) {
    super(message);
  }
}

/** How a run of a job ended, as this process saw it. */
export type JobOutcome = 'completed' | 'failed' | 'retried';

/** Jobs in one queue in one state (waiting, active, delayed, failed). */
export interface QueueDepth {
  queue: string;
  state: string;
  count: number;
}

/** Told about every job run this process finishes (the metrics' jobs_total). */
export type JobObserver = (name: JobName, outcome: JobOutcome) => void;

/**
 * The job layer's one interface. With REDIS_URL it is BullMQ (workers in APP_ROLE=worker|all);
 * without it, the same handlers run in this process. Retries, backoff and retention are set by
 * the implementation from JOB_POLICY / JOB_RETENTION, in one place.
 */
export abstract class JobQueue {
  private readonly startupTasks: { name: string; run: () => Promise<void> }[] = [];
  private startupDone: (() => void) | null = null;
  /** Settles once this process's worker start tasks ran (never, in a process that runs no workers). */
  readonly started: Promise<void> = new Promise((resolve) => (this.startupDone = resolve));
  protected readonly baseLogger = new Logger('Jobs');

  /** Adds a job; resolves with its id once it is durably queued. */
  abstract enqueue<N extends JobName>(name: N, payload: JobPayloads[N], options?: EnqueueOptions): Promise<{ id: string }>;
  /** Creates or replaces a repeating job under a stable scheduler id; resolves with the next run time. */
  abstract upsertSchedule<N extends JobName>(schedulerId: string, name: N, payload: JobPayloads[N], options: ScheduleOptions): Promise<Date | null>;
  abstract removeSchedule(schedulerId: string): Promise<void>;
  /** Registers the code that runs jobs of this name (called by processors at module init). */
  abstract handle<N extends JobName>(name: N, handler: JobHandler<N>): void;
  /** Whether jobs can be queued right now (false while the broker is unreachable). */
  abstract isAvailable(): Promise<boolean>;
  /** Whether this process runs jobs (false in APP_ROLE=api processes with Redis). */
  abstract get runsWorkers(): boolean;
  /** Jobs per queue and state right now (read when metrics are scraped). */
  abstract depths(): Promise<QueueDepth[]>;

  private readonly observers: JobObserver[] = [];

  /** Registers an observer of finished runs (the metrics service; the job layer imports no feature). */
  observe(observer: JobObserver): void {
    this.observers.push(observer);
  }

  /**
   * Reports how a run ended: `completed`, `retried` (failed, another attempt follows) or `failed`
   * (final). A run deferred without using an attempt (DeferJobError) is not reported.
   */
  protected reportOutcome(name: JobName, outcome: JobOutcome): void {
    for (const o of this.observers) {
      try {
        o(name, outcome);
      } catch (e) {
        this.baseLogger.warn({ msg: 'job observer failed', err: (e as Error).message });
      }
    }
  }

  /**
   * Registers a task that runs once when this process starts working jobs (after the broker is
   * reachable): recovery and schedule synchronisation. Never runs in processes without workers.
   */
  onWorkerStart(name: string, run: () => Promise<void>): void {
    this.startupTasks.push({ name, run });
  }

  protected async runStartupTasks(): Promise<void> {
    for (const t of this.startupTasks) {
      try {
        await t.run();
      } catch (e) {
        this.baseLogger.error({ msg: 'worker start task failed', task: t.name, err: (e as Error).message });
      }
    }
    this.startupDone?.();
  }
}
