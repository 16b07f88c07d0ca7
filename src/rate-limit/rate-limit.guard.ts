import { type ExecutionContext, Injectable } from '@nestjs/common';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  type ThrottlerLimitDetail,
  type ThrottlerModuleOptions,
  type ThrottlerStorage,
} from '@nestjs/throttler';
import { CachedReflector } from '../common/route-access.js';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { rateLimitBucketOf } from './rate-limit.bucket.js';

const addressOf = (r: AppRequest) => `ip:${r.ip ?? r.socket.remoteAddress ?? 'unknown'}`;

/** The counter of an account's plan limit (the 'default' throttler, tracked per token owner). */
export const accountCounterKey = (userId: number) => `default:u:${userId}`;

/**
 * Plan limits (decisions §5) on @nestjs/throttler: one counter per account (the token's user) over
 * a fixed window, or per client address for requests without a valid token. The limit and window
 * come from the throttler options (see RateLimitModule), resolved per request. Routes marked with
 * @RateLimitBucket() count in their own bucket, per client address.
 */
@Injectable()
export class RateLimitGuard extends ThrottlerGuard {
  // ThrottlerGuard reads six metadata keys per request; the route's metadata is read once per handler.
  constructor(@InjectThrottlerOptions() options: ThrottlerModuleOptions, @InjectThrottlerStorage() storage: ThrottlerStorage) {
    super(options, storage, new CachedReflector());
  }

  /**
   * Verified machine credentials (the metrics scraper's METRICS_TOKEN, the SMS gateway's signed
   * delivery reports) are not plan-limited. A refused or missing credential is counted like any
   * anonymous request, per address, so such routes cannot be used to guess secrets quickly.
   */
  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    const credential = context.switchToHttp().getRequest<AppRequest>().credential;
    return credential === 'metrics-token' || credential === 'sms-signature';
  }

  protected override async getTracker(req: Record<string, unknown>): Promise<string> {
    const r = req as unknown as AppRequest;
    return r.principal ? `u:${r.principal.userId}` : addressOf(r);
  }

  /**
   * One counter per tracker for the whole API, not per route. A route with its own bucket counts
   * per client address in that bucket, whatever token the request carries.
   */
  protected override generateKey(context: ExecutionContext, tracker: string, name: string): string {
    const bucket = rateLimitBucketOf(context);
    return bucket ? `${name}:${bucket}:${addressOf(context.switchToHttp().getRequest<AppRequest>())}` : `${name}:${tracker}`;
  }

  protected override async throwThrottlingException(_context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    throw new AppError(
      'rate_limited',
      `Rate limit of ${detail.limit} requests per ${Math.round(detail.ttl / 1000)} s exceeded; retry in ${detail.timeToBlockExpire} s`,
      undefined,
      {
        'Retry-After': String(detail.timeToBlockExpire),
        // The limit headers on the refusal too, so a client sees which limit it hit and when it resets.
        'X-RateLimit-Limit': String(detail.limit),
        'X-RateLimit-Remaining': '0',
        'X-RateLimit-Reset': String(detail.timeToBlockExpire),
      },
    );
  }
}
