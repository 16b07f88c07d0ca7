import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitUntil } from '../../test/support/wait.js';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { signBody } from '../sms/signature.js';
import { DeferJobError, RetryableJobError } from '../jobs/job-queue.js';
import { SmsProviderError } from '../sms/sms-provider.js';
import type { CreateTextMessageDto, UpdateTextMessageDto } from './text-message.dto.js';
import { TextMessageRepository } from './text-message.repository.js';
import { TextMessagesProcessor } from './text-messages.processor.js';
import { TextMessagesService, type TextMessageRecord } from './text-messages.service.js';

const SECRET = 'svc-webhook-secret';

describe('TextMessagesService (service layer, real PostgreSQL, fake SMS provider)', () => {
  let ctx: ServiceContext;
  let messages: TextMessagesService;
  let who: Principal;
  let campaignId: number;

  beforeAll(async () => {
    ctx = await startServiceContext({ SMS_WEBHOOK_SECRET: SECRET });
    messages = ctx.get(TextMessagesService);
    who = await ctx.principal();
    [{ id: campaignId }] = await ctx.query<{ id: number }>(`INSERT INTO campaigns (name) VALUES ('Spring') RETURNING id`);
  });
  afterAll(async () => {
    await ctx.close();
  });

  const create = (dto: Partial<CreateTextMessageDto> = {}) => messages.create({ content: 'Hello', recipient: '+1 415 555 0100', ...dto }, who);

  /** Polls the message until `check` holds (the in-process runner sends in the background). */
  const until = (id: number, check: (t: TextMessageRecord) => boolean, ms = 10000): Promise<TextMessageRecord> =>
    waitUntil(
      `message ${id}`,
      async () => {
        const t = await messages.get(id);
        return check(t) ? t : null;
      },
      ms,
      50,
    );

  it('creates a draft with the recipient in E.164 and its campaign', async () => {
    const t = await create({ campaignId });
    expect(t).toMatchObject({
      status: 'draft',
      recipient: '+14155550100',
      content: 'Hello',
      campaign: { id: campaignId, name: 'Spring' },
      createdBy: who.userId,
    });
    expect((await messages.list({ campaignId: String(campaignId) })).textMessages.map((m) => m.id)).toContain(t.id);
  });

  it('refuses blank content, a bad phone number, and a campaign that does not exist (its foreign key)', async () => {
    await expect(create({ content: '  ' })).rejects.toMatchObject({ status: 400 });
    await expect(create({ recipient: 'not a phone' })).rejects.toMatchObject({ status: 400 });
    const translated = await ctx.failure(create({ campaignId: 987654 }));
    expect(translated.status).toBe(400);
    expect(translated.details).toEqual([{ field: 'campaignId', message: 'campaign 987654 does not exist' }]);
  });

  it('concurrent PATCHes of different properties all survive', async () => {
    const t = await create();
    const changes = [{ content: 'Changed' }, { recipient: '+14155550199' }, { campaignId }] as UpdateTextMessageDto[];
    await Promise.all(changes.map((c) => messages.patch(t.id, c, who)));
    expect(await messages.get(t.id)).toMatchObject({ content: 'Changed', recipient: '+14155550199', campaign: { id: campaignId }, modifiedBy: who.userId });
  });

  it('PUT replaces (omitted properties reset) or creates', async () => {
    const t = await create({ campaignId });
    const { created, textMessage } = await messages.put(t.id, { content: 'Replaced', recipient: '+14155550101' }, who);
    expect(created).toBe(false);
    expect(textMessage).toMatchObject({ id: t.id, content: 'Replaced', campaign: null, scheduledFor: null });
    const made = await messages.put(987654321, { content: 'New', recipient: '+14155550101' }, who);
    expect(made.created).toBe(true);
  });

  it('sends through the provider: queued, then sent with the idempotency key of the send', async () => {
    const t = await create({ content: 'Send me' });
    const queued = await messages.send(t.id, who);
    expect(queued.status).toBe('queued');
    const sent = await until(t.id, (m) => m.status === 'sent');
    expect(sent.sentAt).not.toBeNull();
    const call = ctx.sms.sent.find((s) => s.messageId === t.id)!;
    expect(call).toMatchObject({ to: '+14155550100', body: 'Send me', idempotencyKey: `textmessage-${t.id}-1` });
    // Only draft or failed messages can be edited or sent.
    await expect(messages.patch(t.id, { content: 'late' }, who)).rejects.toMatchObject({ status: 409 });
    await expect(messages.send(t.id, who)).rejects.toMatchObject({ status: 409 });
  });

  it('a provider refusal fails the message and notifies its creator; it can be sent again', async () => {
    const t = await create({ content: 'Refused' });
    const normal = ctx.sms.next;
    ctx.sms.next = async () => {
      throw new SmsProviderError('number blocked', 'rejected');
    };
    try {
      await messages.send(t.id, who);
      const failed = await until(t.id, (m) => m.status === 'failed');
      expect(failed).toMatchObject({ failureCode: 'provider_rejected', failureReason: 'number blocked' });
    } finally {
      ctx.sms.next = normal;
    }
    const notes = await ctx.query<{ details: { textMessageId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'sms_failed'`, [
      who.userId,
    ]);
    expect(notes.map((n) => n.details.textMessageId)).toContain(t.id);
    await messages.send(t.id, who);
    expect((await until(t.id, (m) => m.status === 'sent')).failureCode).toBeNull();
  });

  it('a scheduledFor queues the message for later', async () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 + 3600_000).toISOString();
    const t = await create({ scheduledFor: at });
    expect(t.status).toBe('queued');
    expect(new Date(t.scheduledFor!).toISOString()).toBe(at);
  });

  it('delivery reports: signed, for the current send only, never backwards', async () => {
    const t = await create({ content: 'Deliver me' });
    await messages.send(t.id, who);
    await until(t.id, (m) => m.status === 'sent');
    const report = (body: object, secret = SECRET) => {
      const raw = Buffer.from(JSON.stringify(body));
      return messages.deliveryReport(raw, signBody(secret, raw), body);
    };
    await expect(report({ reference: `textmessage-${t.id}-1`, status: 'delivered' }, 'wrong')).rejects.toMatchObject({ status: 401 });
    expect(await report({ reference: `textmessage-${t.id}-9`, status: 'delivered' })).toEqual({ accepted: false, status: 'sent' });
    expect(await report({ reference: `textmessage-${t.id}-1`, status: 'delivered', timestamp: '2026-01-01T00:00:00Z' })).toEqual({
      accepted: true,
      status: 'delivered',
    });
    expect(await report({ reference: `textmessage-${t.id}-1`, status: 'failed' })).toMatchObject({ accepted: false });
    expect(await messages.get(t.id)).toMatchObject({ status: 'delivered', deliveredAt: '2026-01-01T00:00:00+00:00' });
    await expect(report({ status: 'delivered' })).rejects.toMatchObject({ status: 400 });
  });

  it('a claim held by a worker that died marks the outcome unknown instead of sending twice', async () => {
    const repo = ctx.get(TextMessageRepository);
    const processor = ctx.get(TextMessagesProcessor);
    const [row] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, claim_token, claimed_at, created_by)
       VALUES ('Stale', '+14155550100', 'queued', 1, now(), gen_random_uuid(), now() - interval '1 hour', $1) RETURNING id`,
      [who.userId],
    );
    expect(await repo.claim(row.id, 1, '00000000-0000-4000-8000-000000000000')).toBeNull();
    await processor.send({ messageId: row.id, generation: 1, queuedAt: Date.now() }, { jobId: 'x', attempt: 1, maxAttempts: 6 });
    expect(await messages.get(row.id)).toMatchObject({ status: 'failed', failureCode: 'outcome_unknown' });
    expect(ctx.sms.sent.some((s) => s.messageId === row.id)).toBe(false);
  });

  it("a workflow step's message (idempotent hand-over) takes a dead worker's claim over and hands it over again with the same key; an unknown outcome is retried", async () => {
    const processor = ctx.get(TextMessagesProcessor);
    const [row] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, claim_token, claimed_at, created_by, idempotent_handover)
       VALUES ('Stale step', '+14155550100', 'queued', 1, now(), gen_random_uuid(), now() - interval '1 hour', $1, true) RETURNING id`,
      [who.userId],
    );
    // A claim that is not stale yet is left to its holder.
    const [live] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, claim_token, claimed_at, created_by, idempotent_handover)
       VALUES ('Live step', '+14155550100', 'queued', 1, now(), gen_random_uuid(), now(), $1, true) RETURNING id`,
      [who.userId],
    );
    await expect(
      processor.send({ messageId: live.id, generation: 1, queuedAt: Date.now() }, { jobId: 'l', attempt: 1, maxAttempts: 6 }),
    ).rejects.toBeInstanceOf(DeferJobError);
    await processor.send({ messageId: row.id, generation: 1, queuedAt: Date.now() }, { jobId: 'w', attempt: 1, maxAttempts: 6 });
    expect(await messages.get(row.id)).toMatchObject({ status: 'sent', failureCode: null });
    expect(ctx.sms.sent.filter((s) => s.messageId === row.id).map((s) => s.idempotencyKey)).toEqual([`textmessage-${row.id}-1`]);
    expect(ctx.sms.sent.some((s) => s.messageId === live.id)).toBe(false);

    // Two runs find the same stale claim at once: one takes it over and hands the message over, the other does not.
    const [raced] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, claim_token, claimed_at, created_by, idempotent_handover)
       VALUES ('Raced step', '+14155550100', 'queued', 1, now(), gen_random_uuid(), now() - interval '1 hour', $1, true) RETURNING id`,
      [who.userId],
    );
    const runs = await Promise.allSettled(
      [1, 2].map((k) => processor.send({ messageId: raced.id, generation: 1, queuedAt: Date.now() }, { jobId: `race-${k}`, attempt: 1, maxAttempts: 6 })),
    );
    for (const r of runs) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DeferJobError);
    expect(ctx.sms.sent.filter((s) => s.messageId === raced.id)).toHaveLength(1);
    expect(await messages.get(raced.id)).toMatchObject({ status: 'sent' });

    const normal = ctx.sms.next;
    try {
      ctx.sms.next = async () => {
        throw new Error('socket hang up');
      };
      const [b] = await ctx.query<{ id: number }>(
        `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, created_by, idempotent_handover)
         VALUES ('Unknown step', '+14155550100', 'queued', 1, now(), $1, true) RETURNING id`,
        [who.userId],
      );
      const retry = await processor
        .send({ messageId: b.id, generation: 1, queuedAt: Date.now() }, { jobId: 'u', attempt: 1, maxAttempts: 6 })
        .catch((e: unknown) => e);
      expect(retry).toBeInstanceOf(RetryableJobError);
      expect(await messages.get(b.id)).toMatchObject({ status: 'queued' });
      await processor.send({ messageId: b.id, generation: 1, queuedAt: Date.now() }, { jobId: 'u', attempt: 6, maxAttempts: 6 });
      expect(await messages.get(b.id)).toMatchObject({ status: 'failed', failureCode: 'outcome_unknown' });
    } finally {
      ctx.sms.next = normal;
    }
  });

  it('the worker retries a retryable refusal (claim given back), fails when attempts run out, and never retries an unknown outcome', async () => {
    const processor = ctx.get(TextMessagesProcessor);
    const queued = async () =>
      (
        await ctx.query<{ id: number }>(
          `INSERT INTO text_messages (content, recipient, status, send_count, queued_at, created_by) VALUES ('Retry', '+14155550100', 'queued', 1, now(), $1) RETURNING id`,
          [who.userId],
        )
      )[0].id;
    const normal = ctx.sms.next;
    try {
      ctx.sms.next = async () => {
        throw new SmsProviderError('gateway busy', 'retryable', 1500);
      };
      const a = await queued();
      const retry = await processor
        .send({ messageId: a, generation: 1, queuedAt: Date.now() }, { jobId: 'r', attempt: 1, maxAttempts: 6 })
        .catch((e: unknown) => e);
      expect(retry).toBeInstanceOf(RetryableJobError);
      expect((retry as RetryableJobError).retryAfterMs).toBe(1500);
      expect(await messages.get(a)).toMatchObject({ status: 'queued' });
      const [{ claim_token }] = await ctx.query<{ claim_token: string | null }>(`SELECT claim_token FROM text_messages WHERE id = $1`, [a]);
      expect(claim_token).toBeNull();
      await processor.send({ messageId: a, generation: 1, queuedAt: Date.now() }, { jobId: 'r', attempt: 6, maxAttempts: 6 });
      expect(await messages.get(a)).toMatchObject({ status: 'failed', failureCode: 'retries_exhausted' });

      ctx.sms.next = async () => {
        throw new Error('socket hang up');
      };
      const b = await queued();
      await processor.send({ messageId: b, generation: 1, queuedAt: Date.now() }, { jobId: 'u', attempt: 1, maxAttempts: 6 });
      expect(await messages.get(b)).toMatchObject({ status: 'failed', failureCode: 'outcome_unknown' });
      // A job for a send that is over does nothing.
      const calls = ctx.sms.sent.length;
      await processor.send({ messageId: b, generation: 1, queuedAt: Date.now() }, { jobId: 'u', attempt: 2, maxAttempts: 6 });
      expect(ctx.sms.sent.length).toBe(calls);
    } finally {
      ctx.sms.next = normal;
    }
  });

  it('recovery re-queues messages left queued', async () => {
    const [row] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at) VALUES ('Left', '+14155550100', 'queued', 1, now() - interval '1 hour') RETURNING id`,
    );
    await ctx.get(TextMessagesProcessor).recover(false);
    expect((await until(row.id, (m) => m.status === 'sent')).status).toBe('sent');
  });

  it('DELETE answers the message once and 404 to the others', async () => {
    const t = await create();
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => messages.remove(t.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) expect(r.reason).toMatchObject({ status: 404 });
    await expect(messages.get(t.id)).rejects.toMatchObject({ status: 404 });
  });
  it('parallel sends of one draft: one queues it (one event, one hand-over), the others 409', async () => {
    const t = await create({ content: 'Only once' });
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => messages.send(t.id, who)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) expect(r.reason).toMatchObject({ status: 409 });
    await until(t.id, (m) => m.status === 'sent');
    expect(ctx.sms.sent.filter((s) => s.messageId === t.id)).toHaveLength(1);
    const queuedEvents = await ctx.query<{ previous: unknown }>(`SELECT previous FROM events WHERE type = 'text_message.queued' AND (data->>'id')::int = $1`, [
      t.id,
    ]);
    expect(queuedEvents).toEqual([{ previous: { status: 'draft' } }]);
    const [{ send_count }] = await ctx.query<{ send_count: number }>(`SELECT send_count FROM text_messages WHERE id = $1`, [t.id]);
    expect(send_count).toBe(1);
  });

  it('send answers the record its text_message.queued event carries; 404 for a message that does not exist', async () => {
    await expect(messages.send(987654321, who)).rejects.toMatchObject({ status: 404 });
    const t = await create({ content: 'Evented', campaignId });
    const queued = await messages.send(t.id, who);
    expect(queued).toMatchObject({ id: t.id, status: 'queued', campaign: { id: campaignId, name: 'Spring' }, modifiedBy: who.userId, failureCode: null });
    const [event] = await ctx.query<{ data: unknown }>(`SELECT data FROM events WHERE type = 'text_message.queued' AND (data->>'id')::int = $1`, [t.id]);
    expect(event.data).toEqual(queued);
  });

  it('two runs claiming one send in the same statement: exactly one wins; a claim for another send wins nothing', async () => {
    const repo = ctx.get(TextMessageRepository);
    const [row] = await ctx.query<{ id: number }>(
      `INSERT INTO text_messages (content, recipient, status, send_count, queued_at) VALUES ('Twice', '+14155550100', 'queued', 1, now()) RETURNING id`,
    );
    const tokens = ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b'];
    const claims = await repo.claimMany([
      { id: row.id, generation: 2, token: '00000000-0000-4000-8000-00000000000c' },
      ...tokens.map((token) => ({ id: row.id, generation: 1, token })),
    ]);
    expect(claims[0]).toBeNull();
    expect(claims.filter((c) => c !== null)).toHaveLength(1);
    const winner = tokens[claims.indexOf(claims.find((c) => c !== null)!) - 1];
    const [{ claim_token }] = await ctx.query<{ claim_token: string }>(`SELECT claim_token FROM text_messages WHERE id = $1`, [row.id]);
    expect(claim_token).toBe(winner);
    // Recording sent takes the winner's token only.
    expect(await repo.markSentEach('log', [{ id: row.id, token: tokens.find((x) => x !== winner)!, providerMessageId: null, delivered: false }])).toEqual([
      false,
    ]);
    expect(await repo.markSentEach('log', [{ id: row.id, token: winner, providerMessageId: 'p1', delivered: true }])).toEqual([true]);
    expect(await messages.get(row.id)).toMatchObject({ status: 'delivered' });
  });
});
