import { Inject, Injectable } from '@nestjs/common';
import { ApiTokensService } from '../auth/api-tokens.service.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ApiUsageService } from '../rate-limit/api-usage.service.js';
import { RateLimitService } from '../rate-limit/rate-limit.service.js';
import type { ConsoleSession } from './console.service.js';
import { hourlySeries, type UsageSeries } from './usage-chart.js';

export interface UsageRecord {
  plan: string;
  limit: number;
  used: number;
  remaining: number;
  windowSeconds: number;
  resetSeconds: number;
}

export interface UsagePageData {
  plan: string;
  limit: number;
  windowSeconds: number;
  /** The plan's limit as requests per hour (the chart's unit). */
  limitPerHour: number;
  range: '24h' | '7d';
  /** The account's total, then one chart per token of this page that made requests in the range. */
  charts: { label: string; tokenId: number | null; series: UsageSeries }[];
  /** Names of this page's tokens without requests in the range. */
  idle: string[];
  page: number;
  pageSize: number;
  tokenTotal: number;
}

const TOKENS_PER_PAGE = 10;

/** A user's plan and where their API rate limit stands, and their usage per token and hour. */
@Injectable()
export class ConsoleUsageService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly rateLimits: RateLimitService,
    private readonly apiUsage: ApiUsageService,
    private readonly tokens: ApiTokensService,
  ) {}

  /** Where the rate limit stands now, read from the limiter's own counter without counting. */
  async usage(session: ConsoleSession): Promise<UsageRecord> {
    const limit = this.config.rateLimits[session.user.plan];
    const { hits, resetMs } = await this.rateLimits.accountUsage(session.user.id);
    return {
      plan: session.user.plan,
      limit,
      used: Math.min(hits, limit),
      remaining: Math.max(0, limit - hits),
      windowSeconds: this.config.rateLimitWindowSeconds,
      resetSeconds: Math.ceil(resetMs / 1000),
    };
  }

  /**
   * The usage page: requests per hour over the range, for the account and for each of its tokens
   * (ten per page), against the plan's limit. This process's counts not yet written are written
   * first, so the page shows the requests just made through this instance.
   */
  async page(session: ConsoleSession, range: '24h' | '7d', page: number): Promise<UsagePageData> {
    const hours = range === '24h' ? 24 : 168;
    await this.apiUsage.flush();
    const [{ from, rows }, tokens] = await Promise.all([
      this.apiUsage.hoursOf(session.user.id, hours),
      this.tokens.list({ limit: String(TOKENS_PER_PAGE), page: String(page), orderBy: 'id', orderByDir: 'desc' }, session.principal),
    ]);
    const limit = this.config.rateLimits[session.user.plan];
    const windowSeconds = this.config.rateLimitWindowSeconds;
    const charts: UsagePageData['charts'] = [{ label: 'All tokens', tokenId: null, series: hourlySeries(rows, from.getTime(), hours, null) }];
    const idle: string[] = [];
    for (const t of tokens.tokens) {
      const series = hourlySeries(rows, from.getTime(), hours, t.id);
      if (series.requests.some((n) => n > 0)) charts.push({ label: `Token ${t.name} (${t.prefix}…)`, tokenId: t.id, series });
      else idle.push(t.name);
    }
    return {
      plan: session.user.plan,
      limit,
      windowSeconds,
      limitPerHour: Math.round((limit * 3600) / windowSeconds),
      range,
      charts,
      idle,
      page,
      pageSize: TOKENS_PER_PAGE,
      tokenTotal: tokens.total,
    };
  }
}
