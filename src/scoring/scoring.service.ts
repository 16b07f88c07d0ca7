import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { iso } from '../common/dates.js';
import { notFound, validationError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { ContactsRepository } from '../contacts/contacts.repository.js';
import { type EventRecord, EventsService } from '../events/events.service.js';
import type { CompiledFilter, FilterRegistry } from '../lists/filter-sql.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { PointGroupsRepository } from '../point-groups/point-groups.repository.js';
import { TrackedEventQueue } from '../tracking/tracked-event-queue.repository.js';
import { type RuleDefinition, SCORING_CONSUMER, ScoringRulesService } from './scoring-rules.service.js';
import { type NewPointChange, POINT_HISTORY_LIST_SPEC, type PointChangeRow, ScoringRepository } from './scoring.repository.js';
import {
  contactIdOf,
  durationMs,
  type GroupRange,
  MAX_DELTA,
  MAX_POINTS,
  MIN_POINTS,
  pointChangeError,
  type PointSource,
  tierChanges,
} from './scoring.rules.js';

/** A ledger row as the API returns it. */
export function toPointChangeRecord(r: PointChangeRow) {
  return {
    id: r.id,
    contactId: r.contactId,
    delta: r.delta,
    reason: r.reason,
    source: r.source,
    ruleId: r.ruleId,
    sourceEventId: r.sourceEventId,
    details: r.details,
    at: iso(r.at) ?? '',
    by: r.byUserId !== null || r.byUserName !== null ? { id: r.byUserId, name: r.byUserName } : null,
  };
}
export type PointChangeRecord = ReturnType<typeof toPointChangeRecord>;

/** Why a value cannot be a contact's points (an import's `points` cell), or null: a whole number within ±2^31. */
export function pointsProblem(value: unknown): string | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= MIN_POINTS && value <= MAX_POINTS
    ? null
    : `must be a whole number from ${MIN_POINTS} to ${MAX_POINTS}`;
}

/** Where a change of points comes from and why (the ledger row's context). */
export interface PointChangeContext {
  source: PointSource;
  reason: string;
  /** The rule that gives the points (source `rule`). */
  ruleId?: number | null;
  /** The event the points answer: with ruleId, unique (a second application of the pair writes nothing). */
  sourceEventId?: string | null;
  /** Extra context shown in the history: a workflow's `{ enrollmentId, stepId }`, a decay period. */
  details?: Record<string, unknown> | null;
  /** Who: a user (manual changes), or null. */
  by?: { userId: number | null; userName: string } | null;
}

/** A tracked event as scoring applies it (taken from the scoring queue by applyQueuedTracked). */
export interface TrackedEventInput {
  source: 'tracked';
  /** The tracked event's name (a rule's `on.trackedEvent`). */
  name: string;
  properties: Record<string, unknown>;
  contactId: number;
  /** The tracked event's id: with a rule's id, the unique key of its application. */
  eventId: string | number;
  occurredAt: Date | string;
}

/** Why a change of points is not made, as an error (for callers of addPointsMany that fail a change's owner with it). */
export { pointChangeError } from './scoring.rules.js';

/** What became of one change of ScoringService.addPointsMany, with the contact's points after it (null: no such contact). */
export interface PointChangeOutcome {
  contactId: number;
  delta: number;
  status: 'applied' | 'duplicate' | 'not_found' | 'invalid_delta' | 'out_of_bounds';
  points: number | null;
}

/** A change decided under its contact's lock, with the points before and after it. */
interface AppliedChange {
  contactId: number;
  delta: number;
  before: number;
  after: number;
  context: PointChangeContext;
}

/** A rule application's source, whichever stream it came from. */
interface RuleInput {
  kind: 'recordEvent' | 'trackedEvent';
  name: string;
  eventId: string;
  contactId: number;
}

/** Change-feed events the rule applier reads per transaction. */
export const APPLY_BATCH = 500;
/** Queued tracked events the rule applier takes per transaction (each batch applied set-based). */
export const TRACKED_APPLY_BATCH = 5_000;

/**
 * Points: the ledger (every change a row, with its reason), the contact's `points` kept equal to its
 * sum in the same transaction, the tier events when a change crosses a published point group's range,
 * and the rules engine that applies published rules to change-feed events and tracked events, exactly
 * once per (rule, source event).
 */
