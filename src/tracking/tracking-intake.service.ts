import { Inject, Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { Principal } from '../common/request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions } from '../database/transactions.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { TrackedEventQueue } from './tracked-event-queue.repository.js';
import { toTrackedEventRecord } from './tracking-record.js';
import { TrackingIdentity } from './tracking-identity.js';
import { type DailyCount, type NewTrackedEvent, TrackingRepository, type TrackedEventRow } from './tracking.repository.js';
import { type CallType, propertyTypes, readRequest, type TrackedCall } from './tracking.rules.js';

/** What listeners hear after an intake committed: the stored events and the contacts whose behaviour changed. */
export interface TrackedBatch {
  events: TrackedEventRow[];
  contactIds: number[];
  /** Webhooks that got deliveries of these events (their drains are queued after the commit). */
  webhookIds: number[];
}

const DAY_MS = 86_400_000;

/**
 * The Segment-compatible intake (POST /api/ingest/v1/track|identify|batch): checks the whole
 * request (any fault is a 400 and nothing is stored), then in one transaction claims the
 * messageIds (a call seen before is skipped), resolves identities (tracking-identity.ts), inserts
 * the events into their monthly partitions, adds them to the daily counts and the definitions, queues
 * them for the consumers interested in their names (tracked-event-queue.repository.ts), and writes the
 * deliveries of the webhooks subscribed to them.
 * It answers once that transaction committed; listeners (the segment refresher, the webhooks) are
 * told afterwards.
 */
@Injectable()
export class TrackingIntakeService {
  private readonly logger = new Logger('Tracking');
  private readonly listeners = new Set<(batch: TrackedBatch) => void>();

  constructor(
    private readonly repo: TrackingRepository,
    private readonly transactions: Transactions,
    private readonly contacts: ContactsService,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly webhooks: WebhooksService,
    private readonly queue: TrackedEventQueue,
  ) {}

  /** Called after each committed intake that stored something. */
  onTracked(listener: (batch: TrackedBatch) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Checks and stores one request; answers Segment's `{ success: true }` after the commit. */
  async ingest(route: 'batch' | CallType, body: unknown, who: Principal): Promise<{ success: true }> {
    const now = this.clock.now();
    const calls = readRequest(body, route, now);
    // A call older than the retention would be dropped with its partition at the next retention
    // pass: it is acknowledged and not stored.
    const oldest = now.getTime() - this.config.trackingRetentionDays * DAY_MS;
    const kept = calls.filter((c) => c.occurredAt.getTime() >= oldest);
    if (kept.length < calls.length) this.logger.debug({ msg: 'tracked calls older than the retention skipped', skipped: calls.length - kept.length });
    if (!kept.length) return { success: true };
    await this.repo.ensurePartitions(kept.map((c) => c.occurredAt));
    const batch = await this.transactions.run((tx) => this.store(kept, who, now, tx));
    if (batch.webhookIds.length) await this.webhooks.queueDrains(batch.webhookIds);
    if (batch.events.length) this.tell(batch);
    return { success: true };
  }

  private async store(calls: TrackedCall[], who: Principal, now: Date, tx: Parameters<Parameters<Transactions['run']>[0]>[0]): Promise<TrackedBatch> {
    const fresh = await this.repo.claimMessageIds(
      calls.map((c) => c.messageId),
      now,
      tx,
    );
    // A messageId seen before (or twice in this request) is stored once.
    const todo = calls.filter((c) => fresh.delete(c.messageId));
    if (!todo.length) return { events: [], contactIds: [], webhookIds: [] };
    const identity = new TrackingIdentity(this.contacts, this.repo, this.transactions, who, now, tx);
    const attribution = await identity.resolve(todo);
    const rows: NewTrackedEvent[] = todo.map((c, i) => {
      const flags: Record<string, unknown> = {};
      if (c.clampedFrom) flags.timestampClamped = { given: c.clampedFrom, reason: 'more than 24 h in the future: stored at the receive time' };
      if (attribution[i].problems.length) flags.problems = attribution[i].problems;
      return {
        occurredAt: c.occurredAt,
        type: c.type,
        name: c.name,
        contactId: attribution[i].contactId,
        userId: c.userId,
        anonymousId: c.anonymousId,
        messageId: c.messageId,
        properties: c.type === 'identify' ? c.traits : c.properties,
        context: c.context,
        flags: Object.keys(flags).length ? flags : null,
      };
    });
    const events = await this.repo.insertEvents(rows, now, tx);
    const daily: DailyCount[] = [...identity.attributed];
    for (const r of rows)
      if (r.type === 'track' && r.contactId !== null && r.name !== null) daily.push({ contactId: r.contactId, name: r.name, at: r.occurredAt });
    await this.repo.addDaily(daily, tx);
    await this.repo.addDefinitions(definitionsOf(rows), tx);
    // The consumers' queues (scoring rules, workflow triggers): attributed track events, and the earlier anonymous ones this request attributed.
    await this.queue.enqueue(
      [
        ...identity.attributed.map((a) => ({ id: a.eventId, occurredAt: a.at, name: a.name })),
        ...events
          .filter((e) => e.type === 'track' && e.contactId !== null && e.name !== null)
          .map((e) => ({ id: e.id, occurredAt: e.occurredAt, name: e.name as string })),
      ],
      now,
      tx,
    );
    const contactIds = [...new Set(daily.map((d) => d.contactId))];
    await this.repo.queueForSegments(contactIds, tx);
    // Webhooks subscribed to tracked.<name> / tracked.*: their deliveries commit with the events.
    const webhookIds = await this.webhooks.deliverTracked(events.filter((e) => e.type === 'track').map(toTrackedEventRecord), tx);
    return { events, contactIds, webhookIds };
  }

  private tell(batch: TrackedBatch): void {
    for (const listener of this.listeners) {
      try {
        listener(batch);
      } catch (e) {
        this.logger.warn({ msg: 'tracked listener failed', err: e instanceof Error ? e.message : String(e) });
      }
    }
  }
}

/** Each event name's additions to its definition. */
function definitionsOf(rows: NewTrackedEvent[]) {
  const byName = new Map<string, { name: string; count: number; first: Date; last: Date; types: Record<string, true> }>();
  for (const r of rows) {
    if (r.type !== 'track' || r.name === null) continue;
    const d = byName.get(r.name) ?? { name: r.name, count: 0, first: r.occurredAt, last: r.occurredAt, types: {} };
    d.count++;
    if (r.occurredAt < d.first) d.first = r.occurredAt;
    if (r.occurredAt > d.last) d.last = r.occurredAt;
    Object.assign(d.types, propertyTypes(r.properties));
    byName.set(r.name, d);
  }
  return [...byName.values()];
}
