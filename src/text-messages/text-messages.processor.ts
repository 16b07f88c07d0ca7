import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Coalescer } from '../database/coalescer.js';
import { Transactions } from '../database/transactions.js';
import { JOB_IDS, type JobPayloads } from '../jobs/job-names.js';
import { DeferJobError, type JobContext, JobQueue, RetryableJobError } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { SmsSendRate } from '../sms/send-rate.service.js';
import { idempotencyKey, type SendResult, SmsProvider, SmsProviderError } from '../sms/sms-provider.js';
import type { FailureCode } from './text-message-state.js';
import { type ClaimedMessage, TextMessageRepository } from './text-message.repository.js';
import { TextMessagesService } from './text-messages.service.js';

/** A claim older than the provider's longest call plus this margin belongs to a worker that died. */
const CLAIM_MARGIN_MS = 5_000;
/** How long a job waits for the transaction that queued it to become visible. */
const COMMIT_WAIT_MS = 60_000;

/**
 * Sends text messages: the `sms.send` job hands one message to the SMS provider, at most once.
 *
 * Why a message is never handed to the provider twice:
 * BullMQ (and the in-process runner after a restart) may run a job again — after a worker crash,
 * a lost lock, or a recovery re-queue. So the job does not trust that it is the first run:
 *
 * 1. Claim. Before calling the provider it takes the message with a conditional UPDATE:
 *    `claim_token = <new uuid>, claimed_at = now() WHERE status = 'queued' AND send_count = <job's
 *    generation> AND claim_token IS NULL`. Only one run can win; the row now says "a worker is
 *    calling the provider for this send". (The jobs running at once in one worker claim in one
 *    statement, each row with its own token and these conditions; recording `sent` is batched the same way.)
 * 2. Call the provider with Idempotency-Key `textmessage-<id>-<sendCount>` (a gateway that honours
 *    the key also drops a repeat we could not prevent).
 * 3. Record the answer with `WHERE claim_token = <our token>`: `sent` (and provider id), or on a
 *    definite refusal that is worth retrying (429/5xx/connection refused) release the claim and let
 *    the job retry with backoff; on a final refusal, or when attempts run out, `failed` + an
 *    `sms_failed` notification to the creator.
 *
 * A run that finds the claim already taken does not call the provider:
 * - claim younger than the provider's longest call (+5 s): another run may still be talking to the
 *   provider; look again later (without using up an attempt);
 * - claim older than that: the run that took it died between claiming and recording (a crash or
 *   SIGKILL while the gateway was answering). Whether the gateway took the message is unknown, and
 *   calling again could send it twice, so the message is marked `failed` with failureCode
 *   `outcome_unknown` and an `sms_failed` notification; a user can decide to send it again. A
 *   delivery report for that send, if the gateway sends one, still moves it to `delivered`.
 * - the message is no longer `queued` for this generation (sent, failed, re-sent, deleted): done.
 *
 * A timeout or a connection lost after the request went out is treated the same way (outcome
 * unknown, no retry), since the gateway may have the message.
 *
 * Except for a workflow step's message (`idempotent_handover`), which is exactly once as a broadcast's
 * is (issue 31: a stuck claim is taken over after its lease): a stale claim is taken over and the
 * message handed over again with the same Idempotency-Key, and an unknown outcome is retried with
 * that key like a 429/5xx; the gateway, which must honour the key (README "SMS provider contract"),
 * takes it once. Its outcome is unknown only when the attempts run out.
 *
 * Nothing stays `queued` forever: on worker start every queued message is queued again under its
 * job id `sms:<id>:<sendCount>` (suppressed while that job still exists), and every 5 minutes the
 * overdue ones are.
 */
@Injectable()
export class TextMessagesProcessor implements OnModuleInit {
  private readonly logger = new Logger('TextMessages');
  /** The claims of the sends running at once in this worker, one statement per batch (each with its own token and conditions). */
  private readonly claims = new Coalescer((items: { id: number; generation: number; token: string }[]) => this.repository.claimMany(items));
  /** Their `sent` records with events, likewise (bench row "send 10,000 text messages"). */
  private readonly sentMarks = new Coalescer((items: { id: number; token: string; providerMessageId: string | null; delivered: boolean }[]) =>
    this.repository.markSentEach(this.provider.name, items),
  );