@Injectable()
export class ScoringService {
  private readonly logger = new Logger('Scoring');

  constructor(
    private readonly ledger: ScoringRepository,
    private readonly contacts: ContactsRepository,
    private readonly groups: PointGroupsRepository,
    private readonly rules: ScoringRulesService,
    private readonly events: EventsService,
    private readonly transactions: Transactions,
    private readonly clock: Clock,
    private readonly trackedQueue: TrackedEventQueue,
  ) {}

  /**
   * Adds `delta` points to a contact, inside the caller's transaction when there is one (`tx`, or the
   * current unit of work): the contact's points and the ledger row change together, with the tier
   * events of every published point group the change enters or leaves. 400 naming `delta` when it is
   * 0, beyond ±1,000,000 or would take the points beyond ±2^31; 404 when the contact does not exist.
   * Answers null when the (ruleId, sourceEventId) pair was applied before (nothing written).
   * The workflows engine calls this with `{ source: 'workflow', reason, details: { enrollmentId, stepId } }`.
   */
  async addPoints(contactId: number, delta: number, context: PointChangeContext, tx?: Tx): Promise<{ change: PointChangeRecord; points: number } | null> {
    if (!Number.isInteger(delta) || delta === 0 || Math.abs(delta) > MAX_DELTA) throw pointChangeError('invalid_delta', contactId);
    return this.transactions
      .run(async (t) => {
        const moved = await this.contacts.changePoints(contactId, delta, { min: MIN_POINTS, max: MAX_POINTS }, t);
        if (moved === null) throw pointChangeError('not_found', contactId);
        if (moved === 'out_of_bounds') throw pointChangeError('out_of_bounds', contactId);
        const [row] = await this.ledger.append([this.newRow(contactId, delta, context)], t);
        // The pair's unique key was taken (checked under the contact's lock by the rules engine, so only a
        // caller that skipped the check gets here): the savepoint rolls the points back.
        if (!row) throw new DuplicateApplication();
        await this.recordTiers([{ id: contactId, before: moved.before, after: moved.after }], t);
        return { change: toPointChangeRecord(row), points: moved.after };
      }, tx)
      .catch((e: unknown) => {
        if (e instanceof DuplicateApplication) return null;
        throw e;
      });
  }

  /** POST /api/contacts/{id}/points: a manual change by the calling user. */
  async addManualPoints(contactId: number, delta: number, reason: string, who: Principal) {
    const text = reason.trim();
    if (!text) throw validationError('reason must not be empty', [{ field: 'reason', message: 'must not be empty' }]);
    const done = await this.addPoints(contactId, delta, { source: 'manual', reason: text, by: who });
    // A manual change has no unique key, so it is never a duplicate.
    if (!done) throw new Error('manual point change was not written');
    return { pointChange: done.change, points: done.points };
  }

  /** GET /api/contacts/{id}/points/history: the contact's ledger, newest first. */
  async history(contactId: number, query: Record<string, unknown>) {
    const spec = { ...POINT_HISTORY_LIST_SPEC, name: `contact ${contactId} point history` };
    const q = parseListQuery(query, spec);
    if (!(await this.contacts.exists(contactId))) throw notFound('Contact', contactId);
    const page = await this.ledger.history(contactId, q, spec);
    return listEnvelope(q, 'pointChanges', page, page.items.map(toPointChangeRecord));
  }

  /**
   * Applies several changes at once (decay, recompute), rows locked by the caller: the points, the
   * ledger rows (a row whose unique key is taken is skipped with its change) and the tier events.
   * Answers how many contacts changed.
   */
  async applyMany(changes: { contactId: number; delta: number; context: PointChangeContext }[], tx: Tx): Promise<number> {
    const rows = await this.ledger.append(
      changes.map((c) => this.newRow(c.contactId, c.delta, c.context)),
      tx,
    );
    if (!rows.length) return 0;
    const moved = await this.contacts.applyPointDeltas(
      rows.map((r) => ({ id: r.contactId, delta: r.delta })),
      tx,
    );
    await this.recordTiers(moved, tx);
    return moved.length;
  }

