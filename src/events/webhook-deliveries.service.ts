import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { iso, isoRequired } from '../common/dates.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions } from '../database/transactions.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { DeferJobError, JobQueue } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { signatureHeaders } from './signature.js';
import { type DeliveryAttempt, type DeliveryRow, type DeliveryStatus, WebhookDeliveriesRepository } from './webhook-deliveries.repository.js';
import { DISABLE_AFTER_MS, nextAttemptAt, verdictFor } from './webhook-retry.js';
import { postWebhook, type SendOutcome } from './webhook-sender.js';
import { resolveTarget, type UrlRules, WebhookUrlError } from './webhook-url.js';
import type { Webhook } from './webhook.entity.js';
import { WebhooksRepository } from './webhooks.repository.js';

/** A claim older than the request timeout plus this margin belongs to a worker that died mid-attempt. */
const CLAIM_MARGIN_MS = 5_000;
/**
 * Attempts in flight per webhook (a worker runs up to 32 at once, bullmq.job-queue.ts): a receiver
 * that hangs holds at most this many slots while the other webhooks' deliveries go on.
 */
export const MAX_IN_FLIGHT_PER_WEBHOOK = 4;

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
 * Runs delivery attempts. Each attempt is one `webhooks.deliver` job: it claims the delivery row
 * (one run wins; a claim left by a worker that died is taken over after the request timeout + 5 s),
 * checks the target again (DNS may have changed since creation), POSTs the signed body, and
 * records the attempt with the outcome in one transaction with the webhook's failure clock,
 * disabling it (and notifying its owner) on a 410 or after 72 h without a success. A retry is a
 * new job queued after the commit; deliveries that are due but have no job (broker down, worker
 * restart, in-process runner) are queued again by the dispatcher's sweep.
 */
@Injectable()
export class WebhookDeliveriesService {
  private readonly logger = new Logger('Webhooks');

  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly webhooks: WebhooksRepository,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly notifications: NotificationsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get urlRules(): UrlRules {
    return { allowHttp: this.config.webhookAllowHttp, allowPrivate: this.config.webhookAllowPrivate };
  }

  get claimStaleMs(): number {
    return this.config.webhookTimeoutMs + CLAIM_MARGIN_MS;
  }

  /** Queues one attempt of a delivery (duplicates of the same attempt are suppressed). */
  async enqueue(id: number, attemptCount: number, delayMs = 0, manual = false): Promise<void> {
    // A manual retry gets a job of its own: a retry already scheduled for later must not hold it back.
    const jobId = JOB_IDS.webhookDeliver(id, attemptCount) + (manual ? `:m${Date.now()}` : '');
    await this.jobs.enqueue('webhooks.deliver', { deliveryId: id, attempt: attemptCount }, { jobId, delayMs });
  }

  /** Queues what was just written, without failing the caller: the sweep queues what could not be. */
  async enqueueQuietly(rows: readonly { id: number; attemptCount: number }[]): Promise<void> {
    for (const r of rows) {
      try {
        await this.enqueue(r.id, r.attemptCount);
      } catch (e) {
        this.logger.warn({ msg: 'could not queue a webhook delivery; the sweep will', deliveryId: r.id, err: (e as Error).message });
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
      return { status: null, durationMs: 0, error: `target refused: ${e.message}`, excerpt: '', retryAfterMs: null };
    }
    return postWebhook(target, signatureHeaders(signingSecrets(w), eventId, body), body, this.config.webhookTimeoutMs);
  }

  /** One attempt of one delivery (the `webhooks.deliver` job). */
  async attempt(deliveryId: number): Promise<void> {
    const token = randomUUID();
    const d = await this.deliveries.claim(deliveryId, token, this.claimStaleMs, MAX_IN_FLIGHT_PER_WEBHOOK);
    if (!d) {
      // Its webhook has its share of attempts in flight: come back shortly, without using an attempt.
      if (await this.deliveries.waitingForSlot(deliveryId, this.claimStaleMs))
        throw new DeferJobError('webhook at its in-flight limit', 500 + Math.floor(Math.random() * 500));
      return; // done, not due yet (its own job or the sweep comes later), or another run has it
    }
    const w = await this.webhooks.findRecord(d.webhookId);
    if (!w || !w.isActive) {
      await this.deliveries.markDead(d.id, token, w ? 'webhook disabled' : 'webhook deleted');
      return;
    }
    const out = await this.send(w, d.eventId, d.body);
    const now = new Date();
    const verdict = verdictFor(out.status);
    const n = d.attemptCount + 1;
    const next = verdict === 'retry' ? nextAttemptAt(n, d.windowStartedAt, now, this.config.webhookRetryFirstDelayMs, out.retryAfterMs) : null;
    const status: DeliveryStatus = verdict === 'succeeded' ? 'succeeded' : next ? 'failed' : 'dead';
    const attempt: DeliveryAttempt = {
      attempt: n,
      at: now.toISOString(),
      code: out.status,
      durationMs: out.durationMs,
      error: out.error ?? (verdict === 'succeeded' ? null : `HTTP ${out.status}`),
      response: out.excerpt,
      nextAttemptAt: next ? next.toISOString() : null,
    };
    const recorded = await this.transactions.run(async (tx) => {
      if (!(await this.deliveries.recordAttempt(d.id, token, attempt, status, next, tx))) return false;
      if (verdict === 'succeeded') {
        await this.webhooks.markSuccess(w.id, tx);
        return true;
      }
      const clock = await this.webhooks.markFailure(w.id, DISABLE_AFTER_MS, tx);
      const reason =
        verdict === 'gone'
          ? 'the receiver answered 410 Gone'
          : clock?.due
            ? `no successful delivery for 72 hours (failing since ${clock.failingSince.toISOString()})`
            : null;
      if (reason && (await this.webhooks.disable(w.id, reason, tx)) && w.createdBy !== null) {
        await this.notifications.notify(
          w.createdBy,
          'webhook_disabled',
          `The webhook to ${w.url} was disabled: ${reason}. Re-enable it with isActive: true (and requeueDead: true to deliver what failed).`,
          { webhookId: w.id, reason },
          tx,
        );
      }
      return true;
    });
    if (recorded && next) {
      await this.enqueue(d.id, n, next.getTime() - Date.now()).catch((e: unknown) =>
        this.logger.warn({ msg: 'could not queue a webhook retry; the sweep will', deliveryId: d.id, err: (e as Error).message }),
      );
    }
  }

  /**
   * Queues deliveries that are due and have no live attempt (at most 500 per call: the rest stay
   * due until the next sweep); answers how many.
   */
  async sweep(graceMs: number): Promise<number> {
    const rows = await this.deliveries.due(this.claimStaleMs, graceMs, 500);
    for (const r of rows) await this.enqueue(r.id, r.attemptCount);
    return rows.length;
  }
}
