import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Agent } from 'node:http';
import { Clock } from '../common/clock.js';
import { iso, isoRequired } from '../common/dates.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { signatureHeaders } from './signature.js';
import {
  type DeliveryAttempt,
  type DeliveryOutcome,
  type DeliveryRow,
  type DeliverySettledListener,
  type DeliveryStatus,
  type SettledDelivery,
  WebhookDeliveriesRepository,
} from './webhook-deliveries.repository.js';
import { type AttemptVerdict, DISABLE_AFTER_MS, nextAttemptAt, outcomeOfDelivery, verdictFor } from './webhook-retry.js';
import { postWebhook, type SendOutcome, targetAgent } from './webhook-sender.js';
import { resolveTarget, type UrlRules, WebhookUrlError } from './webhook-url.js';
import type { Webhook } from './webhook.entity.js';
import { WebhooksRepository } from './webhooks.repository.js';

/** A claim not renewed for the request timeout plus this margin belongs to a worker that died mid-batch. */
const CLAIM_MARGIN_MS = 5_000;
/** Deliveries one claim takes (one statement), sent together and recorded together (one statement). */
export const DRAIN_BATCH = 100;
/** Claim-send-record loops a drain run keeps going at once, each with DRAIN_CONCURRENCY / DRAIN_LANES requests in flight. */
const DRAIN_LANES = 2;
/**
 * Requests in flight per drain run, over at most this many kept-alive connections: a receiver that
 * hangs holds one worker slot (two while a follow-up run overlaps) and this many sockets per run,
 * while other webhooks' drain jobs run in the other slots. Throughput per webhook is about this
 * many divided by the receiver's answer time.
 */
export const DRAIN_CONCURRENCY = 16;
/** One run of a drain job handles at most this many deliveries or this long, then queues a follow-up. */
const DRAIN_RUN_MAX_DELIVERIES = 2_000;
const DRAIN_RUN_MAX_MS = 30_000;

/** The one mapper from a stored delivery to the API record. */
export function toDeliveryRecord(d: DeliveryRow) {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    eventType: d.eventType,
    sequence: d.sequence,
    status: d.status,
    attemptCount: d.attemptCount,
    attempts: d.attempts,
    nextAttemptAt: d.status === 'pending' || d.status === 'failed' ? iso(d.nextAttemptAt) : null,
    lastError: d.lastError,
    createdAt: isoRequired(d.createdAt),
    completedAt: iso(d.completedAt),
  };
}

/** The secrets that sign now: the current one, and the previous one for 24 h after a rotation. */
export function signingSecrets(w: Pick<Webhook, 'secret' | 'previousSecret' | 'previousSecretExpiresAt'>, now = new Date()): string[] {
  const out = [w.secret];
  if (w.previousSecret && w.previousSecretExpiresAt && w.previousSecretExpiresAt.getTime() > now.getTime()) out.push(w.previousSecret);
  return out;
}

/**
 * Sends deliveries. A webhook's due deliveries are sent by its drain job (`webhooks.drain`, one job
 * id per webhook): a run claims batches of up to 100 due deliveries in sequence order, each in one
 * statement (one token; rows another run holds are skipped; claims are renewed while the batch
 * runs, so a claim left by a worker that died, or by a batch the database refused to record, goes
 * stale after the request timeout + 5 s and counts as a failed attempt: settleLost), reads the
 * webhook and checks its target once per batch (DNS may have changed since creation), POSTs the signed bodies with at most 16 in flight in all (two batch loops of 8) over
 * kept-alive connections to the checked address, then records
 * every attempt in one statement, with the webhook's failure clock, in one transaction (disabling
 * it and notifying its owner on a 410 or after 72 h without a success). It repeats while deliveries
 * are due (at most 2,000 or 30 s per run, then it queues a follow-up), and finally queues itself for
 * when the next retry falls due. Deliveries that are due but have no live claim (a lost job, Redis
 * down, a worker that died) are queued again by the dispatcher's sweep.
 */
