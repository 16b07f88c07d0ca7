/**
 * The rate limiter as the request path runs it: RateLimitModule's throttler options and Redis storage
 * (the machine's Redis, a prefix of this spec's own), the guard's one entry point check(), and
 * RateLimitService reading an account's counter. Counting, the limits of each kind of caller, the
 * X-RateLimit-* and Retry-After headers, and the OAuth bucket.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { ExecutionContext, INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SkipThrottle, Throttle } from '@nestjs/throttler';
import { randomBytes } from 'node:crypto';
import { TEST_REDIS_URL } from '../../test/support/app.js';
import { waitUntil } from '../../test/support/wait.js';
import { AppError } from '../common/errors.js';
import type { AppRequest, Principal } from '../common/request.js';
import { ConfigModule } from '../config/config.module.js';
import { loadConfig } from '../config/config.js';
import { RedisModule } from '../redis/redis.module.js';
import { RedisService } from '../redis/redis.service.js';
import { RateLimitBucket } from './rate-limit.bucket.js';
import { RateLimitGuard } from './rate-limit.guard.js';
import { RateLimitModule } from './rate-limit.module.js';
import { RateLimitService } from './rate-limit.service.js';
import { UsageCounter } from './usage-counter.js';
import { CommonModule } from '../common/common.module.js';

class Routes {
  plain(): void {}
  @RateLimitBucket('oauth')
  token(): void {}
  @SkipThrottle()
  download(): void {}
  @Throttle({ default: { limit: 1, ttl: 1000 } })
  own(): void {}
}

let address = 0;
/** A fresh client address per test, so counters never carry over. */
const nextAddress = () => `10.0.${Math.floor(++address / 250)}.${address % 250}`;

interface Call {
  headers: Record<string, string>;
  context: ExecutionContext;
}

function call(route: keyof Routes, req: Partial<AppRequest>): Call {
  const headers: Record<string, string> = {};
  const res = { setHeader: (name: string, value: string) => (headers[name] = value) };
  const handler = (Routes.prototype as unknown as Record<string, () => void>)[route];
  const context = {
    getHandler: () => handler,
    getClass: () => Routes,
    getType: () => 'http',
    switchToHttp: () => ({ getRequest: () => req, getResponse: () => res }),
  } as unknown as ExecutionContext;
  return { headers, context };
}

