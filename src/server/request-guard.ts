import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { type NowOrLater, REQUEST_CHECKS, type RequestCheck } from '../common/request-check.js';

/**
 * The one global guard (why, and the measurement: src/server/README.md, "The fused guard"): the six
 * checks every request passes, in their order, in one pass. Order matters: check the route's credential, count the request, check
 * the permission, refuse cross-site state changes on routes whose credential a browser sends by
 * itself, refuse a body type the route does not take, and last (the account known, the request
 * counted and allowed) claim, record or replay an Idempotency-Key.
 *
 * Each step is its owner's check(), so every rule stays where it was written. A step answers at once
 * when it can and with a promise only when it waits (NowOrLater); a step that answers false stops the
 * chain, as Nest's would (403).
 */
@Injectable()
export class RequestGuard implements CanActivate {
  constructor(@Inject(REQUEST_CHECKS) private readonly checks: readonly RequestCheck[]) {}

  canActivate(context: ExecutionContext): NowOrLater<boolean> {
    return this.from(0, context);
  }

  private from(first: number, context: ExecutionContext): NowOrLater<boolean> {
    for (let i = first; i < this.checks.length; i++) {
      const result = this.checks[i].check(context);
      if (result === true) continue;
      if (result === false) return false;
      return result.then((ok) => (ok ? this.from(i + 1, context) : false));
    }
    return true;
  }
}
