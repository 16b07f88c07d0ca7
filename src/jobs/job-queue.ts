import type { JobName, JobPayloads } from './job-names.js';

export interface EnqueueOptions {
  /** Duplicate suppression: a job with the same id that is still waiting or running is not added again. */
  jobId?: string;
  /** Run no earlier than this many milliseconds from now. */
  delayMs?: number;
}

export interface ScheduleOptions {
  /** Run every N milliseconds... */
  everyMs?: number;
  /** ...or on a cron pattern (UTC). */
  pattern?: string;
  /** First run no earlier than this time. */
  startDate?: Date;
}

export interface JobContext {
  jobId: string;
  attempt: number;
}

export type JobHandler<N extends JobName> = (payload: JobPayloads[N], ctx: JobContext) => Promise<unknown>;

/**
 * The job layer's one interface. With REDIS_URL it is BullMQ (workers in APP_ROLE=worker|all);
 * without it, the same handlers run in this process. Retries, backoff and retention are set by
 * the implementation, in one place.
 */
export abstract class JobQueue {
  /** Adds a job; resolves with its id once it is durably queued. */
  abstract enqueue<N extends JobName>(name: N, payload: JobPayloads[N], options?: EnqueueOptions): Promise<{ id: string }>;
  /** Creates or replaces a repeating job under a stable scheduler id; resolves with the next run time. */
  abstract upsertSchedule<N extends JobName>(schedulerId: string, name: N, payload: JobPayloads[N], options: ScheduleOptions): Promise<Date | null>;
  abstract removeSchedule(schedulerId: string): Promise<void>;
  /** Registers the code that runs jobs of this name (called by processors at module init). */
  abstract handle<N extends JobName>(name: N, handler: JobHandler<N>): void;
  /** Whether jobs can be queued right now (false while the broker is unreachable). */
  abstract isAvailable(): Promise<boolean>;
}