  /**
   * Sets contacts' points to the given values (an import's `points` column, source `import`), in `tx`:
   * the rows are locked, and each contact whose points differ gets one ledger row of the difference
   * (two when the difference does not fit the ledger's integer: only between far-apart values near
   * ±2^31), with the tier events of the move. A set, not a change: the ±1,000,000 limit of a change
   * does not apply; every value is within ±2^31 (pointsProblem). Answers how many contacts changed.
   */
  async setPoints(targets: { contactId: number; points: number; context: PointChangeContext }[], tx: Tx): Promise<number> {
    if (!targets.length) return 0;
    const current = await this.contacts.lockPointsOf(
      targets.map((t) => t.contactId),
      tx,
    );
    const first: { contactId: number; delta: number; context: PointChangeContext }[] = [];
    const rest: typeof first = [];
    for (const t of new Map(targets.map((x) => [x.contactId, x])).values()) {
      const before = current.get(t.contactId);
      if (before === undefined || before === t.points) continue;
      const delta = t.points - before;
      const head = Math.abs(delta) <= MAX_POINTS ? delta : Math.trunc(delta / 2);
      first.push({ contactId: t.contactId, delta: head, context: t.context });
      if (head !== delta) rest.push({ contactId: t.contactId, delta: delta - head, context: t.context });
    }
    const changed = await this.applyMany(first, tx);
    await this.applyMany(rest, tx);
    return changed;
  }

  /** Sets points straight to the ledger's sum (recompute's repair: no ledger row, the ledger is the truth); tier events as for any change. */
  async repair(changes: { id: number; delta: number }[], tx: Tx): Promise<number> {
    const moved = await this.contacts.applyPointDeltas(changes, tx);
    await this.recordTiers(moved, tx);
    return moved.length;
  }

  /**
   * Applies the published rules on this tracked event's name to its contact, each at most once for
   * this event (rule id and event id are the ledger's unique key, so a repeated call writes nothing),
   * within the rule's repeatable, maxPerContact and cooldown. Runs in the caller's transaction when
   * there is one. Answers how many rules gave points.
   */
  async applyTrackedEvent(input: TrackedEventInput, tx?: Tx): Promise<number> {
    return this.transactions.run((t) => this.applyTrackedEvents([input], t), tx);
  }

  /**
   * applyTrackedEvent for a batch of tracked events, in order, in `tx`: the published trackedEvent rules
   * read once, each rule's properties filter evaluated for the batch's events of its name in one statement.
   * Answers how many applications gave points.
   */
  async applyTrackedEvents(inputs: readonly TrackedEventInput[], tx: Tx): Promise<number> {
    if (!inputs.length) return 0;
    const names = new Set(inputs.map((i) => i.name));
    const rules = (await this.rules.published('trackedEvent', names.size === 1 ? inputs[0].name : undefined, tx)).filter((r) => names.has(r.onName));
    if (!rules.length) return 0;
    const now = this.clock.now();
    // Per rule: the positions of the inputs it applies to (its name, and its filter when it has one).
    const targets = new Map<number, Set<number>>();
    for (const rule of rules) {
      const filter = this.rules.compile(rule, {}, now);
      if (filter === undefined) continue;
      const positions = inputs.flatMap((input, i) => (input.name === rule.onName ? [i] : []));
      if (!filter) {
        targets.set(rule.id, new Set(positions));
        continue;
      }
      const matched = await this.ledger.propertiesMatching(
        filter,
        positions.map((i) => inputs[i].properties ?? {}),
        tx,
      );
      targets.set(rule.id, new Set([...matched].map((m) => positions[m])));
    }
    const candidates: { rule: RuleDefinition; input: RuleInput }[] = [];
    for (const [i, input] of inputs.entries()) {
      for (const rule of rules) {
        if (targets.get(rule.id)?.has(i))
          candidates.push({ rule, input: { kind: 'trackedEvent', name: input.name, eventId: String(input.eventId), contactId: input.contactId } });
      }
    }
    return this.applyRules(candidates, tx);
  }

