import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ApiUsageRepository, type UsageHour } from './api-usage.repository.js';
import { UsageCounter } from './usage-counter.js';

/** How often each API process adds its counted usage to PostgreSQL. */
export const USAGE_FLUSH_INTERVAL_MS = 10_000;
/** Hours kept: 30 days. */
export const USAGE_RETENTION_MS = 30 * 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;

export type { UsageHour } from './api-usage.repository.js';

/**
 * API usage per token and hour, off the request path: the rate limiter counts in memory
 * (UsageCounter), and this service adds the tallies to api_usage_hourly every
 * USAGE_FLUSH_INTERVAL_MS in one statement (and before the process stops), then deletes hours
 * older than 30 days at most once an hour. A write that fails keeps its tallies for the next one.
 */
@Injectable()
export class ApiUsageService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('ApiUsage');
  private timer: NodeJS.Timeout | null = null;
  /** Writes run one after another: a flush asked for during one runs after it. */
  private chain: Promise<void> = Promise.resolve();
  private prunedAt = 0;

  constructor(
    private readonly counter: UsageCounter,
    private readonly repo: ApiUsageRepository,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.role === 'worker') return;
    this.counter.onFull = () => void this.flush();
    this.timer = setInterval(() => void this.flush(), USAGE_FLUSH_INTERVAL_MS).unref();
  }

  async onModuleDestroy(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.counter.onFull = null;
    await this.flush();
  }

  /** Adds what this process counted so far to PostgreSQL (the usage page calls it before reading). */
  flush(): Promise<void> {
    this.chain = this.chain.then(() => this.flushOnce());
    return this.chain;
  }

  private async flushOnce(): Promise<void> {
    const { tallies, dropped } = this.counter.drain();
    if (dropped) this.logger.warn({ msg: 'API usage not counted: too many tokens between two writes', requests: dropped });
    try {
      await this.repo.add(tallies);
      const now = this.clock.nowMs();
      if (now - this.prunedAt >= PRUNE_EVERY_MS) {
        this.prunedAt = now;
        await this.repo.pruneBefore(new Date(now - USAGE_RETENTION_MS));
      }
    } catch (e) {
      this.counter.restore(tallies);
      this.logger.warn({ msg: 'API usage write failed; retried with the next one', err: e instanceof Error ? e.message : String(e) });
    }
  }

  /** A user's usage per token and hour over the last `hours` hours (the current hour included), oldest first. */
  async hoursOf(userId: number, hours: number): Promise<{ from: Date; to: Date; rows: UsageHour[] }> {
    const now = this.clock.nowMs();
    const to = now - (now % 3_600_000) + 3_600_000;
    const from = to - hours * 3_600_000;
    return { from: new Date(from), to: new Date(to), rows: await this.repo.hoursOf(userId, new Date(from), new Date(to)) };
  }
}
