import { Injectable, Logger } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { assertBatchSize } from '../batch/batch.js';
import { iso } from '../common/dates.js';
import { AppError, conflict, fieldError, notFound, rejectNulls, validationError } from '../common/errors.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { CreateSegmentDto, SEGMENT_BATCH_MAX, type SegmentMembersBatchDto, type SegmentMembersBatchResultDto, UpdateSegmentDto } from './segment.dto.js';
import { Segment, type SegmentType } from './segment.entity.js';
import { SEGMENT_LIST_SPEC, SegmentsRepository } from './segments.repository.js';

/** How many matching contacts a preview shows. */
export const PREVIEW_SAMPLE_SIZE = 10;
/**
 * Filter fields a segment's filter cannot use: segment.id (a segment defined by segments could depend on itself); the
 * contact's deals (deal changes are not contact changes, so a dynamic segment would not be re-evaluated when they change);
 * points and pointGroup.id (points change without a contact.updated event, which is what the refresh follows).
 */
export const EXCLUDED_FILTER_FIELDS = ['segment.id', 'deals.status', 'deals.stage.id', 'points', 'pointGroup.id'] as const;
/** Change events one refresh pass reads per transaction. */
export const REFRESH_BATCH = 10_000;
/**
 * A segment whose filter depends on time alone (a behavioural window such as
 * events.x.count.7d, a relative date such as now-30d) is re-evaluated as a whole when its last
 * such evaluation is this old by the injected clock: members whose events aged out leave within
 * 5 minutes without any other change.
 */
export const TIME_REFRESH_MS = 4 * 60_000;

/**
 * Called inside the transaction of every membership change (workflows start on segment entry and
 * exit): the contacts that joined and left, or null for both after a full rebuild (which counts,
 * but does not list, what changed).
 */
export type MembershipListener = (segmentId: number, joined: number[] | null, left: number[] | null, tx: Tx) => Promise<void>;

/** A segment as the API returns it (the one mapper from row to record). */
export function toSegmentRecord(s: Segment, count: number) {
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    type: s.type,
    filter: s.filter,
    membership: {
      status: s.type === 'static' ? 'ready' : s.buildStatus,
      builtAt: s.type === 'static' ? null : iso(s.builtAt),
      count,
      error: s.type === 'static' ? null : s.buildError,
    },
    ...auditOut(s),
  };
}

export type SegmentRecord = ReturnType<typeof toSegmentRecord>;

/** JSON text with object keys sorted (jsonb does not keep the order a client sent). */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * Segments of contacts. A dynamic segment's members are materialised in
 * segment_members: a new or changed filter is built set-based by the refresher (SegmentsRefresher,
 * which calls SegmentRefreshService.buildPending), and every contact change is re-evaluated from the
 * event feed within seconds (SegmentRefreshService.refreshChanges). A static segment's members are added and removed by hand (batch).
 * The campaigns that mirror a segment follow each membership change in the same transaction.
 */
@Injectable()
export class SegmentsService {
  private readonly logger = new Logger('Segments');
  /** Called after a write that needs the refresher (a new or changed filter); set by SegmentsRefresher. */
  private wake: () => void = () => undefined;

  constructor(
    private readonly segments: SegmentsRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly contacts: ContactsService,
    private readonly campaigns: CampaignsService,
  ) {}

  private readonly membershipListeners: MembershipListener[] = [];

  onWorkNeeded(wake: () => void): void {
    this.wake = wake;
  }

  /** Asks the refresher for a pass soon (segments to rebuild). */
  wakeRefresher(): void {
    this.wake();
  }

  /** Registers a listener of membership changes (see MembershipListener). */
  onMembershipChanged(listener: MembershipListener): void {
    this.membershipListeners.push(listener);
  }