  constructor(
    private readonly repository: TextMessageRepository,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly provider: SmsProvider,
    private readonly messages: TextMessagesService,
    private readonly notifications: NotificationsService,
    private readonly rate: SmsSendRate,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('sms.send', (p, ctx) => this.send(p, ctx));
    this.jobs.handle('sms.recover', () => this.recover(false));
    this.jobs.onWorkerStart('text messages: re-queue queued messages', async () => {
      await this.recover(true);
      await this.jobs.upsertSchedule(JOB_IDS.smsRecoverSchedule, 'sms.recover', {}, { everyMs: this.config.smsRecoverEveryMs });
    });
  }

  private get claimStaleMs(): number {
    return this.provider.maxCallMs + CLAIM_MARGIN_MS;
  }

  async send({ messageId, generation, queuedAt }: JobPayloads['sms.send'], ctx: JobContext): Promise<void> {
    // SMS_MAX_PER_SECOND: take a slot on the shared timeline before claiming (a slot a run does not use is simply lost).
    const [wait] = await this.rate.reserve(1);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const token = randomUUID();
    const msg = await this.claims.add({ id: messageId, generation, token });
    if (!msg) return this.notClaimed(messageId, generation, queuedAt, ctx);
    return this.handOver(messageId, generation, token, msg, ctx);
  }

  /** Hands a message we claimed (with `token`) to the provider and records the answer under the claim. */
  private async handOver(messageId: number, generation: number, token: string, msg: ClaimedMessage, ctx: JobContext): Promise<void> {
    if (msg.optedOut) return this.cancelOptedOut(messageId, token);
    let result: SendResult;
    try {
      result = await this.provider.send({ messageId, to: msg.recipient, body: msg.content, idempotencyKey: idempotencyKey(messageId, generation) });
    } catch (e) {
      const err = e instanceof SmsProviderError ? e : new SmsProviderError(`provider error: ${(e as Error).message}`, 'unknown');
      // An unknown outcome of a message handed over with its Idempotency-Key (a workflow step's) is
      // retried with the same key, as broadcasts do: the gateway takes it once.
      if (err.kind === 'retryable' || (err.kind === 'unknown' && msg.idempotentHandover)) {
        if (ctx.attempt < ctx.maxAttempts) {
          // The gateway did not take it: give the claim back and retry with backoff. The message
          // stays `queued`; it fails only when the attempts run out.
          await this.repository.releaseClaim(messageId, token);
          throw new RetryableJobError(err.message, err.retryAfterMs);
        }
        if (err.kind === 'unknown') {
          return this.fail(
            messageId,
            token,
            'outcome_unknown',
            `outcome unknown: ${err.message} (no answer after ${ctx.attempt} attempts with one Idempotency-Key)`,
            msg,
          );
        }
        return this.fail(messageId, token, 'retries_exhausted', `${err.message} (gave up after ${ctx.attempt} attempts)`, msg);
      }
      if (err.kind === 'rejected') return this.fail(messageId, token, 'provider_rejected', err.message, msg);
      return this.fail(messageId, token, 'outcome_unknown', `outcome unknown: ${err.message}; not retried so the message cannot be sent twice`, msg);
    }
    await this.recordSent(messageId, token, result);
  }

