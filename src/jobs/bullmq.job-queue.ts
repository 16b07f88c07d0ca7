import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { type ConnectionOptions, DelayedError, Job, type JobsOptions, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { AppConfig } from '../config/config.js';
import { AppError, unavailable } from '../common/errors.js';
import type { RedisService } from '../redis/redis.service.js';
import { Coalescer } from '../database/coalescer.js';
import { JOB_POLICY, JOB_QUEUE, JOB_RETENTION, type JobName, type JobPayloads, type QueueName, QUEUES } from './job-names.js';
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

/** Queue states reported as depths. */
const DEPTH_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
/** Jobs each worker runs at once, per queue. */
/** Jobs a worker runs at once per queue (the sms queue's is SMS_WORKER_CONCURRENCY). */
const CONCURRENCY: Record<Exclude<QueueName, 'sms'>, number> = { maintenance: 1, reports: 2, webhooks: 32, imports: 2 };
/** Jobs added to Redis in one pipeline at most (a coalesced flush). */
const BULK_MAX = 500;
/** How long an enqueue may take before the queue counts as unavailable. */
const ENQUEUE_TIMEOUT_MS = 5_000;
/** How long a queue operation waits for a Redis connection that is (re)opening. */
const AVAILABILITY_WAIT_MS = 2_000;

/**
 * BullMQ keeps ":" as its own key separator: a custom job id may hold it only as exactly
 * "a:b:c", and scheduler ids end up inside job ids. Ids are therefore stored with "-" instead.
 */
export const bullId = (id: string) => id.replace(/:/g, '-');

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]);
}

/**
 * The job layer on BullMQ (Redis). Queues are the @nestjs/bullmq ones (BullModule.registerQueue,
 * prefix = REDIS_PREFIX); this class adds the retry policy of JOB_POLICY, retention, duplicate
 * suppression, job schedulers, and — when the process is not APP_ROLE=api — one Worker per queue.
 *
 * Delivery is at least once: a job whose worker dies is run again once its lock (JOB_LOCK_MS)
 * expires. Every handler is written to be safe to run twice.
 */