  /**
   * Applies the tracked events queued for scoring (the intake queues those whose name a published
   * trackedEvent rule names): up to `limit` taken and applied in one transaction, so each is applied
   * once whatever crashes (docs/decisions/tracked-event-stream.md). Answers how many it took.
   */
  async applyQueuedTracked(limit = TRACKED_APPLY_BATCH): Promise<number> {
    return this.transactions.run(async (tx) => {
      const events = await this.trackedQueue.claim(SCORING_CONSUMER, limit, tx);
      await this.applyTrackedEvents(
        events.map((e) => ({
          source: 'tracked',
          name: e.name,
          properties: e.properties ?? {},
          contactId: e.contactId,
          eventId: e.id,
          occurredAt: e.occurredAt,
        })),
        tx,
      );
      return events.length;
    });
  }

  /**
   * One pass of the rule applier over the change feed: the events after its cursor of the types the
   * published recordEvent rules name, each rule applied to the event's contact when the rule existed
   * when the event occurred and its filter matches the contact now. The cursor moves in the same
   * transaction; a second process finds it locked and skips the pass. Answers how many events of the feed
   * it looked through (-1: locked).
   */
  async applyFeed(): Promise<number> {
    await this.events.sequenceNow(true);
    return this.transactions.run(async (tx) => {
      const cursor = await this.ledger.lockCursor(tx);
      if (!cursor) return -1;
      const rules = await this.rules.published('recordEvent', undefined, tx);
      const types = [...new Set(rules.map((r) => r.onName))];
      // The rules' event types among the next APPLY_BATCH events of the feed; the cursor moves to the
      // end of what was read (with no rule, to the feed's end without reading).
      const window = types.length ? await this.events.scanIn(tx, cursor.lastSequence, APPLY_BATCH, types) : null;
      const events = window?.events ?? [];
      if (events.length) await this.applyEvents(rules, events, tx);
      const upTo = window ? window.scannedThrough : cursor.feedSequence;
      if (upTo > cursor.lastSequence) await this.ledger.advanceCursor(upTo, tx);
      // Numbers are consecutive: APPLY_BATCH when the window was full and more may follow.
      return window ? window.scannedThrough - cursor.lastSequence : 0;
    });
  }

  /** Applies recordEvent rules to a batch of events in order (filters evaluated per rule for the batch's contacts at once). */
  private async applyEvents(rules: RuleDefinition[], events: EventRecord[], tx: Tx): Promise<void> {
    const now = this.clock.now();
    const registry: FilterRegistry = rules.some((r) => r.filter) ? await this.rules.contactsRegistry(tx) : {};
    const matching = new Map<number, Set<number> | null>();
    for (const rule of rules) {
      const compiled: CompiledFilter | null | undefined = this.rules.compile(rule, registry, now);
      if (compiled === undefined) {
        matching.set(rule.id, new Set());
        continue;
      }
      if (!compiled) {
        matching.set(rule.id, null);
        continue;
      }
      const ids = events.filter((e) => e.type === rule.onName).flatMap((e) => contactIdOf(e.type, e.data) ?? []);
      matching.set(rule.id, await this.ledger.matchingContacts(compiled, [...new Set(ids)], tx));
    }
    const candidates: { rule: RuleDefinition; input: RuleInput }[] = [];
    for (const e of events) {
      const contactId = contactIdOf(e.type, e.data);
      if (contactId === null) continue;
      for (const rule of rules) {
        if (rule.onName !== e.type) continue;
        // A rule answers the events that occurred since it was created, not the backlog before it.
        if (rule.createdAt && Date.parse(e.occurredAt) < rule.createdAt.getTime()) continue;
        const m = matching.get(rule.id);
        if (m && !m.has(contactId)) continue;
        candidates.push({ rule, input: { kind: 'recordEvent', name: e.type, eventId: e.id, contactId } });
      }
    }
    await this.applyRules(candidates, tx);
  }

