import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { AppError, validationError } from '../common/errors.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { appendEvent, appendEvents } from '../database/outbox.js';
import { outsideTransaction, type Tx } from '../database/transactions.js';
import { changedProperties, EVENT_TYPES, type EventRecord, type EventType, isEventType, missingReadPermissions, readableEventTypes } from './event-types.js';
import { EventsRepository } from './events.repository.js';
import { Clock } from '../common/clock.js';

/** The catalogue's names and the feed's event shape, for features that follow the feed (scoring rules). */
export { EVENT_TYPES, isEventType, type EventRecord } from './event-types.js';

/** How often each api/worker process numbers newly committed events. */
export const SEQUENCER_INTERVAL_MS = 100;
/** Events a typed read looks through per statement, and at most per call, before it answers. */
const SCAN_WINDOW = 2_000;
const SCAN_BUDGET = 100_000;

/**
 * The transactional outbox and the feed behind it.
 *
 * `record` inserts an event in the caller's transaction, unnumbered, through the outbox writer
 * (src/database/outbox.ts), typed by the event types: it commits or rolls back with the change. The
 * sequencer numbers committed transactions' events one pass at a time (an advisory lock makes passes
 * strictly serial), so `sequence` grows in the order events become visible; it runs every
 * {@link SEQUENCER_INTERVAL_MS} in every api/worker process and on demand before the feed is read.
 * `after` only ever answers numbered events, so a reader paging by sequence never skips one.
 */
