import { Inject, Injectable, Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Clock } from '../common/clock.js';
import { iso } from '../common/dates.js';
import { notFound, validationError, type ErrorDetail } from '../common/errors.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { decodeCursor, encodeCursor } from '../lists/cursor.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { parseIsoWithOffset } from '../common/dates.js';
import { TRACKED_EVENT_LIST_SPEC } from './tracking-list.js';
import { type RecordEventRow, TrackingRepository, type TrackedEventRow } from './tracking.repository.js';
import { monthStart, typesByProperty, utcDay } from './tracking.rules.js';

const DAY_MS = 86_400_000;
/** Keep messageIds 48 h: a retried batch is deduplicated for at least 24 h. */
export const MESSAGE_ID_KEEP_MS = 48 * 3600_000;
/** Months of partitions created ahead of the current one. */
export const PARTITIONS_AHEAD = 2;

export { toTrackedEventRecord, type TrackedEventRecord } from './tracking-record.js';
import { toTrackedEventRecord } from './tracking-record.js';

/** One item of a contact's timeline. */
export interface TimelineItem {
  at: string;
  kind: 'tracked' | 'record';
  type: string;
  summary: string;
  data: Record<string, unknown>;
}

interface TimelineRow {
  at: string;
  kind: 'tracked' | 'record';
  id: number;
  item: TimelineItem;
}

const TIMELINE_MAX_LIMIT = 200;

/**
 * Reads of tracked events (definitions, the list, a contact's timeline) and their upkeep: the
 * monthly partitions created ahead and dropped past TRACKING_RETENTION_DAYS (by the injected
 * clock's time), the messageIds and daily counts pruned with them.
 */
@Injectable()
export class TrackingService {
  private readonly logger = new Logger('Tracking');

