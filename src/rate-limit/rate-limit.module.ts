import { Module } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { AppRequest } from '../common/request.js';
import { RedisService } from '../redis/redis.service.js';
import { RateLimitStorage } from './rate-limit.storage.js';
import { RateLimitGuard } from './rate-limit.guard.js';
import { RateLimitService } from './rate-limit.service.js';
import { rateLimitBucketOf } from './rate-limit.bucket.js';
import { UsageCounter } from './usage-counter.js';

const requestOf = (ctx: import('@nestjs/common').ExecutionContext) => ctx.switchToHttp().getRequest<AppRequest>();

@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      inject: [APP_CONFIG, RedisService],
      useFactory: (config: AppConfig, redis: RedisService) => ({
        storage: new RateLimitStorage(redis),
        throttlers: [
          {
            name: 'default',
            limit: (ctx) => {
              if (rateLimitBucketOf(ctx) === 'oauth') return config.oauthRateLimitPerMinute;
              const p = requestOf(ctx).principal;
              return p ? config.rateLimits[p.plan] : config.anonymousRateLimit;
            },
            ttl: (ctx) => {
              if (rateLimitBucketOf(ctx) === 'oauth') return 60_000;
              return (requestOf(ctx).principal ? config.rateLimitWindowSeconds : config.anonymousRateLimitWindowSeconds) * 1000;
            },
          },
        ],
      }),
    }),
  ],
  providers: [RateLimitGuard, RateLimitService, UsageCounter],
  exports: [RateLimitGuard, RateLimitService, UsageCounter, ThrottlerModule],
})
export class RateLimitModule {}