@Injectable()
export class WebhookDeliveriesService {
  private readonly logger = new Logger('Webhooks');
  private readonly settledListeners: DeliverySettledListener[] = [];

  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly webhooks: WebhooksRepository,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly notifications: NotificationsService,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Tells `listener` of every delivery that settles (succeeded or dead), in the transaction that
   * settles it: a workflow's webhook step waits for its delivery's outcome this way.
   */
  onSettled(listener: DeliverySettledListener): void {
    this.settledListeners.push(listener);
  }

  /** Tells the listeners of settled deliveries inside `tx` (nothing when none settled). */
  async announceSettled(settled: readonly SettledDelivery[], tx: Tx): Promise<void> {
    if (!settled.length) return;
    for (const l of this.settledListeners) await l.settled(settled, tx);
  }

  /** After the transaction that announced settled deliveries committed. */
  announceCommitted(): void {
    for (const l of this.settledListeners) l.committed?.();
  }

  /** Where a webhook's delivery of one event stands (outcomeOfDelivery); null when there is no such delivery. */
  async outcomeOf(webhookId: number, eventId: string, tx?: Tx): Promise<DeliveryOutcome | null> {
    const d = await this.deliveries.findByEvent(webhookId, eventId, tx);
    return d ? outcomeOfDelivery(d) : null;
  }

  /** outcomeOf for many deliveries in one statement, keyed `webhookId:eventId` (a missing one is absent). */
  async outcomesOf(keys: readonly { webhookId: number; eventId: string }[], tx?: Tx): Promise<Map<string, DeliveryOutcome>> {
    const rows = await this.deliveries.findByEvents(keys, tx);
    return new Map(rows.map((d) => [`${d.webhookId}:${d.eventId}`, outcomeOfDelivery(d)]));
  }

  get urlRules(): UrlRules {
    return { allowHttp: this.config.webhookAllowHttp, allowPrivate: this.config.webhookAllowPrivate };
  }

  get claimStaleMs(): number {
    return this.config.webhookTimeoutMs + CLAIM_MARGIN_MS;
  }

  /**
   * Queues a webhook's drain job to run `delayMs` from now: one already queued for later is brought
   * forward, and one running gets a follow-up run, so work added meanwhile is never left behind.
   */
  async queueDrain(webhookId: number, delayMs = 0): Promise<void> {
    await this.jobs.enqueue('webhooks.drain', { webhookId }, { jobId: JOB_IDS.webhookDrain(webhookId), delayMs: Math.max(0, delayMs), rerun: true });
  }

  /** Queues the drains of webhooks that just got work, without failing the caller: the sweep queues what could not be. */
  async queueDrainsQuietly(webhookIds: readonly number[]): Promise<void> {
    for (const id of webhookIds) {
      try {
        await this.queueDrain(id);
      } catch (e) {
        this.logger.warn({ msg: 'could not queue a webhook drain; the sweep will', webhookId: id, err: (e as Error).message });
        return;
      }
    }
  }

  /** Signs and POSTs a body to a webhook's URL, checking the target first; never throws. */
  async send(w: Webhook, eventId: string, body: string): Promise<SendOutcome> {
    let target;
    try {
      target = await resolveTarget(w.url, this.urlRules);
    } catch (e) {
      if (!(e instanceof WebhookUrlError)) throw e;
      return refused(e);
    }
    return postWebhook(target, signatureHeaders(signingSecrets(w, this.clock.now()), eventId, body), body, this.config.webhookTimeoutMs);
  }

  /**
   * One run of a webhook's drain job: batch after batch while deliveries are due, in DRAIN_LANES
   * loops at once (while one waits for the database, the other sends). In each loop a batch's
   * outcomes are recorded while its next batch is claimed and sent.
   */
  async drain(webhookId: number): Promise<void> {
    await this.settleLost(webhookId);
    const started = Date.now();
    const agents = new Map<string, Agent>();
    let handled = 0;
    let stop = false;
    let more = false;
    const loop = async () => {
      let recording: Promise<Error | null> | null = null;
      const recorded = async () => {
        const failed = recording ? await recording : null;
        recording = null;
        if (failed) throw failed;
      };
      try {
        while (!stop) {
          if (handled >= DRAIN_RUN_MAX_DELIVERIES || Date.now() - started >= DRAIN_RUN_MAX_MS) {
            more = true;
            break;
          }
          const batch = await this.claimAndSend(webhookId, agents);
          await recorded();
          if (!batch) break;
          handled += batch.size;
          // Settled into a value, so that a failure is thrown here rather than left unhandled meanwhile.
          recording = batch.record().then(
            () => null,
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          );
          if (batch.gone) stop = true; // the webhook is being disabled: nothing more to send
        }
        await recorded();
      } catch (e) {
        stop = true;
        throw e;
      } finally {
        await recording;
      }
    };
    const ended = await Promise.allSettled(Array.from({ length: DRAIN_LANES }, loop));
    for (const a of agents.values()) a.destroy();
    for (const r of ended) if (r.status === 'rejected') throw r.reason;
    if (more) {
      // Let other jobs have this slot; the follow-up goes on where this run stopped.
      await this.queueDrain(webhookId);
      return;
    }
    const next = await this.deliveries.nextDue(webhookId);
    if (next) await this.queueDrain(webhookId, next.getTime() - Date.now());
  }

