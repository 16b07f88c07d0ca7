/**
 * API usage on a real database: the rate limiter's in-memory tallies reach api_usage_hourly in
 * batches (added to, never overwritten, by parallel writes), hours are read back per user, and
 * hours older than 30 days are deleted.
 */
import { describe, expect, it } from '@jest/globals';
import { Clock } from '../common/clock.js';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { ApiUsageRepository } from './api-usage.repository.js';
import { ApiUsageService, USAGE_RETENTION_MS } from './api-usage.service.js';
import { UsageCounter } from './usage-counter.js';

const H = 3_600_000;

describe('ApiUsageService', () => {
  const spec = useServiceSpec();

  it('writes the counted tallies in one batch per flush and adds later ones to the same hour', async () => {
    const { ctx } = spec;
    const counter = ctx.get(UsageCounter);
    const usage = ctx.get(ApiUsageService);
    const user = (await ctx.principal()).userId;
    for (let i = 0; i < 5; i++) counter.count(7001, user, i === 4);
    counter.count(7002, user, false);
    await usage.flush();
    counter.count(7001, user, true);
    await usage.flush();
    const { rows, from, to } = await usage.hoursOf(user, 24);
    expect(to.getTime() - from.getTime()).toBe(24 * H);
    expect(rows.map((r) => [r.tokenId, r.requests, r.limited])).toEqual([
      [7001, 6, 2],
      [7002, 1, 0],
    ]);
    expect(rows[0].hour.getTime() % H).toBe(0);
    // Another user's hours are not answered.
    expect((await usage.hoursOf(user + 1000, 24)).rows).toEqual([]);
  });

  it('parallel flushes from several processes add up (one row per token and hour)', async () => {
    const { ctx } = spec;
    const usage = ctx.get(ApiUsageService);
    const user = (await ctx.principal()).userId;
    const counter = ctx.get(UsageCounter);
    // Each flush drains what was counted before it: interleave counting and flushing.
    const flushes: Promise<void>[] = [];
    for (let i = 0; i < 10; i++) {
      counter.count(7101, user, false);
      flushes.push(usage.flush());
    }
    await Promise.all(flushes);
    const rows = await ctx.query<{ requests: number }>(`SELECT requests FROM api_usage_hourly WHERE token_id = 7101`);
    expect(rows).toEqual([{ requests: 10 }]);
  });

  it('keeps 30 days: older hours are deleted by the next write', async () => {
    const { ctx } = spec;
    const clock = ctx.get(Clock);
    const user = (await ctx.principal()).userId;
    const hour = clock.nowMs() - (clock.nowMs() % H);
    await ctx.query(`INSERT INTO api_usage_hourly (token_id, hour, user_id, requests, limited) VALUES (7201, $1, $3, 1, 0), (7201, $2, $3, 2, 0)`, [
      new Date(hour - USAGE_RETENTION_MS - H),
      new Date(hour - USAGE_RETENTION_MS + H),
      user,
    ]);
    // A fresh service instance prunes on its first write.
    const fresh = new ApiUsageService(ctx.get(UsageCounter), ctx.get(ApiUsageRepository), clock, ctx.config);
    ctx.get(UsageCounter).count(7201, user, false);
    await fresh.flush();
    const rows = await ctx.query<{ requests: number }>(`SELECT requests FROM api_usage_hourly WHERE token_id = 7201 ORDER BY hour`);
    expect(rows.map((r) => r.requests)).toEqual([2, 1]);
  });
});
