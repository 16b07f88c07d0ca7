import type { ExecutionContext } from '@nestjs/common';

/**
 * A value the request path needs, answered at once when it is known (a cache hit, a request without
 * an Idempotency-Key) and as a promise only when it waits for I/O. The union is the contract on
 * purpose: each await on the request path costs a microtask hop per request (src/server/README.md,
 * "The fused guard"), so a caller tests `instanceof Promise` and stays synchronous when it can.
 */
export type NowOrLater<T> = T | Promise<T>;

/**
 * One check of the request path (authentication, rate limit, permission, same origin, body type,
 * Idempotency-Key): the fused guard (request-guard.ts) runs them in order. A check answers at once
 * when it can and with a promise only when it waits for something; false stops the request (403),
 * a thrown error answers it.
 */
export interface RequestCheck {
  check(context: ExecutionContext): NowOrLater<boolean>;
}

/** The ordered list of checks, provided by the composition root (app.module.ts), which knows the features that own them. */
export const REQUEST_CHECKS = Symbol('REQUEST_CHECKS');
