import { type ExecutionContext, Injectable } from '@nestjs/common';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  type ThrottlerLimitDetail,
  type ThrottlerModuleOptions,
  type ThrottlerStorage,
} from '@nestjs/throttler';
import type { Response } from 'express';
import { CachedReflector } from '../common/route-access.js';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { rateLimitBucketOf } from './rate-limit.bucket.js';

// @nestjs/throttler's metadata keys (throttler.constants, not exported by its index): each is suffixed with the throttler's name.
const THROTTLER_SKIP = 'THROTTLER:SKIP';
const THROTTLER_LIMIT = 'THROTTLER:LIMIT';
const THROTTLER_TTL = 'THROTTLER:TTL';
const THROTTLER_BLOCK_DURATION = 'THROTTLER:BLOCK_DURATION';
const THROTTLER_TRACKER = 'THROTTLER:TRACKER';
const THROTTLER_KEY_GENERATOR = 'THROTTLER:KEY_GENERATOR';

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

  /** Per handler: skipped (@SkipThrottle), counted by check()'s direct path, or left to the library's canActivate. */
  private readonly routeMode = new WeakMap<object, 'skip' | 'direct' | 'library'>();
  private simpleOptions: boolean | undefined;

  /**
   * canActivate with one promise (the counter's round trip) instead of the library's chain of
   * awaits (skip check, limit, ttl, block duration, tracker, storage). Taken when the options are
   * the ones RateLimitModule configures (one throttler, limit and ttl only) and the route carries no
   * @Throttle() override; anything else goes through ThrottlerGuard's own canActivate. The answer is
   * the library's: same key, same counter, same X-RateLimit-* and Retry-After headers, same refusal.
   */
  check(context: ExecutionContext): boolean | Promise<boolean> {
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (req.credential === 'metrics-token' || req.credential === 'sms-signature') return true;
    const mode = this.modeOf(context);
    if (mode === 'skip') return true;
    const throttler = this.throttlers[0];
    const limit = typeof throttler.limit === 'function' ? throttler.limit(context) : throttler.limit;
    const ttl = typeof throttler.ttl === 'function' ? throttler.ttl(context) : throttler.ttl;
    if (mode === 'library' || typeof limit !== 'number' || typeof ttl !== 'number' || Number.isNaN(limit) || Number.isNaN(ttl)) {
      return super.canActivate(context);
    }
    const name = throttler.name ?? 'default';
    const tracker = req.principal ? `u:${req.principal.userId}` : addressOf(req);
    const key = this.generateKey(context, tracker, name);
    const res = context.switchToHttp().getResponse<Response>();
    return this.storageService.increment(key, ttl, limit, ttl, name).then(async (r) => {
      if (r.isBlocked) {
        res.setHeader('Retry-After', String(r.timeToBlockExpire));
        await this.throwThrottlingException(context, { limit, ttl, key, tracker, ...r });
      }
      res.setHeader('X-RateLimit-Limit', String(limit));
      res.setHeader('X-RateLimit-Remaining', String(Math.max(0, limit - r.totalHits)));
      res.setHeader('X-RateLimit-Reset', String(r.timeToExpire));
      return true;
    });
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    return this.check(context);
  }

  private modeOf(context: ExecutionContext): 'skip' | 'direct' | 'library' {
    const handler = context.getHandler();
    let mode = this.routeMode.get(handler);
    if (mode) return mode;
    this.simpleOptions ??= this.hasSimpleOptions();
    const targets = [handler, context.getClass()];
    const name = this.throttlers[0]?.name ?? 'default';
    if (this.simpleOptions && this.reflector.getAllAndOverride<boolean | undefined>(THROTTLER_SKIP + name, targets)) mode = 'skip';
    else if (!this.simpleOptions) mode = 'library';
    else {
      const overridden = [THROTTLER_LIMIT, THROTTLER_TTL, THROTTLER_BLOCK_DURATION, THROTTLER_TRACKER, THROTTLER_KEY_GENERATOR].some(
        (k) => this.reflector.getAllAndOverride<unknown>(k + name, targets) !== undefined,
      );
      mode = overridden ? 'library' : 'direct';
    }
    this.routeMode.set(handler, mode);
    return mode;
  }

  /** One throttler with a limit and a ttl, and no option that changes how a request is tracked, keyed or skipped. */
  private hasSimpleOptions(): boolean {
    if (Array.isArray(this.options) || this.throttlers.length !== 1) return false;
    const t = this.throttlers[0];
    const o = this.options;
    const extra = (x: object, allowed: string[]) => Object.entries(x).some(([k, v]) => v !== undefined && !allowed.includes(k));
    return !extra(t, ['name', 'limit', 'ttl']) && !extra(o, ['throttlers', 'storage', 'errorMessage']);
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