  /**
   * Rules on their source events, in the given order, set-based (bench row "rule application keeps
   * up with 10,000 tracked events/s"): the contacts' rows are locked (in id order; every change of a
   * contact's points takes that lock, so the checks below cannot race), then the (rule, event) pairs
   * already applied and each limited rule's usage per contact are read once, and each application is
   * decided in order as one at a time would be: skipped when this (rule, event) was applied, when the
   * rule is not repeatable and was applied to the contact, when maxPerContact is reached, within the
   * cooldown since its last application (the batch is applied at one instant, the clock's now), or
   * when the delta would leave the bounds. The ledger rows, the totals and the tier events are then
   * written in one statement each. Answers how many applications gave points.
   */
  private async applyRules(candidates: { rule: RuleDefinition; input: RuleInput }[], tx: Tx): Promise<number> {
    if (!candidates.length) return 0;
    const points = await this.contacts.lockPointsOf([...new Set(candidates.map((c) => c.input.contactId))], tx);
    const applied = await this.ledger.appliedPairs(
      candidates.map((c) => ({ ruleId: c.rule.id, sourceEventId: c.input.eventId })),
      tx,
    );
    const limited = candidates.filter((c) => !c.rule.repeatable || c.rule.maxPerContact !== null || c.rule.cooldown !== null);
    const usage = await this.ledger.ruleUsages(
      limited.map((c) => ({ ruleId: c.rule.id, contactId: c.input.contactId })),
      tx,
    );
    const now = this.clock.now();
    const changes: AppliedChange[] = [];
    for (const { rule, input } of candidates) {
      const before = points.get(input.contactId);
      if (before === undefined) continue; // the contact was deleted
      const pair = `${rule.id}:${input.eventId}`;
      if (applied.has(pair)) continue;
      const key = `${rule.id}:${input.contactId}`;
      const u = usage.get(key) ?? { count: 0, lastAt: null };
      if (!rule.repeatable && u.count > 0) continue;
      if (rule.maxPerContact !== null && u.count >= rule.maxPerContact) continue;
      const cooldown = durationMs(rule.cooldown);
      if (cooldown !== null && u.lastAt && now.getTime() - u.lastAt.getTime() < cooldown) continue;
      const after = before + rule.delta;
      if (after < MIN_POINTS || after > MAX_POINTS) {
        this.logger.warn({ msg: 'scoring rule skipped: the points would leave their bounds', ruleId: rule.id, contactId: input.contactId });
        continue;
      }
      applied.add(pair);
      usage.set(key, { count: u.count + 1, lastAt: now });
      points.set(input.contactId, after);
      changes.push({
        contactId: input.contactId,
        delta: rule.delta,
        before,
        after,
        context: {
          source: 'rule',
          reason: `rule "${rule.name}" on ${input.name}`,
          ruleId: rule.id,
          sourceEventId: input.eventId,
          details: { [input.kind]: input.name },
        },
      });
    }
    await this.writeChanges(changes, tx);
    return changes.length;
  }

  /**
   * Adds points to many contacts at once, in the caller's transaction when there is one (`tx`, or the
   * current unit of work), each change as addPoints would make it, in the given order: the contacts'
   * rows locked in id order, then one ledger insert, one update of the totals and the tier events of
   * every step (a contact changed twice enters and leaves as it would one change at a time). A change
   * is not made, and says why, when its contact does not exist (`not_found`), its delta is 0 or beyond
   * ±1,000,000 (`invalid_delta`), it would take the points beyond ±2^31 (`out_of_bounds`, the points as
   * the earlier changes of the call left them), or its (ruleId, sourceEventId) pair or its decay period
   * was applied before (`duplicate`). Answers one outcome per change, in order, with the points after it.
   * For callers that change many contacts in one transaction (a workflow step run for a batch of
   * enrollments, source `workflow`).
   */
  async addPointsMany(changes: readonly { contactId: number; delta: number; context: PointChangeContext }[], tx?: Tx): Promise<PointChangeOutcome[]> {
    if (!changes.length) return [];
    return this.transactions.run(async (t) => {
      const points = await this.contacts.lockPointsOf([...new Set(changes.map((c) => c.contactId))], t);
      const keyOf = (c: PointChangeContext) =>
        typeof c.ruleId === 'number' && typeof c.sourceEventId === 'string' ? { ruleId: c.ruleId, sourceEventId: c.sourceEventId } : null;
      const periodOf = (c: PointChangeContext) => (typeof c.details?.decayPeriod === 'string' ? c.details.decayPeriod : null);
      const applied = await this.ledger.appliedPairs(
        changes.flatMap((c) => keyOf(c.context) ?? []),
        t,
      );
      const decayed = await this.ledger.decayedPairs(
        changes.flatMap((c) => {
          const decayPeriod = periodOf(c.context);
          return decayPeriod === null ? [] : [{ contactId: c.contactId, decayPeriod }];
        }),
        t,
      );
      const outcomes: PointChangeOutcome[] = [];
      const made: AppliedChange[] = [];
      for (const c of changes) {
        const before = points.get(c.contactId);
        const out = (status: PointChangeOutcome['status']) =>
          outcomes.push({ contactId: c.contactId, delta: c.delta, status, points: points.get(c.contactId) ?? null });
        if (before === undefined) {
          out('not_found');
          continue;
        }
        if (!Number.isInteger(c.delta) || c.delta === 0 || Math.abs(c.delta) > MAX_DELTA) {
          out('invalid_delta');
          continue;
        }
        const key = keyOf(c.context);
        const pair = key ? `${key.ruleId}:${key.sourceEventId}` : null;
        const decayPeriod = periodOf(c.context);
        const period = decayPeriod === null ? null : `${c.contactId}:${decayPeriod}`;
        if ((pair !== null && applied.has(pair)) || (period !== null && decayed.has(period))) {
          out('duplicate');
          continue;
        }
        const after = before + c.delta;
        if (after < MIN_POINTS || after > MAX_POINTS) {
          out('out_of_bounds');
          continue;
        }
        if (pair !== null) applied.add(pair);
        if (period !== null) decayed.add(period);
        points.set(c.contactId, after);
        made.push({ contactId: c.contactId, delta: c.delta, before, after, context: c.context });
        out('applied');
      }
      await this.writeChanges(made, t);
      return outcomes;
    }, tx);
  }

