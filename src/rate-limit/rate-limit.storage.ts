import { Injectable, Logger } from '@nestjs/common';
import type { ThrottlerStorage } from '@nestjs/throttler';
import type { Redis } from 'ioredis';
import { RedisService } from '../redis/redis.service.js';

interface StorageRecord {
  totalHits: number;
  timeToExpire: number;
  isBlocked: boolean;
  timeToBlockExpire: number;
}

// Fixed window: the first hit of a window creates the counter with the window's TTL.
const INCR_SCRIPT = `
local c = redis.call('INCR', KEYS[1])
local t = redis.call('PTTL', KEYS[1])
if c == 1 or t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); t = tonumber(ARGV[1]) end
return {c, t}`;

/**
 * Rate-limit counters: in Redis when it is configured, so every API instance shares them; in
 * memory otherwise. While Redis is unreachable the counters fall back to this instance's memory
 * (each instance then enforces the limit on its own) rather than failing requests; they return
 * to Redis by themselves when it is back.
 */
@Injectable()
export class RateLimitStorage implements ThrottlerStorage {
  private readonly logger = new Logger('RateLimit');
  private readonly memory = new Map<string, { hits: number; expiresAt: number }>();
  private degraded = false;
  private sweepAt = 0;

  constructor(private readonly redis: RedisService) {}

  /** The counter script as a defined command: sent once, then called by its SHA (EVALSHA). */
  private incr(key: string, ttlMs: number): Promise<[number, number]> {
    const client = this.redis.client as unknown as { sfRateLimitIncr?: (key: string, ttl: number) => Promise<[number, number]> } & Redis;
    if (!client.sfRateLimitIncr) client.defineCommand('sfRateLimitIncr', { numberOfKeys: 1, lua: INCR_SCRIPT });
    return client.sfRateLimitIncr!(key, ttlMs);
  }

  async increment(key: string, ttl: number, limit: number): Promise<StorageRecord> {
    let hits: number;
    let pttl: number;
    if (this.redis.enabled && this.redis.ready) {
      try {
        const [c, t] = await this.incr(this.redis.key('rl', key), ttl);
        hits = c;
        pttl = t;
        if (this.degraded) this.logger.log('rate-limit counters are back in Redis');
        this.degraded = false;
      } catch (e) {
        ({ hits, pttl } = this.incrementInMemory(key, ttl, e as Error));
      }
    } else {
      ({ hits, pttl } = this.incrementInMemory(key, ttl, this.redis.enabled ? new Error('redis not ready') : null));
    }
    const seconds = Math.max(1, Math.ceil(pttl / 1000));
    const blocked = hits > limit;
    return { totalHits: hits, timeToExpire: seconds, isBlocked: blocked, timeToBlockExpire: blocked ? seconds : 0 };
  }

  /** A counter's hits and the ms left in its window, without counting (the account console shows usage). */
  async peek(key: string): Promise<{ hits: number; resetMs: number }> {
    if (this.redis.enabled && this.redis.ready) {
      try {
        const full = this.redis.key('rl', key);
        const [hits, pttl] = await Promise.all([this.redis.client!.get(full), this.redis.client!.pttl(full)]);
        return { hits: Number(hits ?? 0), resetMs: pttl > 0 ? pttl : 0 };
      } catch {
        /* fall through to this instance's counters */
      }
    }
    const rec = this.memory.get(key);
    const now = Date.now();
    return rec && rec.expiresAt > now ? { hits: rec.hits, resetMs: rec.expiresAt - now } : { hits: 0, resetMs: 0 };
  }

  private incrementInMemory(key: string, ttl: number, cause: Error | null): { hits: number; pttl: number } {
    if (cause && !this.degraded) {
      this.degraded = true;
      this.logger.warn({ msg: 'Redis unavailable: rate limits are counted per instance until it returns', err: cause.message });
    }
    const now = Date.now();
    if (now > this.sweepAt) {
      for (const [k, v] of this.memory) if (v.expiresAt <= now) this.memory.delete(k);
      this.sweepAt = now + 60_000;
    }
    let rec = this.memory.get(key);
    if (!rec || rec.expiresAt <= now) {
      rec = { hits: 0, expiresAt: now + ttl };
      this.memory.set(key, rec);
    }
    rec.hits++;
    return { hits: rec.hits, pttl: rec.expiresAt - now };
  }
}
