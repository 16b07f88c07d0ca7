import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { RedisService } from '../redis/redis.service.js';

/**
 * Reserves `n` send slots on one shared timeline (GCRA): slots are `interval` ms apart, starting
 * at the later of now + lead and the end of the last reservation. Answers the delay (ms) until the first
 * slot. Redis' own clock is used, so every worker process agrees on "now".
 */
const RESERVE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local lead = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local start = math.max(tat, now + lead)
local finish = start + n * interval
redis.call('SET', KEYS[1], string.format('%.3f', finish), 'PX', math.ceil(finish - now) + 60000)
return string.format('%.3f', start - now)
`;

/**
 * SMS_MAX_PER_SECOND: the cap on messages handed to the provider per second, shared by every worker.
 * A sender reserves slots for the messages it is about to send and calls the provider for the i-th
 * at `first + i * (1000 / N)` ms: slots are exactly 1/N s apart on one timeline, so any one-second
 * window holds at most N of them, whichever processes took them. Through Redis (a Lua script, one
 * round trip per batch); without Redis, the same timeline in this process. With 0 there is no cap.
 */
@Injectable()
export class SmsSendRate {
  private localTat = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly redis: RedisService,
  ) {}

  get capped(): boolean {
    return this.config.smsMaxPerSecond > 0;
  }

  /** Messages per claim that fit in about one second (so a cancel or a crash strands little). */
  get batchHint(): number {
    return this.capped ? Math.max(1, this.config.smsMaxPerSecond) : Number.MAX_SAFE_INTEGER;
  }

  /** Milliseconds between two slots. */
  get intervalMs(): number {
    return this.capped ? 1000 / this.config.smsMaxPerSecond : 0;
  }

  /**
   * Reserves `n` slots, the first no earlier than `leadMs` from now (time the caller needs to get
   * ready, so it is never late for its own slots); answers, for each, how many ms from now it may be
   * sent (all 0 without a cap).
   * Redis errors propagate (the caller retries later rather than sending over the cap).
   */
  async reserve(n: number, leadMs = 0): Promise<number[]> {
    if (!this.capped || n <= 0) return new Array<number>(Math.max(0, n)).fill(0);
    const interval = this.intervalMs;
    let first: number;
    const client = this.redis.client;
    if (client) {
      const answer = (await client.eval(RESERVE_LUA, 1, this.redis.key('sms', 'send-rate'), interval.toFixed(3), String(n), String(leadMs))) as string;
      first = Number(answer);
    } else {
      const now = Date.now();
      const start = Math.max(this.localTat, now + leadMs);
      this.localTat = start + n * interval;
      first = start - now;
    }
    return Array.from({ length: n }, (_, i) => first + i * interval);
  }
}