  /**
   * Writes changes decided under the contacts' row locks, in order: the ledger rows (one statement),
   * each contact's total (one statement) and the tier events of each step. A row the ledger refuses as
   * a duplicate (its key was checked under the lock, so this cannot happen) rolls the transaction back.
   */
  private async writeChanges(changes: AppliedChange[], tx: Tx): Promise<void> {
    if (!changes.length) return;
    const appended = await this.ledger.appendChecked(
      changes.map((c) => this.newRow(c.contactId, c.delta, c.context)),
      tx,
    );
    if (appended !== changes.length) throw new Error(`the ledger appended ${appended} of ${changes.length} point changes checked under their contacts' locks`);
    const totals = new Map<number, number>();
    for (const c of changes) totals.set(c.contactId, (totals.get(c.contactId) ?? 0) + c.delta);
    await this.contacts.applyPointDeltas(
      [...totals].map(([id, delta]) => ({ id, delta })),
      tx,
    );
    await this.recordTiers(
      changes.map((c) => ({ id: c.contactId, before: c.before, after: c.after })),
      tx,
    );
  }

  /** The tier events of these changes (left before entered, contacts in the given order), in `tx`. */
  private async recordTiers(moved: { id: number; before: number; after: number }[], tx: Tx): Promise<void> {
    const changed = moved.filter((m) => m.before !== m.after);
    if (!changed.length) return;
    const groups: GroupRange[] = await this.groups.publishedRanges(tx);
    if (!groups.length) return;
    const out: { type: 'contact.point_group_entered' | 'contact.point_group_left'; data: object }[] = [];
    for (const m of changed) {
      const { entered, left } = tierChanges(groups, m.before, m.after);
      const data = (g: GroupRange) => ({ id: m.id, contactId: m.id, pointGroup: g, points: m.after, previousPoints: m.before });
      for (const g of left) out.push({ type: 'contact.point_group_left', data: data(g) });
      for (const g of entered) out.push({ type: 'contact.point_group_entered', data: data(g) });
    }
    if (out.length) await this.events.recordMany(tx, out);
  }

  private newRow(contactId: number, delta: number, c: PointChangeContext): NewPointChange {
    return {
      contactId,
      delta,
      reason: c.reason,
      source: c.source,
      ruleId: c.ruleId ?? null,
      sourceEventId: c.sourceEventId ?? null,
      decayPeriod: typeof c.details?.decayPeriod === 'string' ? c.details.decayPeriod : null,
      details: c.details ?? null,
      at: this.clock.now(),
      byUserId: c.by?.userId ?? null,
      byUserName: c.by?.userName ?? null,
    };
  }
}

/** A (rule, source event) pair found applied when its row was appended: rolls back the change's savepoint. */
class DuplicateApplication extends Error {}