  /**
   * Claims one batch and sends it; answers null when none was due, else the batch's size, whether
   * the receiver answered 410, and how to record it (which also ends the renewal of its claims).
   */
  private async claimAndSend(webhookId: number, agents: Map<string, Agent>): Promise<{ size: number; gone: boolean; record: () => Promise<void> } | null> {
    const token = randomUUID();
    const batch = await this.deliveries.claimBatch(webhookId, token, DRAIN_BATCH);
    if (!batch.length) return null;
    const renew = setInterval(
      () => void this.deliveries.renewClaims(webhookId, token).catch(() => undefined),
      Math.max(500, Math.floor(this.claimStaleMs / 3)),
    );
    renew.unref?.();
    const done = <T>(p: Promise<T>) => p.finally(() => clearInterval(renew));
    try {
      const w = await this.webhooks.findRecord(webhookId);
      if (!w || !w.isActive) {
        const reason = w ? 'webhook disabled' : 'webhook deleted';
        return { size: batch.length, gone: false, record: () => done(this.endUnsent(token, batch, reason)) };
      }
      const results = await this.sendBatch(w, batch, agents);
      const gone = [...results.values()].some((o) => o.status === 410);
      return { size: batch.length, gone, record: () => done(this.record(w, token, batch, results)) };
    } catch (e) {
      clearInterval(renew);
      throw e;
    }
  }

  /**
   * Sends a batch to its webhook's target, checked once for the batch, at most DRAIN_CONCURRENCY at
   * once over kept-alive connections to the checked address (one agent per checked address, kept
   * for the run). After a 410 no further request of the batch is sent (the webhook is being disabled).
   */
  private async sendBatch(w: Webhook, batch: readonly DeliveryRow[], agents: Map<string, Agent>): Promise<Map<number, SendOutcome>> {
    const results = new Map<number, SendOutcome>();
    let target;
    try {
      target = await resolveTarget(w.url, this.urlRules);
    } catch (e) {
      if (!(e instanceof WebhookUrlError)) throw e;
      for (const d of batch) results.set(d.id, refused(e));
      return results;
    }
    const checked = target;
    const key = `${checked.url.origin} ${checked.address}`;
    let agent = agents.get(key);
    if (!agent) {
      agent = targetAgent(checked, DRAIN_CONCURRENCY);
      agents.set(key, agent);
    }
    const pool = agent;
    const secrets = signingSecrets(w, this.clock.now());
    let next = 0;
    let gone = false;
    const lane = async () => {
      while (!gone && next < batch.length) {
        const d = batch[next++];
        const out = await postWebhook(checked, signatureHeaders(secrets, d.eventId, d.body), d.body, this.config.webhookTimeoutMs, pool);
        results.set(d.id, out);
        if (out.status === 410) gone = true;
      }
    };
    await Promise.all(Array.from({ length: Math.min(DRAIN_CONCURRENCY / DRAIN_LANES, batch.length) }, lane));
    return results;
  }

