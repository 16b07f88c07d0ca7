import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { ErrorDetail } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { outsideTransaction, Transactions } from '../database/transactions.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { TrackedEventQueue } from './tracked-event-queue.repository.js';
import { toTrackedEventRecord } from './tracking-record.js';
import { TrackingIdentity } from './tracking-identity.js';
import { type DailyCount, type DefinitionDelta, type NewTrackedEvent, TrackingRepository, type TrackedEventRow } from './tracking.repository.js';
import { type CallType, propertyTypes, readRequest, type TrackedCall } from './tracking.rules.js';

/** What listeners hear after an intake committed: the stored events and the contacts whose behaviour changed. */
export interface TrackedBatch {
  events: TrackedEventRow[];
  contactIds: number[];
  /** Webhooks that got deliveries of these events (their drains are queued after the commit). */
  webhookIds: number[];
}

const DAY_MS = 86_400_000;
/** How often (real time, per process) intakes fold the definitions' deltas: a pacing, not a behaviour of the API. */
const FOLD_EVERY_MS = 2_000;
/** How often (real time, per process) listeners are told of committed batches at most (merged meanwhile): a pacing, as above. */
const TELL_EVERY_MS = 50;

/**
 * The Segment-compatible intake (POST /api/ingest/v1/track|identify|batch): checks the whole
 * request (any fault is a 400 and nothing is stored), then in one transaction claims the
 * messageIds (a call seen before is skipped), resolves identities (tracking-identity.ts), inserts
 * the events into their monthly partitions, adds them to the daily counts and the definitions, queues
 * them for the consumers interested in their names (tracked-event-queue.repository.ts), and writes the
 * deliveries of the webhooks subscribed to them. Track calls of people already known (no contact or
 * link to make) and no webhook subscribed take the same writes as one statement instead
 * ({@link storeKnown}: one round trip to PostgreSQL instead of seven).
 * It answers once that transaction committed; listeners (the segment refresher, the webhooks) are
 * told afterwards.
 */
@Injectable()
export class TrackingIntakeService implements OnModuleDestroy {
  private readonly logger = new Logger('Tracking');
  private readonly listeners = new Set<(batch: TrackedBatch) => void>();
  private folding: Promise<unknown> | null = null;
  private foldedAt = 0;
  private toldAt = 0;
  private waiting: { events: TrackedEventRow[]; contacts: Set<number>; webhooks: Set<number> } | null = null;
  private tellTimer: NodeJS.Timeout | null = null;
  /** Requests stored by each path since the start (the one statement, or a transaction: identify calls, and the requests the one statement declined). */
  readonly paths = { oneStatement: 0, transaction: 0 };

  constructor(
    private readonly repo: TrackingRepository,
    private readonly transactions: Transactions,
    private readonly contacts: ContactsService,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly webhooks: WebhooksService,
    private readonly queue: TrackedEventQueue,
  ) {}

