import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { LogSmsProvider } from './log.provider.js';
import { idempotencyKey, type OutboundSms } from './sms-provider.js';
import { SmsLogSendsRepository } from './sms-log-sends.repository.js';

describe('LogSmsProvider honours the Idempotency-Key (real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let metrics: MetricsService;
  let repository: SmsLogSendsRepository;

  beforeAll(async () => {
    ctx = await startServiceContext();
    metrics = ctx.get(MetricsService);
    repository = ctx.get(SmsLogSendsRepository);
  });
  afterAll(async () => {
    await ctx.close();
  });

  const sms = (messageId: number, sendCount = 1): OutboundSms => ({
    messageId,
    to: '+14155550100',
    body: 'Hello',
    idempotencyKey: idempotencyKey(messageId, sendCount),
  });
  const refusedMetric = async () => (await metrics.smsDuplicatesRefused.get()).values.find((v) => v.labels.provider === 'log')?.value ?? 0;
  const row = async (key: string) => (await ctx.query<{ duplicates: number }>(`SELECT duplicates FROM sms_log_sends WHERE idempotency_key = $1`, [key]))[0];

  it('the same message handed over twice is sent once; the second answers the first result and is counted as a refused duplicate', async () => {
    const provider = new LogSmsProvider(repository, metrics);
    const before = await refusedMetric();
    const first = await provider.send(sms(9001));
    const again = await provider.send(sms(9001));
    expect(again).toEqual(first);
    expect(first).toMatchObject({ providerMessageId: 'log-textmessage-9001-1', delivery: { status: 'delivered' } });
    expect(await row('textmessage-9001-1')).toEqual({ duplicates: 1 });
    expect((await refusedMetric()) - before).toBe(1);
    // A new send number is a new message.
    await provider.send(sms(9001, 2));
    expect(await row('textmessage-9001-2')).toEqual({ duplicates: 0 });
  });

  it('duplicates arriving together, and a hand-over to another process (a restarted worker), are refused too', async () => {
    const provider = new LogSmsProvider(repository, metrics);
    const before = await refusedMetric();
    const results = await Promise.all([provider.send(sms(9002)), provider.send(sms(9002)), provider.send(sms(9003))]);
    expect(results[1]).toEqual(results[0]);
    expect(await row('textmessage-9002-1')).toEqual({ duplicates: 1 });
    const restarted = new LogSmsProvider(repository, metrics);
    expect(await restarted.send(sms(9002))).toEqual(results[0]);
    expect(await row('textmessage-9002-1')).toEqual({ duplicates: 2 });
    expect(await row('textmessage-9003-1')).toEqual({ duplicates: 0 });
    expect((await refusedMetric()) - before).toBe(2);
  });
});