describe('rate limiting (RateLimitGuard.check on RateLimitModule, Redis storage)', () => {
  let app: INestApplicationContext;
  let guard: RateLimitGuard;
  let service: RateLimitService;
  let redis: RedisService;
  let ip: string;
  let userId = 9_000_000 + Math.floor(Math.random() * 1_000_000);
  const principal = (plan: Principal['plan']) => ({ userId: ++userId, plan }) as Principal;

  beforeAll(async () => {
    const config = loadConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'error',
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: `t${randomBytes(5).toString('hex')}`,
      RATE_LIMIT_BASIC: '2',
      RATE_LIMIT_WINDOW_SECONDS: '3600',
      RATE_LIMIT_ANONYMOUS: '3',
      RATE_LIMIT_ANONYMOUS_WINDOW_SECONDS: '60',
      OAUTH_RATE_LIMIT_PER_MINUTE: '2',
    });
    const moduleRef = await Test.createTestingModule({ imports: [ConfigModule.forRoot(config), CommonModule, RedisModule, RateLimitModule] })
      .setLogger({ log() {}, error() {}, warn() {}, debug() {}, verbose() {}, fatal() {} })
      .compile();
    app = await moduleRef.init();
    guard = app.get(RateLimitGuard);
    service = app.get(RateLimitService);
    redis = app.get(RedisService);
    await waitUntil('redis ready', async () => redis.ready, 10_000);
  });
  afterAll(async () => {
    const keys = await redis.client!.keys(redis.key('*'));
    if (keys.length) await redis.client!.del(...keys);
    await app.close();
  });
  beforeEach(() => {
    ip = nextAddress();
  });

  /** check() of one request, with the headers it set or the refusal it threw. */
  async function run(route: keyof Routes, req: Partial<AppRequest>) {
    const c = call(route, { ip, ...req });
    try {
      return { ok: await guard.check(c.context), headers: c.headers, error: null };
    } catch (e) {
      return { ok: false, headers: c.headers, error: e as AppError };
    }
  }

  it('counts anonymous requests per address in Redis, with the remaining count in the headers, and refuses past the limit', async () => {
    const answers = [await run('plain', {}), await run('plain', {}), await run('plain', {})];
    expect(answers.map((a) => a.ok)).toEqual([true, true, true]);
    expect(answers.map((a) => a.headers['X-RateLimit-Limit'])).toEqual(['3', '3', '3']);
    expect(answers.map((a) => a.headers['X-RateLimit-Remaining'])).toEqual(['2', '1', '0']);
    for (const a of answers) expect(Number(a.headers['X-RateLimit-Reset'])).toBeGreaterThanOrEqual(59);
    for (const a of answers) expect(Number(a.headers['X-RateLimit-Reset'])).toBeLessThanOrEqual(60);
    expect(await redis.client!.get(redis.key('rl', `default:ip:${ip}`))).toBe('3');

    const refused = await run('plain', {});
    expect(refused.error).toBeInstanceOf(AppError);
    expect(refused.error!.code).toBe('rate_limited');
    expect(refused.error!.status).toBe(429);
    expect(refused.error!.message).toMatch(/^Rate limit of 3 requests per 60 s exceeded; retry in \d+ s$/);
    const retry = refused.headers['Retry-After'];
    expect(Number(retry)).toBeGreaterThanOrEqual(59);
    expect(refused.error!.headers).toEqual({ 'Retry-After': retry, 'X-RateLimit-Limit': '3', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': retry });
    // Another address has its own counter.
    ip = nextAddress();
    expect((await run('plain', {})).headers['X-RateLimit-Remaining']).toBe('2');
  });

  it("counts a token's requests per account at its plan's limit over the plan window, whatever the address", async () => {
    const p = principal('basic');
    const first = await run('plain', { principal: p });
    ip = nextAddress();
    const second = await run('plain', { principal: p });
    expect([first.headers['X-RateLimit-Remaining'], second.headers['X-RateLimit-Remaining']]).toEqual(['1', '0']);
    expect(first.headers['X-RateLimit-Limit']).toBe('2');
    expect(Number(first.headers['X-RateLimit-Reset'])).toBeGreaterThan(3500);
    expect((await run('plain', { principal: p })).error?.code).toBe('rate_limited');
    const usage = await service.accountUsage(p.userId);
    expect(usage.hits).toBe(3);
    expect(usage.resetMs).toBeGreaterThan(3_500_000);
    // The address's own counter was not touched by the account's requests.
    expect(await redis.client!.get(redis.key('rl', `default:ip:${ip}`))).toBeNull();
  });

  it("counts the OAuth bucket per address at OAUTH_RATE_LIMIT_PER_MINUTE, apart from the account's limit", async () => {
    const p = principal('basic');
    const answers = [await run('token', { principal: p }), await run('token', {})];
    expect(answers.map((a) => a.headers['X-RateLimit-Remaining'])).toEqual(['1', '0']);
    expect(answers[0].headers['X-RateLimit-Limit']).toBe('2');
    expect(Number(answers[0].headers['X-RateLimit-Reset'])).toBeLessThanOrEqual(60);
    const refused = await run('token', {});
    expect(refused.error?.message).toMatch(/^Rate limit of 2 requests per 60 s exceeded/);
    expect(await redis.client!.get(redis.key('rl', `default:oauth:ip:${ip}`))).toBe('3');
    expect((await service.accountUsage(p.userId)).hits).toBe(0);
    // The general anonymous limit of the same address is untouched.
    expect((await run('plain', {})).headers['X-RateLimit-Remaining']).toBe('2');
  });

  it('does not count @SkipThrottle() routes or verified machine credentials; a request without one counts as anonymous', async () => {
    for (const a of [await run('download', {}), await run('plain', { credential: 'metrics-token' }), await run('plain', { credential: 'sms-signature' })]) {
      expect(a).toEqual({ ok: true, headers: {}, error: null });
    }
    expect(await redis.client!.get(redis.key('rl', `default:ip:${ip}`))).toBeNull();
    expect((await run('plain', { credential: undefined })).headers['X-RateLimit-Remaining']).toBe('2');
  });

  it("counts each API token's requests and refusals in memory for the usage page, nothing for anonymous requests", async () => {
    const counter = app.get(UsageCounter);
    counter.drain();
    const p = { ...principal('basic'), apiTokenId: 41 };
    const q = { ...principal('basic'), apiTokenId: 42 };
    const answers = [
      await run('plain', { principal: p }),
      await run('plain', { principal: p }),
      await run('plain', { principal: p }),
      await run('plain', { principal: q }),
    ];
    expect(answers.map((a) => a.error?.status ?? 200)).toEqual([200, 200, 429, 200]);
    await run('plain', {});
    const { tallies, dropped } = counter.drain();
    expect(dropped).toBe(0);
    const hour = Date.now() - (Date.now() % 3_600_000);
    expect(tallies.sort((a, b) => a.tokenId - b.tokenId)).toEqual([
      { tokenId: 41, userId: p.userId, hourMs: hour, requests: 3, limited: 1 },
      { tokenId: 42, userId: q.userId, hourMs: hour, requests: 1, limited: 0 },
    ]);
    expect(counter.drain().tallies).toEqual([]);
  });

  it("refuses a route's own @Throttle() settings loudly rather than ignoring them", async () => {
    await expect(async () => guard.check(call('own', { ip }).context)).rejects.toThrow(/@Throttle\(\) on Routes\.own is not supported/);
  });
});
