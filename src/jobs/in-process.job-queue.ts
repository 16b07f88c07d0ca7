import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { JOB_POLICY, JOB_QUEUE, type JobName, type JobPayloads, type QueueName, QUEUES } from './job-names.js';
import {
  DeferJobError,
  type EnqueueOptions,
  followUpJobId,
  type JobContext,
  type JobHandler,
  JobQueue,
  type QueueDepth,
  type ScheduleOptions,
} from './job-queue.js';
import { nextCronTime } from './cron.js';
import { outsideTransaction } from '../database/transactions.js';

interface Pending {
  id: string;
  name: JobName;
  payload: unknown;
  attempt: number;
  timer: NodeJS.Timeout | null;
  state: 'waiting' | 'delayed' | 'active';
  /** When a waiting or delayed job is due (epoch ms). */
  dueAt: number;
}

export interface RateLimit {
  max: number;
  durationMs: number;
}

/**
 * Runs jobs inside this process when there is no Redis: the same handlers, the same retry policy
 * (JOB_POLICY), duplicate suppression by job id, per-queue rate limits, delays and schedules by
 * timers. Jobs are not durable across restarts; every processor is written to be safe to re-run,
 * and the processors' start tasks (re-queueing messages left `queued`, re-creating report
 * schedules) cover a restart.
 */
