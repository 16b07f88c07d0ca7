import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { REQUEST_CHECKS, type RequestCheck } from '../common/request-check.js';

/**
 * The one global guard (issue 18: the request path's cost): the six checks every request passes, in
 * their order, in one pass. Order matters: check the route's credential, count the request, check
 * the permission, refuse cross-site state changes on routes whose credential a browser sends by
 * itself, refuse a body type the route does not take, and last (the account known, the request
 * counted and allowed) claim, record or replay an Idempotency-Key.
 *
 * Each step is its guard's own check, so every rule stays where it was written; what changes is
 * the cost around them. Nest awaits each global guard in turn (six promise hops and six trips
 * through its guard consumer per request); here a step that can answer at once (a cached token, a
 * permission, a request without Idempotency-Key) answers without a promise, and only the steps that
 * wait for something (the rate-limit counter's Redis round trip, a token's first database read, an
 * idempotency claim) cost one. A step that answers false stops the chain, as Nest's would (403).
 */
@Injectable()
export class RequestGuard implements CanActivate {
  constructor(@Inject(REQUEST_CHECKS) private readonly checks: readonly RequestCheck[]) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    return this.from(0, context);
  }

  private from(first: number, context: ExecutionContext): boolean | Promise<boolean> {
    for (let i = first; i < this.checks.length; i++) {
      const result = this.checks[i].check(context);
      if (result === true) continue;
      if (result === false) return false;
      return result.then((ok) => (ok ? this.from(i + 1, context) : false));
    }
    return true;
  }
}
