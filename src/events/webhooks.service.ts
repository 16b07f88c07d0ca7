import { Injectable, Logger } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EVENT_TYPES, isEventType, missingReadPermissions, readableEventTypes } from './event-types.js';
import { Clock } from '../common/clock.js';
import { newWebhookSecret } from './signature.js';
import {
  type DeliveryOutcome,
  type DeliverySettledListener,
  type NewDelivery,
  type SettledDelivery,
  WEBHOOK_DELIVERY_LIST_SPEC,
  WebhookDeliveriesRepository,
} from './webhook-deliveries.repository.js';
import { toDeliveryRecord, WebhookDeliveriesService } from './webhook-deliveries.service.js';
import { verdictFor } from './webhook-retry.js';
import { resolveTarget, WebhookUrlError } from './webhook-url.js';
import type { CreateWebhookDto, UpdateWebhookDto } from './webhook.dto.js';
import type { Webhook } from './webhook.entity.js';
import { WEBHOOK_LIST_SPEC, WebhooksRepository } from './webhooks.repository.js';

/** After a rotation the previous secret keeps signing beside the new one this long. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 3600_000;
/** The event a test delivery sends. */
export const TEST_EVENT_TYPE = 'webhook.test';

/** The one mapper from a stored webhook to the API record (never with its secret). */
export function toWebhookRecord(w: Webhook, nowMs: number) {
  const previousActive = w.previousSecret && w.previousSecretExpiresAt && w.previousSecretExpiresAt.getTime() > nowMs;
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    description: w.description,
    isActive: w.isActive,
    disabledReason: w.disabledReason,
    lastSuccessAt: iso(w.lastSuccessAt),
    failingSince: iso(w.failingSince),
    previousSecretExpiresAt: previousActive ? iso(w.previousSecretExpiresAt) : null,
    ...auditOut(w),
  };
}
export type WebhookRecord = ReturnType<typeof toWebhookRecord>;

/** Tracked events a webhook may subscribe to: `tracked.*` (every name) or `tracked.<name>` (their own stream, not part of "*"). */
const TRACKED = /^tracked\.(\*|.{1,255})$/s;
export const isTrackedSubscription = (t: string): boolean => TRACKED.test(t);

/** Event types a webhook subscribes to: names from the catalogue, or exactly ["*"]; and tracked.* or tracked.<name>. */
export function checkEventTypes(events: readonly string[]): string[] {
  const list = [...new Set(events)];
  const feed = list.filter((t) => !isTrackedSubscription(t));
  if (feed.includes('*')) {
    if (feed.length > 1) throw fieldError('events', '"*" (every event type) cannot be combined with other types');
    return list;
  }
  const unknown = feed.filter((t) => !isEventType(t));
  if (unknown.length) {
    throw new AppError(
      'validation_failed',
      `events: unknown event type${unknown.length > 1 ? 's' : ''} ${unknown.map((t) => `"${t.slice(0, 80)}"`).join(', ')}; allowed: "*" or ${EVENT_TYPES.join(', ')}, and tracked.* or tracked.<name>`,
      [{ field: 'events', message: `unknown event types: ${unknown.join(', ').slice(0, 500)}`, allowed: ['*', ...EVENT_TYPES, 'tracked.*', 'tracked.<name>'] }],
    );
  }
  return list;
}

/**
 * A webhook hands out the records its events carry, so subscribing to a resource's events needs
 * that resource's read permission ("*": every resource's), as reading them through the API does: a 403 naming each one missing.
 */
export function checkMayReceive(who: Principal, events: readonly string[]): void {
  const missing = missingReadPermissions(
    who.permissions,
    events.filter((t) => !isTrackedSubscription(t)),
  );
  // Tracked events carry what tracking:read reads.
  if (events.some(isTrackedSubscription) && !who.permissions.has('*') && !who.permissions.has('tracking:read')) missing.push('tracking:read');
  if (!missing.length) return;
  const list = missing.map((p) => `"${p}"`).join(', ');
  throw new AppError(
    'forbidden',
    `The token lacks the permission${missing.length > 1 ? 's' : ''} ${list} that the subscribed events need (their data is those records)`,
    [{ field: 'events', message: `needs ${missing.join(', ')}` }],
  );
}

