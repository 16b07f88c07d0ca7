import { Inject, Injectable } from '@nestjs/common';
import { getStorageToken } from '@nestjs/throttler';
import { accountCounterKey } from './rate-limit.guard.js';
import type { RateLimitStorage } from './rate-limit.storage.js';

/** What other features may ask of the rate limiter: where an account's plan counter stands, without counting. */
@Injectable()
export class RateLimitService {
  constructor(@Inject(getStorageToken()) private readonly storage: RateLimitStorage) {}

  /** Requests counted in the account's current window and the time until it resets. */
  accountUsage(userId: number): Promise<{ hits: number; resetMs: number }> {
    return this.storage.peek(accountCounterKey(userId));
  }
}