@Injectable()
export class EventsService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Events');
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  /** The on-demand pass of this process running now, and the one that will start after it (sequenceNow). */
  private current: Promise<number> | null = null;
  private next: Promise<number> | null = null;
  private notifyTimer: NodeJS.Timeout | null = null;
  private lastNotified = -Infinity;
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly events: EventsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /** Writes an event in `tx`, the transaction of the change it describes. */
  /** Whether `s` names an event type of the catalogue. */
  isEventType(s: string): s is EventType {
    return isEventType(s);
  }

  record(tx: Tx, type: EventType, data: object, previous?: object | null): Promise<void> {
    return appendEvent(tx, type, data, previous ?? null);
  }

  /**
   * Writes an update event in `tx`: `data` the record after the change, `previous` the old values
   * of the properties that changed (audit stamps left out; {} when only those changed).
   */
  recordUpdate(tx: Tx, type: EventType, before: object, after: object): Promise<void> {
    return appendEvent(tx, type, after, changedProperties(before, after) ?? {});
  }

  /** recordUpdate for many records in one statement (a batch's set-based update), in the given order. */
  recordUpdates(tx: Tx, type: EventType, changes: { before: object; after: object }[]): Promise<void> {
    return appendEvents(
      tx,
      changes.map((c) => ({ type, data: c.after, previous: changedProperties(c.before, c.after) ?? {} })),
    );
  }

  /** Writes several events in `tx` in one statement, in the given order. */
  recordMany(tx: Tx, events: { type: EventType; data: object; previous?: object | null }[]): Promise<void> {
    return appendEvents(tx, events);
  }

  /**
   * Numbered events after `sequence`, in sequence order, at most `limit`, optionally of `types`
   * only. Numbers every event committed so far first, so a write that returned before this call
   * is in the answer (when it fits the page).
   */
  async after(sequence: number, limit: number, types?: string[]): Promise<EventRecord[]> {
    return (await this.read(sequence, limit, types)).events;
  }

  /**
   * As {@link after}, with the cursor to continue from: the last event's number, or, for a read of
   * some types, how far the read looked (it looks through at most 100,000 events per call, so a page
   * of a rare type may come back short, or empty, with the cursor moved on).
   */
  async read(sequence: number, limit: number, types?: string[]): Promise<{ events: EventRecord[]; next: number }> {
    await this.sequenceNow(true);
    if (!types) {
      const events = await this.events.after(sequence, limit);
      return { events, next: events.length ? events[events.length - 1].sequence : sequence };
    }
    const events: EventRecord[] = [];
    let cursor = sequence;
    for (let looked = 0; looked < SCAN_BUDGET && events.length < limit; looked += SCAN_WINDOW) {
      const window = await this.events.scan(cursor, SCAN_WINDOW, types, limit - events.length);
      events.push(...window.events);
      if (window.scannedThrough === cursor) break; // the end of the feed
      // A full page ends at its last event (the window may go on past it); otherwise the window's end.
      cursor = events.length >= limit ? events[events.length - 1].sequence : window.scannedThrough;
    }
    return { events, next: cursor };
  }

  /**
   * Numbered events after `sequence` read inside the caller's transaction, without numbering first
   * (call sequenceNow() before opening `tx`): a transaction that waited here for the sequencer's own
   * connection would deadlock on the embedded database, which runs one transaction at a time.
   */
  afterIn(tx: Tx, sequence: number, limit: number): Promise<EventRecord[]> {
    return this.events.after(sequence, limit, tx);
  }

  /**
   * The events of `types` among the next `window` numbered events after `sequence`, read in `tx`
   * without numbering first (as afterIn), and how far the read looked: a follower of some types
   * moves its cursor to `scannedThrough`, not to its last event, or it would read the same window of
   * other events again and again.
   */
  scanIn(tx: Tx, sequence: number, window: number, types: readonly string[]): Promise<{ events: EventRecord[]; scannedThrough: number }> {
    return this.events.scan(sequence, window, types, window, tx);
  }

  /**
   * Of the next `window` numbered events after `sequence`, read in `tx` without numbering first (as
   * afterIn), those of the types `keyByType` names, each with its number and the record id its data
   * holds under the type's key; and how far the read looked (the last number of the window, or
   * `sequence` at the end of the feed).
   */
  scanIdsIn(
    tx: Tx,
    sequence: number,
    window: number,
    keyByType: Readonly<Record<string, string>>,
  ): Promise<{ refs: { sequence: number; id: number | null }[]; scannedThrough: number }> {
    return this.events.scanIds(sequence, window, keyByType, tx);
  }

  /** The highest sequence numbered so far, read in `tx` (as afterIn, without numbering first). */
  lastSequenceIn(tx: Tx): Promise<number> {
    return this.events.lastSequenceIn(tx);
  }

  /**
   * GET /api/events: `{ events, next }` after the cursor `after` (the sequence of the last event
   * read; omitted: from the oldest kept), of `types` (comma-separated), at most `limit` (1..500).
   * An event carries its record, so the reader sees only the types whose resource `permissions`
   * may read; naming another type in `types` is a 403.
   */
  async page(query: Record<string, unknown>, permissions: ReadonlySet<string>): Promise<{ events: EventRecord[]; next: string }> {
    const unknown = Object.keys(query).filter((k) => !['after', 'types', 'limit'].includes(k));
    if (unknown.length) {
      throw validationError(
        `Unknown query parameter ${unknown.join(', ')}; allowed: after, types, limit`,
        unknown.map((field) => ({ field, message: 'is not a parameter of this route' })),
      );
    }
    const one = (name: string): string | undefined => {
      const v = query[name];
      if (v === undefined) return undefined;
      if (typeof v !== 'string') throw validationError(`${name} must be given once`, [{ field: name, message: 'must be given once' }]);
      return v;
    };
    const rawLimit = one('limit');
    let limit = 100;
    if (rawLimit !== undefined) {
      if (!/^\d{1,4}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 500) {
        throw validationError('limit must be a whole number from 1 to 500', [{ field: 'limit', message: 'must be a whole number from 1 to 500' }]);
      }
      limit = Number(rawLimit);
    }
    const rawTypes = one('types');
    let types: string[] | undefined;
    if (rawTypes !== undefined) {
      types = [
        ...new Set(
          rawTypes
            .split(',')
            .map((t) => t.trim())
            .filter(Boolean),
        ),
      ];
      const bad = types.filter((t) => !isEventType(t));
      if (bad.length || !types.length) {
        throw validationError(`Unknown event type ${bad.join(', ') || '(none given)'}; allowed: ${EVENT_TYPES.join(', ')}`, [
          { field: 'types', message: `must be a comma-separated list of: ${EVENT_TYPES.join(', ')}`, allowed: EVENT_TYPES },
        ]);
      }
      const missing = missingReadPermissions(permissions, types);
      if (missing.length) {
        throw new AppError(
          'forbidden',
          `The token lacks the permission${missing.length > 1 ? 's' : ''} ${missing.map((p) => `"${p}"`).join(', ')} that these event types need`,
          [{ field: 'types', message: `needs ${missing.join(', ')}` }],
        );
      }
    } else {
      const readable = readableEventTypes(permissions);
      if (readable.length < EVENT_TYPES.length) types = readable;
    }
    const rawAfter = one('after');
    const prunedThrough = await this.prunedThrough();
    let after = prunedThrough;
    if (rawAfter !== undefined) {
      if (!/^\d{1,15}$/.test(rawAfter)) {
        throw validationError('after must be a cursor: the `next` of an earlier page (a whole number)', [{ field: 'after', message: 'is not a cursor' }]);
      }
      after = Number(rawAfter);
      if (after < prunedThrough) {
        throw new AppError(
          'gone',
          `The events after cursor ${after} are no longer kept (retention ${this.config.eventRetentionDays} days); continue from ${prunedThrough} after a full list walk`,
          [{ field: 'after', message: 'is older than the retention', oldestCursor: String(prunedThrough) }],
        );
      }
    }
    // A token that may read none of the resources sees no event (an empty type list would mean "all" to the query).
    if (types?.length === 0) return { events: [], next: String(after) };
    const { events, next } = await this.read(after, limit, types);
    return { events, next: String(next) };
  }

  /**
   * Where to start reading to find the events that occurred at or after `since` (a replay from a
   * time): the cursor before the first transaction that recent. Events before it are older; a few
   * after it may be too (a transaction's events carry its start time), so a replay still checks each.
   */
  cursorAt(since: Date): Promise<number> {
    return this.events.cursorAt(since);
  }

  /** The event types a reader with `permissions` may see (those whose records it may read). */
  readableTypes(permissions: ReadonlySet<string>): string[] {
    return readableEventTypes(permissions);
  }

  /**
   * The feed newest first, for the console's table: below the cursor `before` (older pages) or above
   * `after` (new events while following), of one type and of one record (`data.id`) when given.
   * The same read rules as page(): a type whose resource the reader may not read is a 403, and
   * without a type the reader sees only the types it may read.
   */
  async recent(
    filter: { type?: string; recordId?: string; before?: number; after?: number; limit: number },
    permissions: ReadonlySet<string>,
  ): Promise<EventRecord[]> {
    let types: string[] | undefined;
    if (filter.type !== undefined) {
      if (!isEventType(filter.type)) {
        throw validationError(`Unknown event type ${filter.type.slice(0, 80)}`, [{ field: 'type', message: 'is not an event type', allowed: EVENT_TYPES }]);
      }
      const missing = missingReadPermissions(permissions, [filter.type]);
      if (missing.length)
        throw new AppError('forbidden', `Reading ${filter.type} events needs the permission "${missing[0]}"`, [
          { field: 'type', message: `needs ${missing[0]}` },
        ]);
      types = [filter.type];
    } else {
      const readable = readableEventTypes(permissions);
      if (readable.length < EVENT_TYPES.length) types = readable;
    }
    if (filter.recordId !== undefined && !/^[A-Za-z0-9_.:-]{1,100}$/.test(filter.recordId)) {
      throw validationError('record must be a record id', [{ field: 'record', message: 'must be a record id (letters, digits, - _ . :)' }]);
    }
    if (types?.length === 0) return [];
    await this.sequenceNow(true);
    return this.events.recent({ ...filter, types });
  }

  /** The highest sequence removed by retention (0 when none): cursors below it are gone. */
  async prunedThrough(): Promise<number> {
    return (await this.events.state()).prunedThrough;
  }

  /** Deletes events older than `days` days by the clock (the `events.prune` job); answers how many. */
  prune(days: number): Promise<number> {
    return this.events.prune(new Date(this.clock.now().getTime() - days * 86_400_000));
  }

  /**
   * Numbers every committed, unnumbered event; answers how many this call numbered. With `wait`,
   * waits for a pass running in another process; without, skips when one is running.
   */
  sequenceNow(wait = true): Promise<number> {
    if (!wait) return this.pass(false);
    // Callers that arrive while a pass of this process runs share the one pass that starts after it:
    // each still gets a pass begun after it called (so it sees what it committed before calling),
    // and followers kicked together (by notifyListeners) cost one pass, not one each.
    if (!this.current) return this.startPass();
    this.next ??= this.current
      .catch(() => 0)
      .then(() => {
        this.next = null;
        return this.startPass();
      });
    return this.next;
  }

  private startPass(): Promise<number> {
    const pass = this.pass(true).finally(() => {
      if (this.current === pass) this.current = null;
    });
    this.current = pass;
    return pass;
  }

  private async pass(wait: boolean): Promise<number> {
    const total = Math.max(0, await this.events.sequence(wait));
    if (total > 0) this.notifyListeners();
    return total;
  }

  /**
   * Tells the listeners that events were numbered, at most once per {@link SEQUENCER_INTERVAL_MS}
   * (a later call within that time is folded into one call at its end). Followers kicked by a pass
   * call sequenceNow() themselves, which under a steady write load numbers more events: without this
   * bound each round of followers started the next at once (about 80 passes and 1,600 statements a
   * second in a worker following 3,000 writes a second, docs/decisions/events-and-webhooks.md).
   */
  private notifyListeners(): void {
    if (this.notifyTimer) return;
    const wait = this.lastNotified + SEQUENCER_INTERVAL_MS - performance.now();
    const fire = () => {
      this.notifyTimer = null;
      this.lastNotified = performance.now();
      for (const l of this.listeners) l();
    };
    if (wait <= 0) fire();
    else this.notifyTimer = outsideTransaction(() => setTimeout(fire, wait)).unref();
  }

  /** Calls `listener` (in this process) after a sequencer pass numbered new events; answers an unsubscribe. */
  onSequenced(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onApplicationBootstrap(): void {
    if (!['api', 'worker', 'all'].includes(this.config.role)) return;
    const tick = async () => {
      // One pass at a time in this process; another process's pass is skipped, not waited for.
      if (!this.running) {
        this.running = (async () => ((await this.events.hasUnsequenced()) ? this.sequenceNow(false) : 0))().catch((e: unknown) => {
          this.logger.warn({ msg: 'event sequencer pass failed', err: e instanceof Error ? e.message : String(e) });
          return 0;
        });
        await this.running;
        this.running = null;
      }
      if (this.timer) this.timer = setTimeout(() => void tick(), SEQUENCER_INTERVAL_MS).unref();
    };
    this.timer = setTimeout(() => void tick(), SEQUENCER_INTERVAL_MS).unref();
  }

  /** Stops the loop before the pool closes. */
  async onModuleDestroy(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.notifyTimer) clearTimeout(this.notifyTimer);
    this.notifyTimer = null;
    await this.running;
  }
}