@Injectable()
export class WebhooksService {
  private readonly logger = new Logger('Webhooks');

  constructor(
    private readonly webhooks: WebhooksRepository,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly delivery: WebhookDeliveriesService,
    private readonly transactions: Transactions,
    private readonly clock: Clock,
  ) {}

  /** The event types a principal may subscribe a webhook to (those whose records it may read). */
  subscribableTypes(who: Principal): string[] {
    return readableEventTypes(who.permissions);
  }

  /**
   * Per webhook: the success rate of its attempts over the last 24 h (null without attempts) and the
   * result of the last attempt of its newest attempted delivery (the console's webhook list).
   */
  async summaries(ids: readonly number[]) {
    const since = new Date(this.clock.nowMs() - 24 * 3600_000);
    const rows = await this.deliveries.attemptSummaries(ids, since);
    return new Map(
      rows.map((r) => [
        r.webhookId,
        {
          attempts24h: r.attempts,
          successRate24h: r.attempts ? r.succeeded / r.attempts : null,
          lastDelivery: r.lastAttempt ? { status: r.lastStatus, code: r.lastAttempt.code, at: r.lastAttempt.at, error: r.lastAttempt.error } : null,
        },
      ]),
    );
  }

  /** Whether the webhook exists (a workflow's webhook step names one). */
  async exists(id: number, tx?: Tx): Promise<boolean> {
    return (await this.webhooks.findRecord(id, tx)) !== null;
  }

  /** The webhook's URL, or null when it does not exist (a workflow's webhook step keeps its subscription while the URL stays). */
  async urlOf(id: number, tx?: Tx): Promise<string | null> {
    return (await this.webhooks.findRecord(id, tx))?.url ?? null;
  }

  /**
   * A subscription for a workflow's `webhook { url }` step, in the workflow's transaction `tx`: no
   * feed events (`events: []`), only the step's deliveries, signed with its own secret, retried and
   * logged like every webhook's (GET /api/webhooks/{id}/deliveries; the secret is answered by
   * POST /api/webhooks/{id}/rotate-secret). The URL is checked as at creation (a 400 naming `url`).
   */
  async createForWorkflow(url: string, description: string, who: Principal, tx: Tx): Promise<number> {
    await this.checkUrl(url);
    const w = stampCreated(this.webhooks.create(), who);
    Object.assign(w, {
      url,
      events: [],
      description: description.slice(0, 255),
      isActive: true,
      secret: newWebhookSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      disabledReason: null,
      lastSuccessAt: null,
      failingSince: null,
    });
    return this.webhooks.save(w, tx);
  }

  /**
   * Writes deliveries of these bodies to the webhook in `tx` (a workflow step's transaction), one
   * statement, each with a stable `eventId` (its Webhook-Id): written again with the same id, nothing is added. The drain
   * sends it signed and retries it as it does the feed's deliveries; call {@link queueDrains} after
   * the commit (the dispatcher's sweep queues it otherwise). Answers false when the webhook is gone.
   */
  async queueDirectDeliveries(webhookId: number, eventType: string, rows: readonly { eventId: string; body: string }[], tx: Tx): Promise<boolean> {
    if (!(await this.webhooks.findRecord(webhookId, tx))) return false;
    await this.deliveries.insertMany(
      rows.map((r) => ({ webhookId, eventId: r.eventId, eventType, sequence: null, body: r.body })),
      tx,
    );
    return true;
  }

