import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { type CredentialWatch, TokensService } from '../auth/tokens.service.js';
import { DeferJobError, JobQueue } from '../jobs/job-queue.js';
import { JOB_IDS, type JobPayloads, RECOVERY_EVERY_MS } from '../jobs/job-names.js';
import { SmsSendRate } from '../sms/send-rate.service.js';
import { idempotencyKey, type SendResult, SmsProvider, SmsProviderError } from '../sms/sms-provider.js';
import type { Broadcast } from './broadcast.entity.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import { AUDIENCE_RETRY_SECONDS, AudienceNotReady, BroadcastsService } from './broadcasts.service.js';
import { type BatchClaimed, BroadcastMessagesRepository } from './broadcast-messages.repository.js';
import { TextMessageRepository } from './text-message.repository.js';

/** Messages one lane claims at a time (fewer under SMS_MAX_PER_SECOND: about one second's worth). */
const CHUNK = 500;
/** Under SMS_MAX_PER_SECOND, how long before its first slot a lane claims its next batch. */
const CLAIM_LEAD_MS = 250;
/** Provider calls one lane has in flight at once. */
const IN_FLIGHT = 64;
/** Attempts per message when the gateway answers 429/5xx or refuses the connection. */
const MAX_ATTEMPTS = 6;
/** A claim older than the provider's longest call plus this margin belongs to a worker that died. */
const CLAIM_MARGIN_MS = 5_000;
/** How often a lane refreshes the claims of the batch it is sending (well under CLAIM_MARGIN_MS). */
const HEARTBEAT_MS = 2_000;

