import type { ExecutionContext } from '@nestjs/common';

/**
 * One check of the request path (authentication, rate limit, permission, same origin, body type,
 * Idempotency-Key): the fused guard (request-guard.ts) runs them in order. A check answers at once
 * when it can and with a promise only when it waits for something; false stops the request (403),
 * a thrown error answers it.
 */
export interface RequestCheck {
  check(context: ExecutionContext): boolean | Promise<boolean>;
}

/** The ordered list of checks, provided by the composition root (app.module.ts), which knows the features that own them. */
export const REQUEST_CHECKS = Symbol('REQUEST_CHECKS');