  /**
   * Tracked events for the webhooks subscribed to them (`tracked.*`, `tracked.<name>`): one
   * delivery per event and webhook, written in the intake's transaction `tx` (the same signed,
   * retried deliveries with their log as the change feed's). The delivery's event id (Webhook-Id)
   * is derived from the tracked event's id. Answers the webhooks that got deliveries (their drains
   * are queued by {@link WebhooksService.queueDrains} after the commit).
   */
  async deliverTracked(events: readonly TrackedDelivery[], tx: Tx): Promise<number[]> {
    if (!events.length) return [];
    const subs = (await this.webhooks.activeSubscriptions(tx)).filter((s) => s.events.some(isTrackedSubscription));
    if (!subs.length) return [];
    const rows: NewDelivery[] = [];
    for (const e of events) {
      if (e.name === null) continue;
      const type = `tracked.${e.name}`;
      let body: string | null = null;
      const id = trackedEventUuid(e.id);
      for (const s of subs) {
        if (!s.events.includes('tracked.*') && !s.events.includes(type)) continue;
        body ??= JSON.stringify({ id, type, occurredAt: e.occurredAt, sequence: null, data: e });
        rows.push({ webhookId: s.id, eventId: id, eventType: type, sequence: null, body });
      }
    }
    return this.deliveries.insertMany(rows, tx);
  }

  /**
   * Tells `listener` of every delivery that settles (succeeded, or dead: a 4xx, retries exhausted,
   * the webhook disabled or deleted), in the transaction that settles it; `committed` after it.
   */
  onDeliveriesSettled(listener: DeliverySettledListener): void {
    this.delivery.onSettled(listener);
  }

  /** Where the webhook's delivery of `eventId` stands (null: no such delivery, e.g. deleted with its webhook). */
  deliveryOutcome(webhookId: number, eventId: string, tx?: Tx): Promise<DeliveryOutcome | null> {
    return this.delivery.outcomeOf(webhookId, eventId, tx);
  }

  /** deliveryOutcome for many deliveries at once (one statement), keyed `webhookId:eventId`; a missing one is absent. */
  deliveryOutcomes(keys: readonly { webhookId: number; eventId: string }[], tx?: Tx): Promise<Map<string, DeliveryOutcome>> {
    return this.delivery.outcomesOf(keys, tx);
  }

