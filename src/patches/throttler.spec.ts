/**
 * The @nestjs/throttler internals src/patches/throttler.ts relies on: the metadata keys its
 * decorators write. A failure here after an upgrade means the rate-limit guard no longer sees
 * @SkipThrottle() (routes would be counted) or @Throttle() (routes would lose their own settings).
 */
import { describe, expect, it } from '@jest/globals';
import { Reflector } from '@nestjs/core';
import { SkipThrottle, Throttle } from '@nestjs/throttler';
import { THROTTLER_OVERRIDES, THROTTLER_SKIP, overridesThrottler, skipsThrottler } from './throttler.js';

class Routes {
  @SkipThrottle()
  skipped(): void {}
  @Throttle({ default: { limit: 3, ttl: 1000, blockDuration: 5000, getTracker: () => 't', generateKey: () => 'k' } })
  throttled(): void {}
  plain(): void {}
}

@SkipThrottle()
class SkippedController {
  @SkipThrottle({ default: false })
  counted(): void {}
  inherited(): void {}
}

const reflector = new Reflector();
type Targets = Parameters<Reflector['getAllAndOverride']>[1];
const route = (cls: new () => object, name: string): Targets => [(cls.prototype as Record<string, () => void>)[name], cls];

describe('@nestjs/throttler metadata keys (src/patches/throttler.ts)', () => {
  it('@SkipThrottle() writes THROTTLER:SKIP<name> = true on the handler or the class', () => {
    expect(Reflect.getMetadata(THROTTLER_SKIP + 'default', route(Routes, 'skipped')[0])).toBe(true);
    expect(Reflect.getMetadata(THROTTLER_SKIP + 'default', SkippedController)).toBe(true);
  });

  it('@Throttle() writes one key per setting, each suffixed with the throttler name', () => {
    const written = THROTTLER_OVERRIDES.map((k) => Reflect.getMetadata(k + 'default', route(Routes, 'throttled')[0]) as unknown);
    expect(written.map((v) => v !== undefined)).toEqual(THROTTLER_OVERRIDES.map(() => true));
    expect(written.slice(0, 3)).toEqual([3, 1000, 5000]);
  });

  it('reads skip and overrides as the library does (the handler wins over its class)', () => {
    expect(skipsThrottler(reflector, route(Routes, 'skipped'), 'default')).toBe(true);
    expect(skipsThrottler(reflector, route(Routes, 'plain'), 'default')).toBe(false);
    expect(skipsThrottler(reflector, route(SkippedController, 'inherited'), 'default')).toBe(true);
    expect(skipsThrottler(reflector, route(SkippedController, 'counted'), 'default')).toBe(false);
    expect(overridesThrottler(reflector, route(Routes, 'throttled'), 'default')).toBe(true);
    expect(overridesThrottler(reflector, route(Routes, 'plain'), 'default')).toBe(false);
    expect(overridesThrottler(reflector, route(Routes, 'throttled'), 'other')).toBe(false);
  });
});