export class BullMqJobQueue extends JobQueue implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Jobs');
  /** Jobs with a unique id gathered for one pipeline to Redis, per queue (see addCoalesced). */
  private readonly bulk = new Map<QueueName, Coalescer<{ name: JobName; data: unknown; opts: JobsOptions }, { id: string }>>();
  private readonly handlers = new Map<JobName, JobHandler<JobName>>();
  private readonly workers: Worker[] = [];
  private closing = false;

  constructor(
    private readonly config: AppConfig,
    private readonly redis: RedisService,
    private readonly queues: Record<QueueName, Queue>,
  ) {
    super();
    // Without a listener BullMQ prints every connection error to stderr; log them, at most once a minute per queue.
    for (const [name, queue] of Object.entries(queues)) {
      let lastLogged = 0;
      queue.on('error', (err: Error) => {
        if (Date.now() - lastLogged < 60_000) return;
        lastLogged = Date.now();
        this.logger.warn({ msg: 'queue connection error', queue: name, err: err.message });
      });
    }
  }

  get runsWorkers(): boolean {
    return this.config.role !== 'api';
  }

  handle<N extends JobName>(name: N, handler: JobHandler<N>): void {
    this.handlers.set(name, handler as unknown as JobHandler<JobName>);
  }

  async isAvailable(): Promise<boolean> {
    return !this.closing && this.redis.ready;
  }

  /** attempts, backoff and retention: the one place they are set. */
  private jobOptions(name: JobName): JobsOptions {
    return {
      attempts: JOB_POLICY[name].attempts,
      backoff: { type: 'policy' },
      removeOnComplete: { ...JOB_RETENTION.removeOnComplete },
      removeOnFail: { ...JOB_RETENTION.removeOnFail },
    };
  }

  /**
   * Refuses (503) when Redis is unreachable. Waits briefly first: at boot the connection may still
   * be opening when modules register their schedules.
   */
  private async ensureAvailable(): Promise<void> {
    const deadline = Date.now() + AVAILABILITY_WAIT_MS;
    while (!(await this.isAvailable())) {
      if (this.closing || Date.now() >= deadline) throw unavailable('The job queue (Redis) is unreachable; try again shortly');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async enqueue<N extends JobName>(name: N, payload: JobPayloads[N], options: EnqueueOptions = {}): Promise<{ id: string }> {
    await this.ensureAvailable();
    try {
      return await withTimeout(this.add(name, payload, options, options.rerun === true), ENQUEUE_TIMEOUT_MS, 'enqueue');
    } catch (e) {
      if (e instanceof AppError) throw e;
      this.logger.warn({ msg: 'enqueue failed', job: name, err: (e as Error).message });
      throw unavailable('The job queue (Redis) did not accept the job; try again shortly');
    }
  }

  private async add<N extends JobName>(name: N, payload: JobPayloads[N], options: EnqueueOptions, followUp: boolean): Promise<{ id: string }> {
    const queue = this.queues[JOB_QUEUE[name]];
    const jobId = options.jobId ? bullId(options.jobId) : undefined;
    const delay = options.delayMs && options.delayMs > 0 ? options.delayMs : 0;
    if (options.uniqueId && !options.rerun) return this.addCoalesced(name, payload, { ...this.jobOptions(name), jobId, delay: delay || undefined });
    if (jobId && !options.uniqueId) {
      // Waiting, delayed or running: suppressed (or, with rerun, brought forward / followed up).
      // Finished (kept for a while by the retention settings): replaced, or the new job would
      // silently never run.
      const existing = await queue.getJob(jobId);
      if (existing) {
        const state = await existing.getState();
        if (state !== 'completed' && state !== 'failed' && state !== 'unknown') {
          if (options.rerun && state === 'delayed' && existing.timestamp + existing.delay > Date.now() + delay + 50) {
            // It may have become due meanwhile: then it runs soon anyway.
            await (delay ? existing.changeDelay(delay) : existing.promote()).catch(() => undefined);
          } else if (options.rerun && state === 'active' && followUp && options.jobId) {
            return this.add(name, payload, { ...options, jobId: followUpJobId(options.jobId) }, false);
          }
          return { id: jobId };
        }
        await existing.remove().catch(() => undefined);
      }
    }
    const job = await queue.add(name, payload, { ...this.jobOptions(name), jobId, delay: delay || undefined });
    if (job.id === undefined) throw new Error(`BullMQ answered job ${name} without an id`);
    return { id: job.id };
  }

  /**
   * A job with a unique id (no look at an existing one needed) joins the others added in the same
   * moment: one pipeline to Redis (Queue.addBulk) per batch instead of one round trip per job (bench
   * row "send 10,000 text messages": each send adds one). Resolves once the job is in Redis, as a
   * single add does; an error fails every job of that pipeline (some may be in Redis: each is safe to add again).
   */
  private addCoalesced(name: JobName, data: unknown, opts: JobsOptions): Promise<{ id: string }> {
    const queueName = JOB_QUEUE[name];
    let bulk = this.bulk.get(queueName);
    if (!bulk) {
      const queue = this.queues[queueName];
      bulk = new Coalescer(async (jobs) => {
        const added = await queue.addBulk(jobs);
        return added.map((job, i) => {
          if (job.id === undefined) throw new Error(`BullMQ answered job ${jobs[i].name} without an id`);
          return { id: job.id };
        });
      }, BULK_MAX);
      this.bulk.set(queueName, bulk);
    }
    return bulk.add({ name, data, opts });
  }

  /** Jobs in Redis per queue and state (all processes' jobs, not only this one's). */
  async depths(): Promise<QueueDepth[]> {
    const perQueue = await withTimeout(
      Promise.all(
        Object.entries(this.queues).map(async ([queue, q]) => {
          const counts = await q.getJobCounts(...DEPTH_STATES);
          return DEPTH_STATES.map((state) => ({ queue, state, count: counts[state] ?? 0 }));
        }),
      ),
      ENQUEUE_TIMEOUT_MS,
      'getJobCounts',
    );
    return perQueue.flat();
  }

  async upsertSchedule<N extends JobName>(schedulerId: string, name: N, payload: JobPayloads[N], options: ScheduleOptions): Promise<Date | null> {
    await this.ensureAvailable();
    const queue = this.queues[JOB_QUEUE[name]];
    const id = bullId(schedulerId);
    const { attempts, backoff, removeOnComplete, removeOnFail } = this.jobOptions(name);
    await withTimeout(
      queue.upsertJobScheduler(
        id,
        options.pattern
          ? { pattern: options.pattern, tz: 'UTC', startDate: options.startDate }
          : { every: options.everyMs ?? 60_000, startDate: options.startDate },
        { name, data: payload, opts: { attempts, backoff, removeOnComplete, removeOnFail } },
      ),
      ENQUEUE_TIMEOUT_MS,
      'upsertJobScheduler',
    );
    const scheduler = await queue.getJobScheduler(id);
    return scheduler?.next ? new Date(scheduler.next) : null;
  }

  async removeSchedule(schedulerId: string): Promise<void> {
    await this.ensureAvailable();
    const id = bullId(schedulerId);
    // The interface names no job, so the scheduler may live on any queue.
    await withTimeout(Promise.all(Object.values(this.queues).map((q) => q.removeJobScheduler(id))), ENQUEUE_TIMEOUT_MS, 'removeJobScheduler');
  }

  onApplicationBootstrap(): void {
    if (!this.runsWorkers) return;
    for (const name of Object.values(QUEUES)) this.workers.push(this.createWorker(name));
    void this.startWhenReachable();
  }

  private createWorker(queueName: QueueName): Worker {
    const worker = new Worker(queueName, (job: Job, token?: string) => this.process(job, token), {
      connection: this.redis.connectionOptions({
        maxRetriesPerRequest: null,
        connectionName: `${this.config.redisPrefix}-worker-${queueName}`,
      }) as ConnectionOptions,
      prefix: this.config.redisPrefix,
      concurrency: queueName === QUEUES.sms ? this.config.smsWorkerConcurrency : CONCURRENCY[queueName],
      lockDuration: this.config.jobLockMs,
      stalledInterval: this.config.jobLockMs,
      // Outbound SMS: at most SMS_RATE_LIMIT_PER_SECOND provider calls per second across all workers.
      limiter: queueName === QUEUES.sms ? { max: this.config.smsRateLimitPerSecond, duration: 1000 } : undefined,
      settings: {
        backoffStrategy: (attemptsMade: number, _type?: string, err?: Error, job?: { name: string }) => {
          const retryAfter = (err as { retryAfterMs?: number } | undefined)?.retryAfterMs;
          if (typeof retryAfter === 'number' && retryAfter >= 0) return retryAfter;
          const base = JOB_POLICY[(job?.name ?? '') as JobName]?.backoffMs ?? 5_000;
          return base * 2 ** Math.max(0, attemptsMade - 1);
        },
      },
    });
    let lastLogged = 0;
    worker.on('error', (err) => {
      if (Date.now() - lastLogged < 60_000) return;
      lastLogged = Date.now();
      this.logger.warn({ msg: 'worker error', queue: queueName, err: err.message });
    });
    worker.on('failed', (job, err) => {
      if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        this.logger.error({ msg: 'job failed', job: job.name, jobId: job.id, attempts: job.attemptsMade, err: err.message });
      }
    });
    return worker;
  }

  private async process(job: Job, token?: string): Promise<unknown> {
    const handler = this.handlers.get(job.name as JobName);
    if (!handler) throw new UnrecoverableError(`no handler registered for ${job.name}`);
    if (job.id === undefined) throw new UnrecoverableError(`job ${job.name} has no id`);
    const ctx: JobContext = { jobId: job.id, attempt: job.attemptsMade + 1, maxAttempts: job.opts.attempts ?? 1 };
    const name = job.name as JobName;
    try {
      const result = await handler(job.data as never, ctx);
      this.reportOutcome(name, 'completed');
      return result;
    } catch (e) {
      if (e instanceof DeferJobError) {
        // Waiting on something else (another worker's claim, an uncommitted transaction): run again
        // later without using up an attempt.
        await job.moveToDelayed(Date.now() + e.delayMs, token);
        throw new DelayedError();
      }
      const unrecoverable = Boolean((e as { unrecoverable?: boolean }).unrecoverable);
      this.reportOutcome(name, unrecoverable || ctx.attempt >= ctx.maxAttempts ? 'failed' : 'retried');
      if (unrecoverable) throw new UnrecoverableError((e as Error).message);
      throw e;
    }
  }

  /** Start tasks (recovery, schedule sync) run once Redis answers. */
  private async startWhenReachable(): Promise<void> {
    while (!this.closing && !(await this.isAvailable())) await new Promise((r) => setTimeout(r, 1000));
    if (this.closing) return;
    this.logger.log(`workers started on queues ${Object.values(QUEUES).join(', ')}`);
    await this.runStartupTasks();
  }

  /**
   * Graceful stop, before the database closes: workers take no new jobs and finish the running
   * ones within SHUTDOWN_GRACE_MS; jobs still running then are left to BullMQ, which hands them to
   * another worker once their lock expires (each handler is safe to run again).
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    if (!this.workers.length) return;
    const sleep = (ms: number) => new Promise<false>((r) => setTimeout(() => r(false), ms).unref());
    // A worker that never reached Redis has nothing running, and its close() would wait for the connection.
    const grace = this.redis.ready ? this.config.shutdownGraceMs : 0;
    const graceful = Promise.all(this.workers.map((w) => w.close())).then(() => true);
    const done = await Promise.race([graceful, sleep(grace)]);
    if (!done) {
      if (grace > 0) this.logger.warn('shutdown grace elapsed with jobs still running; they will be retried by another worker');
      await Promise.race([Promise.all(this.workers.map((w) => w.close(true).catch(() => undefined))), sleep(1000)]);
      // Not awaited: on a connection that never opened the promise never settles, though the sockets are gone.
      for (const w of this.workers) void w.disconnect().catch(() => undefined);
    }
  }
}