  /** Queues the drains of these webhooks (after the commit of their deliveries; a failure is left to the sweep). */
  queueDrains(webhookIds: readonly number[]): Promise<void> {
    return this.delivery.queueDrainsQuietly(webhookIds);
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, WEBHOOK_LIST_SPEC);
    const page = await this.webhooks.list(q);
    return listEnvelope(
      q,
      'webhooks',
      page,
      page.items.map((w) => toWebhookRecord(w, this.clock.nowMs())),
    );
  }

  async get(id: number): Promise<WebhookRecord> {
    return toWebhookRecord(await this.found(id), this.clock.nowMs());
  }

  /** Creates a webhook; the answer carries its signing secret, the only time it is shown. */
  async create(dto: CreateWebhookDto, who: Principal): Promise<WebhookRecord & { secret: string }> {
    const events = checkEventTypes(dto.events);
    checkMayReceive(who, events);
    const url = await this.checkUrl(dto.url);
    const w = stampCreated(this.webhooks.create(), who);
    Object.assign(w, {
      url,
      events,
      description: dto.description ?? null,
      isActive: dto.isActive ?? true,
      secret: newWebhookSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      disabledReason: null,
      lastSuccessAt: null,
      failingSince: null,
    });
    const id = await this.webhooks.save(w);
    return { ...toWebhookRecord(await this.found(id), this.clock.nowMs()), secret: w.secret };
  }

  /**
   * Changes the given properties. Turning an inactive webhook active restarts its failure clock;
   * with `requeueDead: true` its dead deliveries are queued again (each with a fresh 72 h window).
   */
  async patch(id: number, dto: UpdateWebhookDto, who: Principal): Promise<WebhookRecord> {
    for (const f of ['url', 'events', 'isActive'] as const) if (dto[f] === null) throw fieldError(f, 'must not be null');
    const events = dto.events !== undefined ? checkEventTypes(dto.events) : undefined;
    if (events !== undefined) checkMayReceive(who, events);
    const url = dto.url !== undefined ? await this.checkUrl(dto.url) : undefined;
    const { record, requeued } = await this.transactions.run(async (tx) => {
      const w = await this.webhooks.findForUpdate(id, tx);
      if (!w) throw notFound('Webhook', id);
      // Changing a webhook (pointing it elsewhere, turning it back on) decides where its records go,
      // as subscribing does: the events it keeps need their read permissions too.
      if (events === undefined) checkMayReceive(who, w.events);
      const enabling = dto.isActive === true && !w.isActive;
      if (url !== undefined) w.url = url;
      if (events !== undefined) w.events = events;
      if (dto.description !== undefined) w.description = dto.description ?? null;
      if (dto.isActive !== undefined) w.isActive = dto.isActive;
      if (enabling) {
        w.disabledReason = null;
        w.failingSince = null;
      }
      stampModified(w, who);
      await this.webhooks.save(w, tx);
      const requeued = enabling && dto.requeueDead ? await this.deliveries.requeueDead(id, tx) : 0;
      return { record: toWebhookRecord(w, this.clock.nowMs()), requeued };
    });
    if (requeued) await this.delivery.queueDrainsQuietly([id]);
    return record;
  }

  /**
   * PUT: replaces every property of an existing webhook (omitted optional ones go back to their
   * defaults: no description, active), keeping its secret; an id that does not exist creates a new
   * webhook (with a new id and a secret shown in this answer only).
   */
  async replace(id: number, dto: CreateWebhookDto, who: Principal): Promise<{ created: boolean; webhook: WebhookRecord & { secret?: string } }> {
    const events = checkEventTypes(dto.events);
    checkMayReceive(who, events);
    const url = await this.checkUrl(dto.url);
    const replaced = await this.transactions.run(async (tx) => {
      const w = await this.webhooks.findForUpdate(id, tx);
      if (!w) return null;
      const isActive = dto.isActive ?? true;
      if (isActive && !w.isActive) {
        w.disabledReason = null;
        w.failingSince = null;
      }
      Object.assign(w, { url, events, description: dto.description ?? null, isActive });
      stampModified(w, who);
      await this.webhooks.save(w, tx);
      return toWebhookRecord(w, this.clock.nowMs());
    });
    if (replaced) return { created: false, webhook: replaced };
    return { created: true, webhook: await this.create(dto, who) };
  }

  /**
   * Exactly one of concurrent deletes gets the webhook; the others a 404. Its deliveries go with it,
   * in the one lock order of webhooks and deliveries: the webhook row first, then its deliveries in
   * id order (a drain recording attempts meanwhile waits, or has finished), then the row.
   */
  async remove(id: number): Promise<WebhookRecord> {
    const w = await this.found(id);
    const removed = await this.transactions.run(async (tx) => {
      if (!(await this.webhooks.lockForDelete(id, tx))) return null;
      const unsettled = await this.deliveries.removeAllOf(id, tx);
      return (await this.webhooks.remove(id, tx)) !== null ? unsettled : null;
    });
    if (!removed) throw notFound('Webhook', id);
    // Deliveries that had not settled end with their webhook: told after the delete (not under the
    // webhook's FOR UPDATE lock, which a workflow step inserting a delivery may be waiting for).
    if (removed.length) await this.announceEnded(removed);
    return toWebhookRecord(w, this.clock.nowMs());
  }

  private async announceEnded(settled: SettledDelivery[]): Promise<void> {
    try {
      await this.transactions.run((tx) => this.delivery.announceSettled(settled, tx));
      this.delivery.announceCommitted();
    } catch (e) {
      this.logger.warn({ msg: 'could not announce the deliveries ended with their webhook', count: settled.length, err: (e as Error).message });
    }
  }

  /** A new secret; the previous one keeps signing beside it for 24 h (both signatures are sent). */
  async rotateSecret(id: number, who: Principal): Promise<WebhookRecord & { secret: string }> {
    return this.transactions.run(async (tx) => {
      const w = await this.webhooks.findForUpdate(id, tx);
      if (!w) throw notFound('Webhook', id);
      w.previousSecret = w.secret;
      w.previousSecretExpiresAt = new Date(this.clock.nowMs() + PREVIOUS_SECRET_TTL_MS);
      w.secret = newWebhookSecret();
      stampModified(w, who);
      await this.webhooks.save(w, tx);
      return { ...toWebhookRecord(w, this.clock.nowMs()), secret: w.secret };
    });
  }

  /** Sends a signed `webhook.test` event now and answers what the receiver said (not recorded, not retried). */
  async test(id: number) {
    const w = await this.found(id);
    const eventId = randomUUID();
    const body = JSON.stringify({
      id: eventId,
      type: TEST_EVENT_TYPE,
      occurredAt: this.clock.now().toISOString(),
      sequence: null,
      data: { webhookId: w.id, message: 'This is a test delivery.' },
      previous: null,
    });
    const out = await this.delivery.send(w, eventId, body);
    return {
      eventId,
      success: verdictFor(out.status) === 'succeeded',
      statusCode: out.status,
      durationMs: out.durationMs,
      error: out.error,
      response: out.excerpt,
    };
  }

  /**
   * A webhook's deliveries with the list parameters (WEBHOOK_DELIVERY_LIST_SPEC), newest first by
   * default. The list is named after the webhook: a cursor of another webhook's list is a 400.
   */
  async listDeliveries(id: number, query: Record<string, unknown>) {
    const spec = { ...WEBHOOK_DELIVERY_LIST_SPEC, name: `webhook ${id} deliveries` };
    const q = parseListQuery(query, spec);
    await this.found(id);
    const page = await this.deliveries.page(id, q, spec);
    return listEnvelope(q, 'deliveries', page, page.items.map(toDeliveryRecord));
  }

  /** Queues a delivery again now (whatever its status; one being sent right now is left to that attempt), with a fresh 72 h window. */
  async retryDelivery(id: number, deliveryId: number) {
    const w = await this.found(id);
    if (!w.isActive) throw new AppError('conflict', `Webhook ${id} is not active; re-enable it first (isActive: true)`);
    if (!(await this.deliveries.requeue(id, deliveryId, this.delivery.claimStaleMs))) throw notFound('Delivery', deliveryId);
    await this.delivery.queueDrain(id);
    const d = await this.deliveries.find(id, deliveryId);
    if (!d) throw notFound('Delivery', deliveryId); // deleted with its webhook meanwhile
    return toDeliveryRecord(d);
  }

  private async found(id: number): Promise<Webhook> {
    const w = await this.webhooks.findRecord(id);
    if (!w) throw notFound('Webhook', id);
    return w;
  }

  /** The URL rules at creation/change: form, then every address the host resolves to (a 400 naming `url`). */
  async checkUrl(raw: string): Promise<string> {
    try {
      await resolveTarget(raw, this.delivery.urlRules);
    } catch (e) {
      if (e instanceof WebhookUrlError) throw fieldError('url', e.message);
      throw e;
    }
    return raw;
  }
}

/** A tracked event as a webhook delivers it (the record GET /api/tracking/events answers). */
export interface TrackedDelivery {
  id: number;
  name: string | null;
  occurredAt: string;
  [k: string]: unknown;
}

/** A stable UUID for a tracked event (the delivery's Webhook-Id): from a hash of its id. */
export function trackedEventUuid(id: number): string {
  const h = createHash('sha256').update(`tracked-event:${id}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