  constructor(
    private readonly repo: TrackingRepository,
    private readonly contacts: ContactsService,
    private readonly feed: EventsService,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** GET /api/tracking/definitions: each event name with its count, first/last seen and its properties' observed types. */
  async definitions(query: Record<string, unknown> = {}) {
    const unknown = Object.keys(query);
    if (unknown.length) {
      throw validationError(
        `Unknown query parameter ${unknown.join(', ')}: the definitions list takes none`,
        unknown.map((field) => ({ field, message: 'is not a parameter of this route' })),
      );
    }
    // The deltas of every call committed before this read, folded in first.
    await this.repo.foldDefinitions(true);
    const rows = await this.repo.definitions();
    return {
      total: rows.length,
      definitions: rows.map((r) => ({
        name: r.name,
        count: Number(r.count),
        firstSeenAt: iso(r.firstSeenAt) as string,
        lastSeenAt: iso(r.lastSeenAt) as string,
        properties: typesByProperty(r.propertyTypes),
      })),
    };
  }

  /** GET /api/tracking/events: the list's parameters and envelope, `filter` on name, contact.id, occurredAt, properties.<key>. */
  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, TRACKED_EVENT_LIST_SPEC, { now: this.clock.now() });
    const page = await this.repo.list(q);
    return listEnvelope(q, 'events', page, page.items.map(toTrackedEventRecord));
  }

  /**
   * GET /api/contacts/{id}/timeline: the contact's tracked events and its record events of the
   * change feed, merged newest first, paged by a cursor (`after` = the previous answer's `next`).
   * `types`: `tracked`, `record`, `identify`, event names and event types of the change feed.
   */
  async timeline(contactId: number, query: Record<string, unknown>): Promise<{ items: TimelineItem[]; next: string | null }> {
    const errors: ErrorDetail[] = [];
    const text = (k: string) => (typeof query[k] === 'string' ? query[k] : undefined);
    const limitRaw = text('limit');
    const limit = limitRaw === undefined ? 30 : Number(limitRaw);
    if (!Number.isInteger(limit) || limit < 1 || limit > TIMELINE_MAX_LIMIT)
      errors.push({ field: 'limit', message: `must be a whole number from 1 to ${TIMELINE_MAX_LIMIT}` });
    const time = (k: 'from' | 'to') => {
      const raw = text(k);
      if (raw === undefined || raw === '') return null;
      const d = parseIsoWithOffset(raw);
      if (!d) errors.push({ field: k, message: 'must be an ISO 8601 date-time with an offset' });
      return d;
    };
    const from = time('from');
    const to = time('to');
    const typesRaw = text('types');
    const types = typesRaw
      ? typesRaw
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean)
      : null;
    if (types && types.length > 100) errors.push({ field: 'types', message: 'may name at most 100 types' });
    for (const k of Object.keys(query))
      if (!['after', 'limit', 'types', 'from', 'to'].includes(k)) errors.push({ field: k, message: 'is not a parameter of the timeline' });
    const binding = createHash('sha256')
      .update(JSON.stringify([contactId, types, from, to]))
      .digest('base64url')
      .slice(0, 16);
    let cursor: { at: string; kind: 'tracked' | 'record'; id: number } | null = null;
    const after = text('after');
    if (after) {
      const pos = decodeCursor(after, 'timeline', binding);
      const m = typeof pos === 'string' ? null : /^(tracked|record)\|(.+)$/.exec(pos.key ?? '');
      if (typeof pos === 'string' || !m || !parseIsoWithOffset(m[2]))
        errors.push({ field: 'after', message: typeof pos === 'string' ? pos : 'is not a timeline cursor' });
      else cursor = { kind: m[1] as 'tracked' | 'record', at: m[2], id: pos.id };
    }
    if (errors.length) throw validationError(`Invalid timeline query: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
    const isEventType = (t: string) => this.feed.isEventType(t);
    const wantTracked = !types || types.some((t) => t === 'tracked' || t === 'identify' || (t !== 'record' && !isEventType(t)));
    const wantRecord = !types || types.some((t) => t === 'record' || isEventType(t));
    const names = !types || types.includes('tracked') ? null : types.filter((t) => t !== 'identify' && t !== 'record' && !isEventType(t));
    const recordTypes = !types || types.includes('record') ? null : types.filter(isEventType);
    // The contact's existence and both sides of the page are read at once (three pooled connections, one
    // round trip of latency); a page of a contact that does not exist is dropped for the 404.
    const [exists, tracked, records] = await Promise.all([
      this.contacts.exists(contactId),
      wantTracked
        ? this.repo.contactEvents(contactId, {
            before: cursor ? { at: cursor.at, id: cursor.kind === 'tracked' ? String(cursor.id) : null } : null,
            from,
            to,
            names,
            identify: !types || types.includes('tracked') || types.includes('identify'),
            limit: limit + 1,
          })
        : [],
      wantRecord
        ? this.repo.contactRecordEvents(contactId, {
            before: cursor ? { at: cursor.at, id: cursor.kind === 'record' ? String(cursor.id) : null } : null,
            from,
            to,
            types: recordTypes,
            limit: limit + 1,
          })
        : [],
    ]);
    if (!exists) throw notFound('Contact', contactId);
    // Newest first; at the same instant tracked events before record events, then by id descending.
    const merged: TimelineRow[] = [...tracked.map(trackedItem), ...records.map(recordItem)].sort((a, b) =>
      a.at !== b.at ? (a.at < b.at ? 1 : -1) : a.kind !== b.kind ? (a.kind === 'tracked' ? -1 : 1) : b.id - a.id,
    );
    const page = merged.slice(0, limit);
    const last = page[page.length - 1] as TimelineRow | undefined;
    const next = merged.length > limit && last ? encodeCursor('timeline', binding, { key: `${last.kind}|${last.at}`, id: last.id }) : null;
    return { items: page.map((r) => r.item), next };
  }

  // -- upkeep (the tracking.partitions job) ---------------------------------------------------------

  /**
   * Creates the partitions of this month and the next PARTITIONS_AHEAD, drops every partition whose
   * month ended before the retention's start, folds the definitions' waiting deltas, and prunes the
   * messageIds and daily counts past their keep. Answers what it did.
   */
  async maintain(): Promise<{ created: number; dropped: string[]; messageIds: number; dailyRows: number }> {
    const now = this.clock.now();
    const before = new Set((await this.repo.partitions()).map((p) => p.name));
    await this.repo.ensurePartitions(Array.from({ length: PARTITIONS_AHEAD + 1 }, (_, i) => monthStart(now, i)));
    const existing = await this.repo.partitions();
    const created = existing.filter((p) => !before.has(p.name)).length;
    const retentionStart = new Date(now.getTime() - this.config.trackingRetentionDays * DAY_MS);
    const dropped: string[] = [];
    for (const p of existing) {
      if (monthStart(p.start, 1) <= retentionStart) {
        await this.repo.dropPartition(p.name);
        dropped.push(p.name);
      }
    }
    await this.repo.foldDefinitions(true);
    const messageIds = await this.repo.pruneMessageIds(new Date(now.getTime() - MESSAGE_ID_KEEP_MS));
    const dailyRows = await this.repo.pruneDaily(utcDay(retentionStart));
    if (dropped.length || created) this.logger.log({ msg: 'tracked event partitions maintained', created, dropped });
    return { created, dropped, messageIds, dailyRows };
  }

  /** Takes contacts whose tracked events changed since the last take (the segment refresher re-evaluates them). */
  takeSegmentQueue(limit: number, tx: Tx): Promise<number[]> {
    return this.repo.takeSegmentQueue(limit, tx);
  }
}

/** A timeline instant: UTC with microseconds (the database's precision), so that cursors order exactly. */
function atKey(d: Date | string): string {
  return typeof d === 'string' ? d : d.toISOString();
}

function trackedItem(r: TrackedEventRow & { atKey?: string }): TimelineRow {
  const record = toTrackedEventRecord(r);
  const summary = r.type === 'identify' ? `Identified${r.userId ? ` as ${r.userId}` : ''}` : `Tracked "${r.name ?? ''}"`;
  return {
    at: r.atKey ?? atKey(r.occurredAt),
    kind: 'tracked',
    id: Number(r.id),
    item: { at: record.occurredAt, kind: 'tracked', type: r.type === 'identify' ? 'identify' : (r.name ?? ''), summary, data: record },
  };
}

function recordItem(r: RecordEventRow & { atKey?: string }): TimelineRow {
  const [subject, verb] = r.type.split('.');
  const changed = r.previous ? Object.keys(r.previous) : [];
  const summary = `${subject.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase())} ${verb.replace(/_/g, ' ')}${changed.length ? `: ${changed.join(', ')}` : ''}`;
  return {
    at: r.atKey ?? atKey(r.occurredAt),
    kind: 'record',
    id: Number(r.sequence),
    item: {
      at: iso(r.occurredAt) as string,
      kind: 'record',
      type: r.type,
      summary,
      data: { id: r.id, sequence: Number(r.sequence), data: r.data, previous: r.previous },
    },
  };
}
