import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard, ThrottlerLimitDetail } from '@nestjs/throttler';
import type { Response } from 'express';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';

/**
 * Plan limits (decisions §5) on @nestjs/throttler: one counter per account (the token's user) over
 * a fixed window, or per client address for requests without a valid token. The limit and window
 * come from the throttler options (see RateLimitModule), resolved per request.
 */
@Injectable()
export class RateLimitGuard extends ThrottlerGuard {
  protected override async getTracker(req: Record<string, unknown>): Promise<string> {
    const r = req as unknown as AppRequest;
    return r.principal ? `u:${r.principal.userId}` : `ip:${r.ip ?? r.socket.remoteAddress ?? 'unknown'}`;
  }

  /** One counter per tracker for the whole API, not per route. */
  protected override generateKey(_context: ExecutionContext, tracker: string, name: string): string {
    return `${name}:${tracker}`;
  }

  protected override async throwThrottlingException(context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    // The throttler sets these only on allowed requests; a 429 carries them too (decisions §5).
    const res = context.switchToHttp().getResponse<Response>();
    res.setHeader('X-RateLimit-Limit', String(detail.limit));
    res.setHeader('X-RateLimit-Remaining', '0');
    res.setHeader('X-RateLimit-Reset', String(detail.timeToExpire));
    throw new AppError('rate_limited', `Rate limit of ${detail.limit} requests per ${Math.round(detail.ttl / 1000)} s exceeded; retry in ${detail.timeToBlockExpire} s`, undefined, {
      'Retry-After': String(detail.timeToBlockExpire),
    });
  }
}
