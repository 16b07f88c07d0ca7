import { type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { InjectThrottlerOptions, InjectThrottlerStorage, type ThrottlerModuleOptions, type ThrottlerOptions, type ThrottlerStorage } from '@nestjs/throttler';
import type { Response } from 'express';
import { AppError } from '../common/errors.js';
import type { NowOrLater, RequestCheck } from '../common/request-check.js';
import type { AppRequest } from '../common/request.js';
import { overridesThrottler, skipsThrottler } from '../patches/throttler.js';
import { rateLimitBucketOf } from './rate-limit.bucket.js';
import { UsageCounter } from './usage-counter.js';

const addressOf = (r: AppRequest) => `ip:${r.ip ?? r.socket.remoteAddress ?? 'unknown'}`;

/** The counter of an account's plan limit (the 'default' throttler, tracked per token owner). */
export const accountCounterKey = (userId: number) => `default:u:${userId}`;

/** The throttler of the options RateLimitModule configures: one, with a limit and a window and nothing else. */
function onlyThrottler(options: ThrottlerModuleOptions): ThrottlerOptions {
  const throttlers = Array.isArray(options) ? options : options.throttlers;
  const extra = (x: object, allowed: string[]) => Object.entries(x).some(([k, v]) => v !== undefined && !allowed.includes(k));
  if (
    Array.isArray(options) ||
    throttlers.length !== 1 ||
    extra(throttlers[0], ['name', 'limit', 'ttl']) ||
    extra(options, ['throttlers', 'storage', 'errorMessage'])
  ) {
    throw new Error('RateLimitGuard counts with one throttler that has a limit and a ttl only (see RateLimitModule)');
  }
  return throttlers[0];
}

/**
 * Plan limits on @nestjs/throttler's options and storage: one counter per account (the token's user)
 * over a fixed window, or per client address for requests without a valid token. The limit and window
 * come from the throttler options (see RateLimitModule), resolved per request. Routes marked with
 * @RateLimitBucket() count in their own bucket, per client address; routes marked @SkipThrottle() are
 * not counted. One step of the fused guard (one promise: the counter's round trip), not a Nest guard.
 */
@Injectable()
export class RateLimitGuard implements RequestCheck {
  private readonly throttler: ThrottlerOptions;
  private readonly name: string;
  private readonly reflector = new Reflector();
  /** Per handler: whether @SkipThrottle() is on it (read once). */
  private readonly skipped = new WeakMap<object, boolean>();

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() private readonly storage: ThrottlerStorage,
    private readonly usage: UsageCounter,
  ) {
    this.throttler = onlyThrottler(options);
    this.name = this.throttler.name ?? 'default';
  }

  /**
   * Counts the request and sets X-RateLimit-Limit, -Remaining and -Reset, or refuses it (429
   * rate_limited, with Retry-After) once the counter is past the limit. Verified machine credentials
   * (the metrics scraper's METRICS_TOKEN, the SMS gateway's signed delivery reports) are not
   * plan-limited; a refused or missing credential is counted like any anonymous request, per
   * address, so such routes cannot be used to guess secrets quickly.
   */
  check(context: ExecutionContext): NowOrLater<boolean> {
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (req.credential === 'metrics-token' || req.credential === 'sms-signature') return true;
    if (this.skips(context)) return true;
    const limit = typeof this.throttler.limit === 'function' ? this.throttler.limit(context) : this.throttler.limit;
    const ttl = typeof this.throttler.ttl === 'function' ? this.throttler.ttl(context) : this.throttler.ttl;
    if (typeof limit !== 'number' || typeof ttl !== 'number' || Number.isNaN(limit) || Number.isNaN(ttl)) {
      throw new Error('RateLimitGuard: the throttler limit and ttl resolve to numbers (see RateLimitModule)');
    }
    const key = this.keyOf(context, req);
    const res = context.switchToHttp().getResponse<Response>();
    return this.storage.increment(key, ttl, limit, ttl, this.name).then((r) => {
      // Usage per API token for the console (in memory; written in batches by ApiUsageService).
      const p = req.principal;
      if (p && p.apiTokenId > 0) this.usage.count(p.apiTokenId, p.userId, r.isBlocked);
      if (r.isBlocked) {
        res.setHeader('Retry-After', String(r.timeToBlockExpire));
        throw new AppError(
          'rate_limited',
          `Rate limit of ${limit} requests per ${Math.round(ttl / 1000)} s exceeded; retry in ${r.timeToBlockExpire} s`,
          undefined,
          {
            'Retry-After': String(r.timeToBlockExpire),
            // The limit headers on the refusal too, so a client sees which limit it hit and when it resets.
            'X-RateLimit-Limit': String(limit),
            'X-RateLimit-Remaining': '0',
            'X-RateLimit-Reset': String(r.timeToBlockExpire),
          },
        );
      }
      res.setHeader('X-RateLimit-Limit', String(limit));
      res.setHeader('X-RateLimit-Remaining', String(Math.max(0, limit - r.totalHits)));
      res.setHeader('X-RateLimit-Reset', String(r.timeToExpire));
      return true;
    });
  }

  /**
   * One counter per account (or address) for the whole API, not per route. A route with its own
   * bucket counts per client address in that bucket, whatever token the request carries.
   */
  private keyOf(context: ExecutionContext, req: AppRequest): string {
    const bucket = rateLimitBucketOf(context);
    if (bucket) return `${this.name}:${bucket}:${addressOf(req)}`;
    return `${this.name}:${req.principal ? `u:${req.principal.userId}` : addressOf(req)}`;
  }

  /** @SkipThrottle() on the route; a route's own @Throttle() settings are not supported (refused loudly, not ignored). */
  private skips(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    let skip = this.skipped.get(handler);
    if (skip === undefined) {
      const targets = [handler, context.getClass()];
      if (overridesThrottler(this.reflector, targets, this.name)) {
        throw new Error(`RateLimitGuard: @Throttle() on ${context.getClass().name}.${handler.name} is not supported; limits come from RateLimitModule`);
      }
      skip = skipsThrottler(this.reflector, targets, this.name);
      this.skipped.set(handler, skip);
    }
    return skip;
  }
}