export class InProcessJobQueue extends JobQueue implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Jobs');
  private readonly handlers = new Map<JobName, JobHandler<JobName>>();
  private readonly pending = new Map<string, Pending>();
  private readonly schedules = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<unknown>>();
  private readonly recentStarts = new Map<QueueName, number[]>();
  /**
   * Due jobs of a rate-limited queue waiting for a start slot, in the order they fell due, and the
   * one timer per queue that lets the next ones start: a backlog of 100,000 sends costs one timer,
   * not 100,000 timers that all wake at each slot to find it taken.
   */
  private readonly lines = new Map<QueueName, { jobs: Pending[]; head: number; timer: NodeJS.Timeout | null }>();
  private closing = false;

  constructor(private readonly limits: Partial<Record<QueueName, RateLimit>> = {}) {
    super();
  }

  get runsWorkers(): boolean {
    return true;
  }

  handle<N extends JobName>(name: N, handler: JobHandler<N>): void {
    this.handlers.set(name, handler as unknown as JobHandler<JobName>);
  }

  async isAvailable(): Promise<boolean> {
    return !this.closing;
  }

  async onApplicationBootstrap(): Promise<void> {
    // Not awaited: start tasks may take a while and must not hold up the boot.
    void this.runStartupTasks();
  }

  async enqueue<N extends JobName>(name: N, payload: JobPayloads[N], options: EnqueueOptions = {}): Promise<{ id: string }> {
    return this.add(name, payload, options, options.rerun === true);
  }

  private add<N extends JobName>(name: N, payload: JobPayloads[N], options: EnqueueOptions, followUp: boolean): { id: string } {
    const id = options.jobId ?? randomUUID();
    const delay = Math.max(0, options.delayMs ?? 0);
    const existing = this.pending.get(id);
    if (existing) {
      // Waiting, delayed or running: suppressed (or, with rerun, brought forward / followed up).
      if (options.rerun && existing.state !== 'active' && existing.dueAt > Date.now() + delay + 50) {
        if (existing.timer) clearTimeout(existing.timer);
        this.schedule(existing, delay);
      } else if (options.rerun && existing.state === 'active' && followUp && options.jobId) {
        return this.add(name, payload, { ...options, jobId: followUpJobId(options.jobId) }, false);
      }
      return { id };
    }
    const job: Pending = { id, name, payload, attempt: 0, timer: null, state: 'waiting', dueAt: Date.now() };
    this.pending.set(id, job);
    this.schedule(job, delay);
    return { id };
  }

  private schedule(job: Pending, delayMs: number) {
    if (this.closing) return;
    job.dueAt = Date.now() + Math.max(0, delayMs);
    // setTimeout holds at most ~24.8 days; longer delays hop.
    const wait = Math.min(Math.max(0, delayMs), 2_000_000_000);
    job.state = delayMs > 0 ? 'delayed' : 'waiting';
    // A job enqueued inside a unit of work runs after it, on connections of its own.
    job.timer = outsideTransaction(() =>
      setTimeout(() => {
        if (wait < delayMs) {
          this.schedule(job, delayMs - wait);
          return;
        }
        job.timer = null;
        const queue = JOB_QUEUE[job.name];
        if (!this.limits[queue]) {
          this.start(job);
          return;
        }
        const line = this.lines.get(queue) ?? { jobs: [], head: 0, timer: null };
        this.lines.set(queue, line);
        line.jobs.push(job);
        this.release(queue);
      }, wait),
    );
    job.timer.unref?.();
  }

  private start(job: Pending): void {
    job.state = 'active';
    const p = this.run(job);
    this.running.add(p);
    void p.finally(() => this.running.delete(p));
  }

  /** Starts the queue's waiting jobs while its rate limit has slots; else arms the line's one timer for the next slot. */
  private release(queue: QueueName): void {
    const line = this.lines.get(queue);
    if (!line || line.timer || this.closing) return;
    while (line.head < line.jobs.length) {
      const limited = this.rateLimitDelay(queue);
      if (limited > 0) {
        line.timer = outsideTransaction(() =>
          setTimeout(() => {
            line.timer = null;
            this.release(queue);
          }, limited),
        );
        line.timer.unref?.();
        break;
      }
      const job = line.jobs[line.head++];
      this.start(job);
    }
    // Drop the started jobs from the front now and then (not one shift per start).
    if (line.head > 1024 && line.head * 2 > line.jobs.length) {
      line.jobs.splice(0, line.head);
      line.head = 0;
    }
  }

  /** 0 when a job of this queue may start now (and counts it), else how long to wait. */
  private rateLimitDelay(queue: QueueName): number {
    const limit = this.limits[queue];
    if (!limit) return 0;
    const now = Date.now();
    let starts = this.recentStarts.get(queue);
    if (!starts) this.recentStarts.set(queue, (starts = []));
    // Starts are in time order: the expired ones are at the front.
    let expired = 0;
    while (expired < starts.length && starts[expired] <= now - limit.durationMs) expired++;
    if (expired) starts.splice(0, expired);
    if (starts.length >= limit.max) return starts[0] + limit.durationMs - now + 1;
    starts.push(now);
    return 0;
  }

  private async run(job: Pending): Promise<void> {
    const handler = this.handlers.get(job.name);
    const policy = JOB_POLICY[job.name];
    job.attempt++;
    const ctx: JobContext = { jobId: job.id, attempt: job.attempt, maxAttempts: policy.attempts };
    try {
      if (!handler) throw new Error(`no handler registered for ${job.name}`);
      await handler(job.payload as never, ctx);
      this.pending.delete(job.id);
      this.reportOutcome(job.name, 'completed');
    } catch (e) {
      if (e instanceof DeferJobError && !this.closing) {
        job.attempt--;
        this.schedule(job, e.delayMs);
        return;
      }
      const err = e as Error & { retryAfterMs?: number; unrecoverable?: boolean };
      if (job.attempt >= policy.attempts || err.unrecoverable || this.closing) {
        this.logger.error({ msg: 'job failed', job: job.name, jobId: job.id, attempt: job.attempt, err: err.message });
        this.pending.delete(job.id);
        this.reportOutcome(job.name, 'failed');
        return;
      }
      this.reportOutcome(job.name, 'retried');
      const delay = err.retryAfterMs ?? policy.backoffMs * 2 ** (job.attempt - 1);
      this.logger.warn({ msg: 'job failed; retrying', job: job.name, jobId: job.id, attempt: job.attempt, delay, err: err.message });
      this.schedule(job, delay);
    }
  }

  /** Jobs held by this process per queue: waiting (due), delayed (a later run or a retry) and active. Failed jobs are not kept. */
  async depths(): Promise<QueueDepth[]> {
    const counts = new Map<string, number>();
    for (const j of this.pending.values()) {
      const key = `${JOB_QUEUE[j.name]}\u0000${j.state}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return Object.values(QUEUES).flatMap((queue) =>
      (['waiting', 'active', 'delayed'] as const).map((state) => ({ queue, state, count: counts.get(`${queue}\u0000${state}`) ?? 0 })),
    );
  }

  async upsertSchedule<N extends JobName>(schedulerId: string, name: N, payload: JobPayloads[N], options: ScheduleOptions): Promise<Date | null> {
    await this.removeSchedule(schedulerId);
    const next = (from: Date): Date | null => (options.pattern ? nextCronTime(options.pattern, from) : new Date(from.getTime() + (options.everyMs ?? 60_000)));
    const start = options.startDate && options.startDate.getTime() > Date.now() ? options.startDate : new Date();
    const first = options.pattern ? next(new Date(start.getTime() - 1)) : start.getTime() > Date.now() ? start : next(new Date());
    const arm = (at: Date | null) => {
      if (!at || this.closing) return;
      const t = outsideTransaction(() =>
        setTimeout(
          () => {
            if (at.getTime() > Date.now()) {
              arm(at);
              return;
            } // a long delay hopped
            void this.enqueue(name, payload, { jobId: `${schedulerId}:${at.getTime()}` });
            arm(next(new Date(Math.max(Date.now(), at.getTime()))));
          },
          Math.min(Math.max(0, at.getTime() - Date.now()), 2_000_000_000),
        ),
      );
      t.unref?.();
      this.schedules.set(schedulerId, t);
    };
    arm(first);
    return first;
  }

  async removeSchedule(schedulerId: string): Promise<void> {
    const t = this.schedules.get(schedulerId);
    if (t) clearTimeout(t);
    this.schedules.delete(schedulerId);
  }

  /** Stops timers and waits for running jobs to finish (before the database connection closes). */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    for (const t of this.schedules.values()) clearTimeout(t);
    for (const j of this.pending.values()) if (j.timer) clearTimeout(j.timer);
    for (const line of this.lines.values()) if (line.timer) clearTimeout(line.timer);
    await Promise.allSettled([...this.running]);
  }
}
