/**
 * @nestjs/throttler internals the rate-limit guard relies on (src/rate-limit/rate-limit.guard.ts):
 * the metadata keys its decorators write, which its index does not export (they live in
 * throttler.constants). Each key is suffixed with the throttler's name. throttler.spec.ts applies
 * the library's own decorators and fails with a clear message when an upgrade renames a key.
 */
import type { Reflector } from '@nestjs/core';

/** Written by @SkipThrottle(). */
export const THROTTLER_SKIP = 'THROTTLER:SKIP';
/** Written by @Throttle(): a route's own limit, window, block duration, tracker or key generator. */
export const THROTTLER_OVERRIDES = ['THROTTLER:LIMIT', 'THROTTLER:TTL', 'THROTTLER:BLOCK_DURATION', 'THROTTLER:TRACKER', 'THROTTLER:KEY_GENERATOR'] as const;

/** The handler and its controller, as Reflector.getAllAndOverride takes them. */
type Targets = Parameters<Reflector['getAllAndOverride']>[1];

/** Whether @SkipThrottle() (for throttler `name`) is on the handler or its controller (the handler's value wins). */
export function skipsThrottler(reflector: Reflector, targets: Targets, name: string): boolean {
  return reflector.getAllAndOverride<boolean | undefined>(THROTTLER_SKIP + name, targets) === true;
}

/** Whether @Throttle() gives the handler or its controller its own settings for throttler `name`. */
export function overridesThrottler(reflector: Reflector, targets: Targets, name: string): boolean {
  return THROTTLER_OVERRIDES.some((k) => reflector.getAllAndOverride<unknown>(k + name, targets) !== undefined);
}