  /** Tells the membership listeners what changed in `tx` (null: the whole segment may have changed). */
  async membershipChanged(segmentId: number, joined: number[] | null, left: number[] | null, tx: Tx): Promise<void> {
    if (joined?.length === 0 && left?.length === 0) return;
    for (const listener of this.membershipListeners) await listener(segmentId, joined, left, tx);
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, SEGMENT_LIST_SPEC);
    const page = await this.segments.list(q);
    const counts = await this.segments.counts(page.items.map((s) => s.id));
    return listEnvelope(
      q,
      'segments',
      page,
      page.items.map((s) => toSegmentRecord(s, counts.get(s.id) ?? 0)),
    );
  }

  /**
   * Whether a segment's members can be used as an audience now: `missing`, `building` (a dynamic
   * segment whose members do not match its current filter yet) or `ready`.
   */
  async audienceState(id: number, tx?: Tx): Promise<'missing' | 'building' | 'ready'> {
    const s = await this.segments.findRecord(id, tx);
    if (!s) return 'missing';
    return s.type === 'dynamic' && s.buildStatus !== 'ready' ? 'building' : 'ready';
  }

  async get(id: number, tx?: Tx): Promise<SegmentRecord> {
    const s = await this.segments.findRecord(id, tx);
    if (!s) throw notFound('Segment', id);
    return toSegmentRecord(s, await this.segments.count(id, tx));
  }

  async preview(filter: unknown) {
    await this.contacts.compileFilter(filter, EXCLUDED_FILTER_FIELDS);
    const { total, contacts } = await this.contacts.list({ filter, limit: String(PREVIEW_SAMPLE_SIZE), orderBy: 'id' });
    return { count: total, sample: contacts };
  }

  /** The filter of a body checked and normalised to its JSON tree (undefined: not given, null: cleared). */
  private async readFilter(raw: unknown): Promise<FilterNode | null | undefined> {
    if (raw === undefined || raw === null) return raw;
    return (await this.contacts.compileFilter(raw, EXCLUDED_FILTER_FIELDS)).node;
  }

  async create(dto: CreateSegmentDto, who: Principal, tx?: Tx): Promise<SegmentRecord> {
    const filter = await this.readFilter(dto.filter);
    const s = this.segments.create();
    this.assign(s, dto, true);
    s.type = dto.type;
    if (s.type === 'dynamic' && !filter) throw fieldError('filter', 'is required for a dynamic segment');
    if (s.type === 'static' && filter)
      throw fieldError('filter', 'a static segment takes no filter (its members are added with POST /api/segments/{id}/contacts/batch)');
    s.filter = (filter ?? null) as Record<string, unknown> | null;
    s.filterVersion = 1;
    s.builtVersion = null;
    s.buildStatus = s.type === 'dynamic' ? 'building' : 'ready';
    s.buildError = null;
    stampCreated(s, who);
    const record = await this.transactions.run(async (t) => {
      const created = await this.get(await this.segments.save(s, t), t);
      await this.events.record(t, 'segment.created', created);
      return created;
    }, tx);
    if (s.type === 'dynamic') this.wake();
    return record;
  }

  /** PATCH: the row is locked while it is read and written, so parallel edits of different properties all land. */
  async patch(id: number, dto: UpdateSegmentDto, who: Principal): Promise<SegmentRecord> {
    rejectNulls(dto, ['name', 'type']);
    const filter = await this.readFilter(dto.filter);
    const record = await this.transactions.run(async (tx) => {
      const s = await this.segments.findForUpdate(id, tx);
      if (!s) throw notFound('Segment', id);
      return this.write(s, dto, filter, false, who, tx);
    });
    this.wakeIfBuilding(record);
    return record;
  }

  /** PUT: full replace when the id exists, else a new segment (201). */
  async put(id: number, dto: CreateSegmentDto, who: Principal): Promise<{ created: boolean; segment: SegmentRecord }> {
    const filter = await this.readFilter(dto.filter);
    const replaced = await this.transactions.run(async (tx) => {
      const s = await this.segments.findForUpdate(id, tx);
      if (!s) return null;
      return this.write(s, dto, filter ?? null, true, who, tx);
    });
    if (!replaced) return { created: true, segment: await this.create(dto, who) };
    this.wakeIfBuilding(replaced);
    return { created: false, segment: replaced };
  }

  private wakeIfBuilding(r: SegmentRecord): void {
    if (r.membership.status === 'building') this.wake();
  }

  /**
   * The rules of an edit: the type decides whether a filter is required (dynamic) or refused
   * (static); a dynamic segment whose filter changed (or that was static) gets a new filter version
   * and is rebuilt; a segment made static keeps its current members and drops its filter.
   */
  private async write(
    s: Segment,
    dto: UpdateSegmentDto,
    filter: FilterNode | null | undefined,
    replace: boolean,
    who: Principal,
    tx: Tx,
  ): Promise<SegmentRecord> {
    const before = toSegmentRecord(s, await this.segments.count(s.id, tx));
    this.assign(s, dto, replace);
    const wasType = s.type;
    const type: SegmentType = dto.type ?? s.type;
    let next: Record<string, unknown> | null;
    if (type === 'static') {
      if (filter) throw fieldError('filter', 'a static segment takes no filter (its members are added with POST /api/segments/{id}/contacts/batch)');
      next = null;
    } else if (filter) next = filter as Record<string, unknown>;
    else if (filter === null) throw fieldError('filter', 'is required for a dynamic segment');
    else if (wasType === 'dynamic' && s.filter) next = s.filter;
    else throw fieldError('filter', 'is required to make a static segment dynamic');
    const rebuild = type === 'dynamic' && (wasType !== 'dynamic' || canonical(next) !== canonical(s.filter));
    s.type = type;
    s.filter = next;
    if (rebuild) {
      s.filterVersion += 1;
      s.buildStatus = 'building';
      s.buildError = null;
    } else if (type === 'static') {
      s.buildStatus = 'ready';
      s.buildError = null;
    }
    stampModified(s, who);
    await this.segments.save(s, tx);
    const after = await this.get(s.id, tx);
    await this.events.recordUpdate(tx, 'segment.updated', before, after);
    return after;
  }

  /**
   * Deletes the segment: the campaigns that mirror it are detached first (their members stay),
   * then the row goes with its memberships (cascade). The membership lock is taken first, so a
   * delete waits for a running rebuild instead of deadlocking with it; of parallel deletes exactly
   * one gets the segment, the others a 404.
   */
  async remove(id: number, who: Principal): Promise<SegmentRecord> {
    return this.transactions.run(async (tx) => {
      await this.segments.lockMembership(id, tx);
      const s = await this.segments.findForUpdate(id, tx);
      if (!s) throw notFound('Segment', id);
      const record = toSegmentRecord(s, await this.segments.count(id, tx));
      await this.campaigns.detachSegment(id, who, tx);
      if (!(await this.segments.delete(id, tx))) throw notFound('Segment', id);
      await this.events.record(tx, 'segment.deleted', record);
      return record;
    });
  }

  /** Asks for a rebuild of a dynamic segment's members from its filter (409 for a static one); answers the segment, building. */
  async requestRebuild(id: number): Promise<SegmentRecord> {
    const record = await this.transactions.run(async (tx) => {
      const s = await this.segments.findForUpdate(id, tx);
      if (!s) throw notFound('Segment', id);
      if (s.type !== 'dynamic') throw conflict(`Segment ${id} is static: it has no filter to rebuild from`, [{ field: 'type', message: 'must be dynamic' }]);
      await this.segments.requireRebuild(id, tx);
      return this.get(id, tx);
    });
    this.wake();
    return record;
  }

  /** The segment's member contacts, with exactly the contacts list's parameters and envelope. */
  async listContacts(id: number, query: Record<string, unknown>) {
    if (!(await this.segments.exists(id))) throw notFound('Segment', id);
    return this.contacts.list(query, {
      name: `segment ${id} contacts`,
      where: this.segments.memberScope(id),
      count: () => this.segments.count(id),
      changedExpression: this.segments.memberChangedExpression(id),
    });
  }

  async count(id: number): Promise<{ count: number; status: string }> {
    const s = await this.get(id);
    return { count: s.membership.count, status: s.membership.status };
  }

  /** The segments a contact belongs to (404 when the contact does not exist). */
  async contactSegments(contactId: number, query: Record<string, unknown> = {}) {
    const unknown = Object.keys(query);
    if (unknown.length) {
      throw validationError(
        `Unknown query parameter ${unknown.join(', ')}: this route takes none`,
        unknown.map((field) => ({ field, message: 'is not a parameter of this route' })),
      );
    }
    if (!(await this.contacts.exists(contactId))) throw notFound('Contact', contactId);
    const rows = await this.segments.ofContact(contactId);
    return { total: rows.length, segments: rows.map((r) => ({ id: r.id, name: r.name, type: r.type, addedAt: iso(r.added_at) ?? '' })) };
  }

  /**
   * A static segment's `contacts/batch`: adds and removes up to 10,000 contacts each in one
   * set-based statement; a dynamic segment refuses it (409: its members follow its filter). The
   * campaigns that mirror the segment follow in the same transaction.
   */
  async batchContacts(id: number, dto: SegmentMembersBatchDto): Promise<SegmentMembersBatchResultDto> {
    const add = dto.add ?? [];
    const remove = dto.remove ?? [];
    assertBatchSize(add, SEGMENT_BATCH_MAX, 'add');
    assertBatchSize(remove, SEGMENT_BATCH_MAX, 'remove');
    const removing = new Set(remove);
    const both = [...new Set(add.filter((c) => removing.has(c)))];
    if (both.length) {
      throw new AppError('validation_failed', `Contact ${both.slice(0, 10).join(', ')} is both in add and in remove`, [
        { field: 'remove', message: `must not name a contact that add names (${both.slice(0, 10).join(', ')})` },
      ]);
    }
    const r = await this.transactions.run((tx) => this.changeStaticMembers(id, add, remove, tx));
    return {
      added: r.added.length,
      alreadyMember: r.addFound - r.added.length,
      removed: r.removed.length,
      notMember: r.removeFound - r.removed.length,
      notFound: r.notFound,
    };
  }

  /** Adds contacts to a static segment inside `tx` (an import's chunk); 404 without the segment, 409 for a dynamic one. Answers how many joined. */
  async addContacts(id: number, contactIds: number[], tx: Tx): Promise<number> {
    if (!contactIds.length) return 0;
    return (await this.changeStaticMembers(id, contactIds, [], tx)).added.length;
  }

  /** Removes contacts from a static segment inside `tx` (a workflow step); 404 without the segment, 409 for a dynamic one. Answers how many left. */
  async removeContacts(id: number, contactIds: number[], tx: Tx): Promise<number> {
    if (!contactIds.length) return 0;
    return (await this.changeStaticMembers(id, [], contactIds, tx)).removed.length;
  }

  /** Whether the segment is static (null when it does not exist). */
  async isStatic(id: number, tx?: Tx): Promise<boolean | null> {
    const s = await this.segments.findRecord(id, tx);
    return s ? s.type === 'static' : null;
  }

  /** Adds and removes members of a static segment under its membership lock; the campaigns that mirror it follow in `tx`. */
  private async changeStaticMembers(id: number, add: number[], remove: number[], tx: Tx) {
    await this.segments.lockMembership(id, tx);
    const s = await this.segments.findRecord(id, tx);
    if (!s) throw notFound('Segment', id);
    if (s.type !== 'static') {
      throw conflict(`Segment ${id} is dynamic: its members follow its filter and cannot be added or removed by hand`, [
        { field: 'type', message: 'must be static' },
      ]);
    }
    const done = await this.segments.batch(id, add, remove, tx);
    const changed = [...done.added, ...done.removed];
    if (changed.length) await this.campaigns.mirrorSegment(id, changed, tx);
    await this.membershipChanged(id, done.added, done.removed, tx);
    return done;
  }

  /** Copies name and description; with `replace` (create, PUT), an omitted description is cleared. */
  private assign(s: Segment, dto: UpdateSegmentDto, replace: boolean): void {
    if (dto.name !== undefined && dto.name !== null) {
      s.name = dto.name.trim();
      if (s.name === '') throw fieldError('name', 'must not be empty');
    }
    if (dto.description !== undefined || replace) {
      const d = dto.description;
      s.description = d === null || d === undefined || d.trim() === '' ? null : d.trim();
    }
  }
}