  /**
   * Writes `sent` (and an immediate delivery outcome), retrying briefly: the gateway already has the
   * message. Sent, or sent and delivered at once (the log provider), is one statement with its events
   * (the broadcasts' set-based write); an immediate delivery failure takes the general path.
   */
  private async recordSent(messageId: number, token: string, result: SendResult): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        if (result.delivery?.status !== 'failed') {
          await this.sentMarks.add({ id: messageId, token, providerMessageId: result.providerMessageId, delivered: result.delivery?.status === 'delivered' });
          return;
        }
        await this.transactions.run(async (tx) => {
          const sent = await this.repository.markSent(messageId, token, this.provider.name, result.providerMessageId, tx);
          if (sent) await this.messages.recordStatus(tx, messageId, 'text_message.sent', 'queued');
          // Not sent: a delivery report got there first, or the message was deleted.
          if (sent && result.delivery) {
            await this.messages.applyDelivery(messageId, result.delivery.status, result.delivery.at, result.delivery.reason ?? null, tx);
          }
        });
        return;
      } catch (e) {
        if (i >= 3) throw e; // the claim stays; a later run resolves it without calling the provider
        await new Promise((r) => setTimeout(r, 1000 * i));
      }
    }
  }

  private async notClaimed(messageId: number, generation: number, queuedAt: number, ctx: JobContext): Promise<void> {
    const t = await this.repository.sendState(messageId);
    if (!t || t.sendCount < generation) {
      // Not visible yet: the transaction that queued this job has not committed (or rolled back).
      if (Date.now() - queuedAt < COMMIT_WAIT_MS) throw new DeferJobError('waiting for the queueing transaction to commit', 500);
      return;
    }
    if (t.sendCount > generation || t.status !== 'queued') return; // done, or superseded by a newer send
    if (t.claimToken === null) {
      // Scheduled for later (a recovery run came early): come back then.
      if (t.waitMs !== null && t.waitMs > 0) throw new DeferJobError('scheduled for later', Math.ceil(t.waitMs));
      throw new DeferJobError('claim race', 200);
    }
    const age = t.claimAgeMs ?? 0;
    if (age < this.claimStaleMs) throw new DeferJobError('another run holds the claim', Math.ceil(this.claimStaleMs - age) + 100);
    if (t.idempotentHandover) {
      // A workflow step's message: take the dead worker's claim over and hand the message over again with
      // the same Idempotency-Key (the gateway answers the first hand-over's result if it took it).
      const token = randomUUID();
      const msg = await this.repository.takeOver(messageId, generation, t.claimToken, token);
      if (!msg) throw new DeferJobError('claim race', 200);
      this.logger.warn({ msg: 'stale claim taken over: handing the message over again with its Idempotency-Key', messageId, claimAgeMs: Math.round(age) });
      return this.handOver(messageId, generation, token, msg, ctx);
    }
    this.logger.warn({ msg: 'stale claim: the worker that took it stopped mid-send; marking the outcome unknown', messageId, claimAgeMs: Math.round(age) });
    await this.fail(
      messageId,
      t.claimToken,
      'outcome_unknown',
      'outcome unknown: the worker stopped while handing the message to the provider; it may have been sent, so it is not sent again automatically',
      { id: messageId, content: '', recipient: t.recipient, createdBy: t.createdBy, optedOut: false, idempotentHandover: false },
    );
  }

  /** The recipient opted out after the message was queued: `canceled` (opted_out), never handed to the provider. */
  private async cancelOptedOut(messageId: number, token: string): Promise<void> {
    await this.transactions.run(async (tx) => {
      const canceled = await this.repository.markCanceled(
        messageId,
        token,
        'opted_out',
        'the recipient opted out of text messages before the message was sent',
        tx,
      );
      if (canceled) await this.messages.recordStatus(tx, messageId, 'text_message.canceled', 'queued');
    });
    this.logger.log({ msg: 'text message canceled: the recipient opted out', messageId });
  }

  /** `failed` + an sms_failed notification, only while our claim holds. */
  private async fail(messageId: number, token: string, code: FailureCode, reason: string, msg: ClaimedMessage): Promise<void> {
    await this.transactions.run(async (tx) => {
      const failed = await this.repository.markFailed(messageId, token, code, reason.slice(0, 1000), tx);
      if (failed) await this.messages.recordStatus(tx, messageId, 'text_message.failed', 'queued');
      if (failed && msg.createdBy !== null) {
        await this.notifications.notify(
          msg.createdBy,
          'sms_failed',
          `The text message to ${msg.recipient} failed: ${reason.slice(0, 300)}`,
          { textMessageId: messageId, failureCode: code, reason: reason.slice(0, 1000) },
          tx,
        );
      }
    });
    this.logger.warn({ msg: 'text message failed', messageId, code, reason: reason.slice(0, 300) });
  }

  /**
   * Queues again the messages left `queued` (all of them on worker start — the in-process runner
   * loses its timers on restart — else only the overdue ones). Duplicates are suppressed by job id.
   */
  async recover(all: boolean): Promise<void> {
    let after = 0;
    let count = 0;
    for (;;) {
      const rows = await this.repository.queuedPage(after, all ? null : `${this.config.smsRecoverAfterMs} milliseconds`, 500);
      for (const r of rows) {
        await this.jobs.enqueue(
          'sms.send',
          { messageId: r.id, generation: r.sendCount, queuedAt: Date.now() },
          { jobId: JOB_IDS.smsSend(r.id, r.sendCount), delayMs: r.scheduledFor ? new Date(r.scheduledFor).getTime() - Date.now() : 0 },
        );
      }
      count += rows.length;
      if (rows.length < 500) break;
      after = rows[rows.length - 1].id;
    }
    if (count) this.logger.log({ msg: 're-queued text messages left queued', count, all });
  }
}
