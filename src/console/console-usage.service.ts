import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { RateLimitService } from '../rate-limit/rate-limit.service.js';
import type { ConsoleSession } from './console.service.js';

export interface UsageRecord {
  plan: string;
  limit: number;
  used: number;
  remaining: number;
  windowSeconds: number;
  resetSeconds: number;
}

/** A user's plan and where their API rate limit stands now, read from the limiter's own counter without counting. */
@Injectable()
export class ConsoleUsageService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly rateLimits: RateLimitService,
  ) {}

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
}