  /** A fold in flight finishes before the pool closes. */
  async onModuleDestroy(): Promise<void> {
    if (this.tellTimer) clearTimeout(this.tellTimer);
    this.waiting = null;
    await this.folding;
  }

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
    let batch = await this.storeKnown(kept, now);
    if (batch) this.paths.oneStatement++;
    else {
      this.paths.transaction++;
      batch = await this.transactions.run((tx) => this.store(kept, who, now, tx));
    }
    if (batch.webhookIds.length) await this.webhooks.queueDrains(batch.webhookIds);
    if (batch.events.length) {
      this.foldSoon();
      this.tell(batch);
    }
    return { success: true };
  }

  /**
   * The one-statement path: track calls of people already known (userIds that name contacts,
   * anonymousIds already linked) need no identity work, so their claim, events, counts and queues
   * are one statement on the pool, committed when it answers (TrackingRepository.storeKnown). Null
   * (nothing written) when a call needs identity work or a webhook subscribes to these events:
   * {@link store} takes the request in a transaction.
   */
  private async storeKnown(calls: TrackedCall[], now: Date): Promise<TrackedBatch | null> {
    if (!calls.every((c) => c.type === 'track' && c.name !== null)) return null;
    // A messageId twice in the request: its first call is stored (as the transaction path's claim does).
    const seen = new Set<string>();
    const todo = calls.filter((c) => !seen.has(c.messageId) && seen.add(c.messageId));
    const stored = await this.repo.storeKnown(
      todo.map((c) => ({
        occurredAt: c.occurredAt,
        name: c.name as string,
        userId: c.userId,
        anonymousId: c.anonymousId,
        messageId: c.messageId,
        properties: c.properties,
        context: c.context,
        flags: flagsOf(c, []),
        types: propertyTypes(c.properties),
      })),
      now,
    );
    if (!stored) return null;
    const events: TrackedEventRow[] = [];
    for (const c of todo) {
      const s = stored.get(c.messageId);
      if (!s) continue;
      events.push({
        id: s.id,
        occurredAt: c.occurredAt,
        receivedAt: now,
        type: 'track',
        name: c.name,
        contactId: s.contactId,
        userId: c.userId,
        anonymousId: c.anonymousId,
        messageId: c.messageId,
        properties: c.properties,
        context: c.context,
        flags: flagsOf(c, []),
      });
    }
    events.sort((x, y) => Number(x.id) - Number(y.id));
    return { events, contactIds: [...new Set(events.map((e) => e.contactId as number))], webhookIds: [] };
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
        flags: flagsOf(c, attribution[i].problems),
      };
    });
    const daily: DailyCount[] = [];
    for (const r of rows)
      if (r.type === 'track' && r.contactId !== null && r.name !== null) daily.push({ contactId: r.contactId, name: r.name, at: r.occurredAt });
    // One statement: the events, their daily counts, the definitions' deltas and the segment queue.
    const ids = await this.repo.storeEvents(rows, identity.attributed, definitionsOf(rows), now, tx);
    const events: TrackedEventRow[] = rows
      .map((r) => ({ ...r, id: ids.get(r.messageId) as string, receivedAt: now }))
      .sort((x, y) => Number(x.id) - Number(y.id));
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
    const contactIds = [...new Set([...identity.attributed, ...daily].map((d) => d.contactId))];
    // Webhooks subscribed to tracked.<name> / tracked.*: their deliveries commit with the events.
    const webhookIds = await this.webhooks.deliverTracked(events.filter((e) => e.type === 'track').map(toTrackedEventRecord), tx);
    return { events, contactIds, webhookIds };
  }

  /**
   * Folds the definitions' deltas this process's intakes appended, at most every FOLD_EVERY_MS and
   * after the answer (a read of the definitions folds first anyway: this keeps the deltas few).
   */
  private foldSoon(): void {
    const at = Date.now();
    if (this.folding || at - this.foldedAt < FOLD_EVERY_MS) return;
    this.foldedAt = at;
    this.folding = this.repo
      .foldDefinitions(false)
      .catch((e: unknown) => this.logger.warn({ msg: 'tracked definitions fold failed', err: e instanceof Error ? e.message : String(e) }))
      .finally(() => (this.folding = null));
  }

  /**
   * Tells the listeners of a committed batch: at once when none was told in the last TELL_EVERY_MS,
   * else with the batches committed meanwhile, merged, when that time is up. Each listener kicks a
   * loop of passes over the database (segments, scoring, workflows): under a sustained intake they
   * wake about 1000 / TELL_EVERY_MS times a second instead of once per request.
   */
  private tell(batch: TrackedBatch): void {
    if (this.waiting) {
      this.waiting.events.push(...batch.events);
      for (const id of batch.contactIds) this.waiting.contacts.add(id);
      for (const id of batch.webhookIds) this.waiting.webhooks.add(id);
      return;
    }
    const wait = this.toldAt + TELL_EVERY_MS - Date.now();
    if (wait <= 0) {
      this.tellNow(batch);
      return;
    }
    this.waiting = { events: [...batch.events], contacts: new Set(batch.contactIds), webhooks: new Set(batch.webhookIds) };
    this.tellTimer = outsideTransaction(() =>
      setTimeout(() => {
        const merged = this.waiting;
        this.waiting = null;
        this.tellTimer = null;
        if (merged)
          this.tellNow({
            events: merged.events.sort((x, y) => Number(x.id) - Number(y.id)),
            contactIds: [...merged.contacts],
            webhookIds: [...merged.webhooks],
          });
      }, wait),
    );
    this.tellTimer.unref();
  }

  private tellNow(batch: TrackedBatch): void {
    this.toldAt = Date.now();
    for (const listener of this.listeners) {
      try {
        listener(batch);
      } catch (e) {
        this.logger.warn({ msg: 'tracked listener failed', err: e instanceof Error ? e.message : String(e) });
      }
    }
  }
}

/** A stored call's flags: its clamped timestamp, its identity problems (null: none). */
function flagsOf(c: TrackedCall, problems: ErrorDetail[]): Record<string, unknown> | null {
  if (!c.clampedFrom && !problems.length) return null;
  const flags: Record<string, unknown> = {};
  if (c.clampedFrom) flags.timestampClamped = { given: c.clampedFrom, reason: 'more than 24 h in the future: stored at the receive time' };
  if (problems.length) flags.problems = problems;
  return flags;
}

/** Each event name's additions to its definition. */
function definitionsOf(rows: NewTrackedEvent[]): DefinitionDelta[] {
  const byName = new Map<string, DefinitionDelta>();
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