  /**
   * Records a batch's attempts (one statement) with the webhook's failure clock, in one transaction:
   * a success stops the clock; failures start it, and a 410 or 72 h without a success disables the
   * webhook and notifies its owner. Deliveries of the batch left unsent after a 410 are dead. When
   * the database refuses that, it is logged as an error and the attempts are recorded again without
   * the receivers' answers; when that fails too, the claims go stale and each counts as a failed
   * attempt (settleLost), so a delivery is never sent again without its attempt being counted.
   */
  private async record(w: Webhook, token: string, batch: readonly DeliveryRow[], results: Map<number, SendOutcome>): Promise<void> {
    const now = new Date();
    const outcomes: Outcome[] = [];
    const unsent: number[] = [];
    for (const d of batch) {
      const out = results.get(d.id);
      if (!out) {
        unsent.push(d.id);
        continue;
      }
      const verdict = verdictFor(out.status);
      const n = d.attemptCount + 1;
      const next = verdict === 'retry' ? nextAttemptAt(n, d.windowStartedAt, now, this.config.webhookRetryFirstDelayMs, out.retryAfterMs) : null;
      const status: DeliveryStatus = verdict === 'succeeded' ? 'succeeded' : next ? 'failed' : 'dead';
      outcomes.push({
        id: d.id,
        verdict,
        status,
        nextAttemptAt: next,
        attempt: {
          attempt: n,
          at: now.toISOString(),
          code: out.status,
          durationMs: out.durationMs,
          error: out.error ?? (verdict === 'succeeded' ? null : `HTTP ${out.status}`),
          response: out.excerpt,
          nextAttemptAt: next ? next.toISOString() : null,
        },
      });
    }
    try {
      await this.writeOutcomes(w, token, batch, outcomes, unsent);
    } catch (e) {
      const err = (e as Error).message;
      const ids = batch.map((d) => d.id);
      this.logger.error({ msg: "could not record webhook attempts; recording them without the receivers' answers", webhookId: w.id, deliveries: ids, err });
      const plain = outcomes.map((o) => ({
        ...o,
        attempt: { ...o.attempt, response: '', error: `${o.attempt.error ?? 'delivered'}; the attempt could not be recorded in full: ${err}`.slice(0, 1000) },
      }));
      try {
        await this.writeOutcomes(w, token, batch, plain, unsent);
      } catch (again) {
        this.logger.error({
          msg: 'could not record webhook attempts; each counts as a failed attempt once its claim goes stale',
          webhookId: w.id,
          deliveries: ids,
          err: (again as Error).message,
        });
        throw again;
      }
    }
  }

  /** Ends claimed deliveries dead without an attempt, telling the settled-delivery listeners. */
  private async endUnsent(token: string, batch: readonly DeliveryRow[], reason: string): Promise<void> {
    const settled = await this.transactions.run(async (tx) => {
      const ended = new Set(
        await this.deliveries.markDead(
          token,
          batch.map((d) => d.id),
          reason,
          tx,
        ),
      );
      const out = settledOf(batch, (d) => (ended.has(d.id) ? 'dead' : null));
      await this.announceSettled(out, tx);
      return out;
    });
    if (settled.length) this.announceCommitted();
  }

  private async writeOutcomes(
    w: Webhook,
    token: string,
    batch: readonly DeliveryRow[],
    outcomes: readonly Outcome[],
    unsent: readonly number[],
  ): Promise<void> {
    const settled = await this.transactions.run(async (tx) => {
      // The webhook row before its deliveries, the one lock order (a delete meanwhile waits, or has removed both).
      await this.webhooks.lockForDeliveries(w.id, tx);
      const recorded = new Set(await this.deliveries.recordAttempts(token, outcomes, tx));
      const verdicts = outcomes.filter((o) => recorded.has(o.id)).map((o) => o.verdict);
      const succeeded = verdicts.includes('succeeded');
      let reason = verdicts.includes('gone') ? 'the receiver answered 410 Gone' : null;
      if (succeeded) await this.webhooks.markSuccess(w.id, tx);
      else if (verdicts.length) {
        const clock = await this.webhooks.markFailure(w.id, DISABLE_AFTER_MS, tx);
        if (!reason && clock?.due) reason = `no successful delivery for 72 hours (failing since ${clock.failingSince.toISOString()})`;
      }
      if (reason && (await this.webhooks.disable(w.id, reason, tx)) && w.createdBy !== null) {
        await this.notifications.notify(
          w.createdBy,
          'webhook_disabled',
          `The webhook to ${w.url} was disabled: ${reason}. Re-enable it with isActive: true (and requeueDead: true to deliver what failed).`,
          { webhookId: w.id, reason },
          tx,
        );
      }
      const dead = new Set(await this.deliveries.markDead(token, unsent, 'webhook disabled', tx));
      const statusOf = new Map(outcomes.filter((o) => recorded.has(o.id)).map((o) => [o.id, o.status]));
      const out = settledOf(batch, (d) => {
        if (dead.has(d.id)) return 'dead';
        const s = statusOf.get(d.id);
        return s === 'succeeded' || s === 'dead' ? s : null;
      });
      await this.announceSettled(out, tx);
      return out;
    });
    if (settled.length) this.announceCommitted();
  }