type Outcome = { m: BatchClaimed; result: SendResult } | { m: BatchClaimed; error: SmsProviderError };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends broadcasts: each `sms.broadcast` job is one lane that claims batches of the broadcast's
 * queued messages and hands them to the provider.
 *
 * Why every recipient is handed to the provider exactly once: a message is claimed (claim_token, one
 * UPDATE for the batch, `FOR UPDATE SKIP LOCKED`) before the provider is called, and its outcome is
 * written only while that claim holds, so two lanes never call the provider for one message at the
 * same time and a message recorded as sent is never claimed again. A hand-off whose outcome is
 * unknown — the lane died (SIGKILL) between the call and the write, leaving its claims, or the call
 * timed out or lost its connection — is made again with the SAME Idempotency-Key
 * (`textmessage-<id>-<sendCount>`: the send number does not change), so a provider that honours the
 * key (the HTTP provider contract, README "SMS provider contract") takes it once: stale claims
 * (older than the provider's longest call + a margin; a live lane refreshes its batch's claims every
 * HEARTBEAT_MS, so only a dead lane's claims get that old) are given back and claimed again, and unknown outcomes are retried like 429/5xx, up to MAX_ATTEMPTS
 * (then `failed`, outcome_unknown). The unique (broadcast_id, contact_id) index keeps one message
 * per recipient, and a second `send` finds the broadcast no longer draft.
 *
 * Per-message status writes and their events are set-based: one statement per batch and outcome.
 * The lanes stop when the broadcast is canceled (the claim only takes messages of a `sending`
 * broadcast). The last lane to find nothing queued marks the broadcast completed. Recovery: on worker
 * start and every RECOVERY_EVERY_MS (5 s), the lanes of every `sending` broadcast are queued again (a lane's job id
 * suppresses duplicates), and scheduled broadcasts get their start job.
 */
@Injectable()
export class BroadcastsProcessor implements OnModuleInit {
  private readonly logger = new Logger('Broadcasts');

  constructor(
    private readonly messages: BroadcastMessagesRepository,
    private readonly single: TextMessageRepository,
    private readonly broadcastsRepo: BroadcastsRepository,
    private readonly broadcasts: BroadcastsService,
    private readonly jobs: JobQueue,
    private readonly provider: SmsProvider,
    private readonly rate: SmsSendRate,
    private readonly tokens: TokensService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('sms.broadcast', (p) => this.run(p));
    this.jobs.handle('sms.broadcast-recover', () => this.recover());
    this.jobs.onWorkerStart('broadcasts: resume sending and scheduled broadcasts', async () => {
      await this.recover();
      await this.jobs.upsertSchedule(JOB_IDS.broadcastRecoverSchedule, 'sms.broadcast-recover', {}, { everyMs: RECOVERY_EVERY_MS });
    });
  }

  private get claimStaleMs(): number {
    return this.provider.maxCallMs + CLAIM_MARGIN_MS;
  }

  async run({ broadcastId }: JobPayloads['sms.broadcast']): Promise<void> {
    const b = await this.broadcastsRepo.findById(broadcastId);
    if (!b) return;
    const credential = this.credentialOf(b);
    if (b.status === 'scheduled') {
      const wait = b.scheduledFor ? b.scheduledFor.getTime() - Date.now() : 0;
      if (wait > 1000) throw new DeferJobError('scheduled for later', wait);
      const ended = await credential.ended();
      if (ended) {
        await this.broadcasts.cancelForEndedCredential(broadcastId, ended);
        return;
      }
      try {
        await this.broadcasts.startScheduled(broadcastId);
      } catch (e) {
        if (e instanceof AudienceNotReady) throw new DeferJobError('its segment is being rebuilt', AUDIENCE_RETRY_SECONDS * 1000);
        throw e;
      }
      return;
    }
    if (b.status !== 'sending') return;
    do await this.lane(broadcastId, credential);
    while (await this.finish(broadcastId));
  }

  /** The token a broadcast's sending acts for, watched for revocation. */
  private credentialOf(b: Broadcast): CredentialWatch {
    return this.tokens.watch(b.apiTokenId ? { apiTokenId: b.apiTokenId, accessTokenId: b.accessTokenId } : null);
  }

  /**
   * Claims and sends batches until the broadcast has no unclaimed queued message (or is no longer
   * sending). Before each batch the token the broadcast acts for is checked (read at most once a
   * second): once it is revoked, deleted or expired the broadcast is canceled and the lane stops.
   */
  private async lane(broadcastId: number, credential: CredentialWatch): Promise<void> {
    const token = randomUUID();
    const attempts = new Map<number, number>();
    let backoff = 0;
    for (;;) {
      const ended = await credential.ended();
      if (ended) {
        await this.broadcasts.cancelForEndedCredential(broadcastId, ended);
        return;
      }
      const limit = Math.min(CHUNK, this.rate.batchHint);
      // Under SMS_MAX_PER_SECOND the slots are reserved first and the messages claimed only when the
      // first slot is due: claims are taken just in time, so a cancel still finds the rest unclaimed
      // and a crash strands at most about one second's worth.
      let slots: number[];
      try {
        slots = await this.rate.reserve(limit, this.rate.capped ? CLAIM_LEAD_MS : 0);
      } catch (e) {
        // Redis (the shared rate timeline) unreachable: nothing is claimed or sent without a slot; the lane waits for it.
        this.logger.warn({ msg: 'send-rate reservation failed; waiting for Redis', broadcastId, err: (e as Error).message });
        await sleep(1000);
        continue;
      }
      const t0 = Date.now();
      // Claimed a little ahead of the first slot, so the claim's own latency never bunches sends together.
      if (slots[0] > CLAIM_LEAD_MS) await sleep(slots[0] - CLAIM_LEAD_MS);
      const claimed = await this.messages.claimBatch(broadcastId, token, limit);
      if (!claimed.length) return;
      const optedOut = claimed.filter((m) => m.optedOut);
      await this.messages.markCanceledMany(
        token,
        optedOut.map((m) => m.id),
        'opted_out',
        'the recipient opted out of text messages before the message was sent',
      );
      // While the batch is out (a slow gateway: up to ceil(500 / 64) calls of maxCallMs each), its
      // claims are kept fresh, so only the claims of a lane that died ever look stale.
      const ids = claimed.map((m) => m.id);
      const heartbeat = setInterval(() => {
        this.messages
          .touchClaims(token, ids)
          .catch((e: unknown) => this.logger.warn({ msg: 'claim heartbeat failed', broadcastId, err: (e as Error).message }));
      }, HEARTBEAT_MS);
      let retry: Awaited<ReturnType<BroadcastsProcessor['record']>>;
      try {
        const outcomes = await this.sendAll(
          claimed.filter((m) => !m.optedOut),
          slots,
          t0,
        );
        retry = await this.record(token, outcomes, attempts);
      } finally {
        clearInterval(heartbeat);
      }
      if (retry.length) {
        backoff = Math.min(Math.max(backoff * 2, 1000), 30_000);
        const hinted = Math.max(0, ...retry.map((o) => o.error.retryAfterMs ?? 0));
        await sleep(Math.max(backoff, hinted));
      } else backoff = 0;
    }
  }

  /** Hands the messages to the provider, the i-th at its SMS_MAX_PER_SECOND slot (`t0 + slots[i]`), IN_FLIGHT at a time. */
  private async sendAll(list: BatchClaimed[], slots: number[], t0: number): Promise<Outcome[]> {
    const out: Outcome[] = new Array<Outcome>(list.length);
    let next = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= list.length) return;
        const m = list[i];
        const wait = t0 + slots[i] - Date.now();
        if (wait > 0) await sleep(wait);
        try {
          const result = await this.provider.send({ messageId: m.id, to: m.recipient, body: m.content, idempotencyKey: idempotencyKey(m.id, m.sendCount) });
          out[i] = { m, result };
        } catch (e) {
          out[i] = { m, error: e instanceof SmsProviderError ? e : new SmsProviderError(`provider error: ${(e as Error).message}`, 'unknown') };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, list.length) }, () => worker()));
    return out;
  }

  /** Writes a batch's outcomes (one statement per kind); answers the retryable ones, whose claims were given back. */
  private async record(token: string, outcomes: Outcome[], attempts: Map<number, number>) {
    const sent = outcomes.filter((o): o is Extract<Outcome, { result: SendResult }> => 'result' in o);
    const failed = outcomes.filter((o): o is Extract<Outcome, { error: SmsProviderError }> => 'error' in o);
    // The provider has these: the write is retried briefly (the claim stays if it keeps failing; the sweep resolves it).
    for (let i = 1; ; i++) {
      try {
        await this.single.markSentMany(
          token,
          this.provider.name,
          sent.map((o) => ({ id: o.m.id, providerMessageId: o.result.providerMessageId, delivered: o.result.delivery?.status === 'delivered' })),
        );
        break;
      } catch (e) {
        if (i >= 3) throw e;
        await sleep(1000 * i);
      }
    }
    const retry: Extract<Outcome, { error: SmsProviderError }>[] = [];
    const byCode = new Map<string, { ids: number[]; reason: string; code: 'provider_rejected' | 'retries_exhausted' | 'outcome_unknown' }>();
    const add = (code: 'provider_rejected' | 'retries_exhausted' | 'outcome_unknown', o: Extract<Outcome, { error: SmsProviderError }>, reason: string) => {
      const key = `${code}\u0000${reason}`;
      const g = byCode.get(key) ?? { ids: [], reason, code };
      g.ids.push(o.m.id);
      byCode.set(key, g);
    };
    for (const o of failed) {
      if (o.error.kind === 'retryable') {
        const n = (attempts.get(o.m.id) ?? 0) + 1;
        attempts.set(o.m.id, n);
        if (n < MAX_ATTEMPTS) retry.push(o);
        else add('retries_exhausted', o, `${o.error.message} (gave up after ${n} attempts)`);
      } else if (o.error.kind === 'rejected') add('provider_rejected', o, o.error.message);
      else {
        // Outcome unknown (timeout, connection lost after the request went out): the provider may have
        // it, so it is handed over again with the same Idempotency-Key, which the provider dedupes.
        const n = (attempts.get(o.m.id) ?? 0) + 1;
        attempts.set(o.m.id, n);
        if (n < MAX_ATTEMPTS) retry.push(o);
        else add('outcome_unknown', o, `outcome unknown: ${o.error.message} (no answer after ${n} attempts with one Idempotency-Key)`);
      }
    }
    for (const g of byCode.values()) await this.messages.markFailedMany(token, g.ids, g.code, g.reason);
    await this.messages.releaseMany(
      token,
      retry.map((o) => o.m.id),
    );
    // A delivery failure reported at once by the provider is written by the sent path as delivered only; failures are rare enough to write one by one.
    for (const o of sent) {
      if (o.result.delivery?.status === 'failed') this.logger.warn({ msg: 'immediate delivery failure ignored for a broadcast message', messageId: o.m.id });
    }
    return retry;
  }

  /**
   * After a lane ran out of work: claims left by a dead worker are given back once stale (answers
   * true: the lane runs again and hands them over with their same Idempotency-Key); while live claims
   * remain, look again later; when nothing is queued, completed.
   */
  private async finish(broadcastId: number): Promise<boolean> {
    const q = await this.messages.broadcastQueue(broadcastId);
    if (q.unclaimed > 0) return false; // canceled meanwhile (nothing claimable), or another lane is on it
    if (q.claimed > 0) {
      const age = q.oldestClaimMs ?? 0;
      if (age < this.claimStaleMs) throw new DeferJobError('other lanes hold claims', Math.ceil(this.claimStaleMs - age) + 200);
      const n = await this.messages.releaseStaleOfBroadcast(broadcastId, this.claimStaleMs);
      if (n) {
        this.logger.warn({
          msg: 'stale broadcast claims: a worker stopped mid-send; handing them over again with the same Idempotency-Key',
          broadcastId,
          messages: n,
        });
        return true;
      }
    }
    await this.broadcasts.completeIfDone(broadcastId);
    return false;
  }

  /**
   * Queues the lanes of every sending broadcast and the start of every scheduled one; resolves the
   * stale claims of canceled broadcasts (no lane runs for those any more).
   */
  async recover(): Promise<void> {
    const n = await this.messages.failStaleOfCanceledBroadcasts(this.claimStaleMs);
    if (n) this.logger.warn({ msg: 'stale claims of canceled broadcasts: outcome unknown, not sent again', messages: n });
    for (const b of await this.broadcastsRepo.inStatus(['sending', 'scheduled'])) {
      if (b.status === 'sending') await this.broadcasts.queueLanes(b.id);
      else if (b.scheduledFor) {
        const at = new Date(b.scheduledFor).getTime();
        await this.jobs.enqueue('sms.broadcast', { broadcastId: b.id, lane: 0 }, { jobId: JOB_IDS.broadcastStart(b.id, at), delayMs: at - Date.now() });
      }
    }
  }
}