  /**
   * Counts the attempts whose outcome was never recorded: a claim not renewed for the request
   * timeout + 5 s belongs to a run that died or could not record its batch, and its request was
   * sent, or may have been. Each such delivery gets a failed attempt (no answer) and its next one on
   * the retry schedule, or is dead when its 72 h window is over. The webhook's failure clock is left
   * alone (the receiver may well have answered). Answers how many were counted.
   */
  async settleLost(webhookId: number): Promise<number> {
    let counted = 0;
    for (;;) {
      const token = randomUUID();
      const n = await this.transactions.run(async (tx) => {
        if (!(await this.webhooks.lockForDeliveries(webhookId, tx))) return { n: 0, settled: 0 };
        const lost = await this.deliveries.claimStale(webhookId, token, this.claimStaleMs, DRAIN_BATCH, tx);
        const now = new Date();
        const outcomes = lost.map((d) => {
          const attempt = d.attemptCount + 1;
          const next = nextAttemptAt(attempt, d.windowStartedAt, now, this.config.webhookRetryFirstDelayMs);
          return {
            id: d.id,
            status: next ? ('failed' as const) : ('dead' as const),
            nextAttemptAt: next,
            attempt: {
              attempt,
              at: now.toISOString(),
              code: null,
              durationMs: 0,
              error: LOST_ATTEMPT,
              response: '',
              nextAttemptAt: next ? next.toISOString() : null,
            },
          };
        });
        const recorded = new Set(await this.deliveries.recordAttempts(token, outcomes, tx));
        const dead = new Set(outcomes.filter((o) => o.status === 'dead' && recorded.has(o.id)).map((o) => o.id));
        const settled = settledOf(lost, (d) => (dead.has(d.id) ? 'dead' : null));
        await this.announceSettled(settled, tx);
        return { n: lost.length, settled: settled.length };
      });
      if (n.settled) this.announceCommitted();
      counted += n.n;
      if (n.n < DRAIN_BATCH) break;
    }
    if (counted) this.logger.warn({ msg: 'webhook attempts without a recorded outcome counted as failed', webhookId, count: counted });
    return counted;
  }

  /**
   * Queues the drain jobs of webhooks whose deliveries are due and have no live claim (at most 500
   * webhooks per call: the rest stay due until the next sweep); answers how many.
   */
  async sweep(graceMs: number): Promise<number> {
    const rows = await this.deliveries.dueWebhooks(this.claimStaleMs, graceMs, 500);
    for (const r of rows) await this.queueDrain(r.webhookId);
    return rows.length;
  }
}

/** The error of an attempt whose outcome was never recorded. */
export const LOST_ATTEMPT = 'the outcome of this attempt was not recorded (the worker stopped, or the database refused the record); counted as failed';

interface Outcome {
  id: number;
  attempt: DeliveryAttempt;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  verdict: AttemptVerdict;
}

/** The deliveries of `rows` that `statusOf` says settled, as the settled-delivery listeners get them. */
function settledOf(rows: readonly DeliveryRow[], statusOf: (d: DeliveryRow) => 'succeeded' | 'dead' | null): SettledDelivery[] {
  const out: SettledDelivery[] = [];
  for (const d of rows) {
    const status = statusOf(d);
    if (status) out.push({ id: d.id, webhookId: d.webhookId, eventId: d.eventId, eventType: d.eventType, body: d.body, status });
  }
  return out;
}

function refused(e: WebhookUrlError): SendOutcome {
  return { status: null, durationMs: 0, error: `target refused: ${e.message}`, excerpt: '', retryAfterMs: null };
}
