import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions } from '../database/transactions.js';
import { ContactsRepository } from '../contacts/contacts.repository.js';
import { EventsService } from '../events/events.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { PointGroupsRepository } from '../point-groups/point-groups.repository.js';
import type { CompiledFilter } from '../lists/filter-sql.js';
import { TrackedEventQueue } from '../tracking/tracked-event-queue.repository.js';
import { type RuleDefinition, ScoringRulesService } from './scoring-rules.service.js';
import type { ScoringSettingsDto, WhatIfDto } from './scoring.dto.js';
import { type ScoringJobRow, ScoringRepository } from './scoring.repository.js';
import { ScoringService } from './scoring.service.js';
import { PagedStream, type ReplayItem, ReplayState } from './scoring-replay.js';
import { contactIdOf, decayDelta, decayPeriodIndex, durationMs, tierChanges } from './scoring.rules.js';

/** Contacts per transaction of decay. */
const PAGE = 1_000;
/** Contacts recompute compares per read. */
const RECOMPUTE_PAGE = 10_000;
/** Change-feed events a what-if reads per query. */
const REPLAY_PAGE = 5_000;
/** Stored tracked events a what-if reads per query. */
const TRACKED_REPLAY_PAGE = 10_000;
/** Decay periods one run catches up at most (the worker was down longer: the rest follow on the next runs). */
const MAX_CATCH_UP = 12;

function toJobRecord(r: ScoringJobRow) {
  return {
    id: r.id,
    kind: r.kind,
    status: r.status,
    progress: r.progress,
    result: r.result,
    error: r.error,
    createdAt: iso(r.created_at) ?? '',
    startedAt: iso(r.started_at),
    finishedAt: iso(r.finished_at),
  };
}
export type ScoringJobRecord = ReturnType<typeof toJobRecord>;

/** What a what-if run stores as its request. */
interface WhatIfRequest {
  rules: WhatIfDto['rules'];
  since: string;
}

/**
 * The scoring settings (decay), the decay job, and the recompute and what-if runs (202 jobs whose
 * progress and result GET /api/scoring/jobs/{id} answers).
 */
@Injectable()
export class ScoringJobsService {
  private readonly logger = new Logger('Scoring');

  constructor(
    private readonly repo: ScoringRepository,
    private readonly scoring: ScoringService,
    private readonly rules: ScoringRulesService,
    private readonly contacts: ContactsRepository,
    private readonly groups: PointGroupsRepository,
    private readonly events: EventsService,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
    private readonly trackedQueue: TrackedEventQueue,
  ) {}

  async settings() {
    const s = await this.repo.state();
    return { decay: s.decay };
  }

  /** POST /api/scoring/settings: replaces the decay settings; periods count from now (the clock's). */
  async setSettings(dto: ScoringSettingsDto) {
    const decay = dto.decay ? { percent: dto.decay.percent, every: dto.decay.every, since: this.clock.now().toISOString() } : null;
    await this.transactions.run(async (tx) => {
      await this.repo.state(tx, true);
      await this.repo.setDecay(decay, tx);
    });
    return { decay };
  }

  /**
   * The decay job: every period that ended since the last one done (at most MAX_CATCH_UP per run)
   * takes `percent`% of each contact's points towards 0, as ledger rows `source: decay` unique per
   * (contact, period), so a run repeated or cut short never decays a contact twice in one period.
   * Answers the contacts changed.
   */
  async runDecay(): Promise<number> {
    const s = await this.repo.state();
    if (!s.decay) return 0;
    const every = durationMs(s.decay.every);
    const since = new Date(s.decay.since);
    if (every === null) return 0;
    const current = decayPeriodIndex(since, every, this.clock.now());
    let changed = 0;
    for (let p = s.decayDone + 1; p <= Math.min(current, s.decayDone + MAX_CATCH_UP); p++) {
      const period = `${s.decayVersion}:${p}`;
      const ends = new Date(since.getTime() + p * every).toISOString();
      for (let after = 0; ;) {
        const page = await this.transactions.run(async (tx) => {
          const rows = await this.contacts.pointsPage(after, PAGE, true, tx);
          const changes = rows.flatMap((r) => {
            const delta = decayDelta(r.points, s.decay?.percent ?? 0);
            return delta === 0
              ? []
              : [
                  {
                    contactId: r.id,
                    delta,
                    context: {
                      source: 'decay' as const,
                      reason: `decay ${s.decay?.percent}% every ${s.decay?.every}`,
                      details: { decayPeriod: period, periodEnded: ends },
                    },
                  },
                ];
          });
          changed += await this.scoring.applyMany(changes, tx);
          return rows;
        });
        if (page.length < PAGE) break;
        after = page[page.length - 1].id;
      }
      await this.repo.decayDone(s.decayVersion, p);
    }
    return changed;
  }

  /** POST /api/scoring/recompute: queues a run (202). */
  startRecompute(who: Principal): Promise<ScoringJobRecord> {
    return this.start('recompute', null, who);
  }

  /** POST /api/scoring/what-if: checks the drafts (400 naming `rules.<i>.<field>`) and queues a run (202). */
  async startWhatIf(dto: WhatIfDto, who: Principal): Promise<ScoringJobRecord> {
    const since = parseIsoWithOffset(dto.since);
    if (!since) throw fieldError('since', 'must be an ISO 8601 date-time with an offset');
    for (const [i, r] of dto.rules.entries()) await this.rules.draft(r, i);
    const request: WhatIfRequest = { rules: dto.rules, since: since.toISOString() };
    return this.start('what_if', request as unknown as Record<string, unknown>, who);
  }

  async getJob(id: number): Promise<ScoringJobRecord> {
    const r = await this.repo.findJob(id);
    if (!r) throw notFound('Scoring job', id);
    return toJobRecord(r);
  }

  private async start(kind: ScoringJobRow['kind'], request: Record<string, unknown> | null, who: Principal): Promise<ScoringJobRecord> {
    const row = await this.repo.createJob(kind, request, who.userId);
    try {
      await this.jobs.enqueue('scoring.run', { jobId: row.id }, { jobId: JOB_IDS.scoringRun(row.id), uniqueId: true });
    } catch (e) {
      await this.repo.finishJob(row.id, { error: 'the job could not be queued' });
      throw e;
    }
    return toJobRecord(row);
  }

  /** The `scoring.run` job: runs a recompute or a what-if and stores its result (a failure on the last attempt marks it failed). */
  async run(jobId: number, lastAttempt: boolean): Promise<void> {
    const job = await this.repo.startJob(jobId);
    if (!job) return;
    try {
      const result = job.kind === 'recompute' ? await this.recompute(jobId) : await this.whatIf(jobId, job.request as unknown as WhatIfRequest);
      await this.repo.finishJob(jobId, { result });
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.logger.error({ msg: 'scoring job failed', jobId, err: message });
      if (lastAttempt) await this.repo.finishJob(jobId, { error: message.slice(0, 500) });
      throw e;
    }
  }

  /**
   * Checks every contact's points against its ledger's sum and repairs a difference (points become the
   * sum). Pages of RECOMPUTE_PAGE contacts are compared without locks (the contacts' points, then their
   * ledgers' sums by one range read); only a contact that differs is locked and compared again under
   * its lock (a change committed between the two reads is no difference), then repaired.
   */
  async recompute(jobId?: number): Promise<{ checked: number; repaired: number }> {
    let checked = 0;
    let repaired = 0;
    for (let after = 0; ;) {
      const rows = await this.contacts.pointsPageUnlocked(after, RECOMPUTE_PAGE);
      if (!rows.length) break;
      const sums = await this.repo.sumsBetween(rows[0].id, rows[rows.length - 1].id);
      const suspects = rows.filter((r) => (sums.get(r.id) ?? 0) !== r.points).map((r) => r.id);
      if (suspects.length) repaired += await this.repair(suspects);
      checked += rows.length;
      if (jobId !== undefined) await this.repo.progress(jobId, { checked, repaired });
      if (rows.length < RECOMPUTE_PAGE) break;
      after = rows[rows.length - 1].id;
    }
    return { checked, repaired };
  }

  /** Locks these contacts, compares their points with their ledgers' sums again and repairs those that differ; answers how many. */
  private repair(ids: number[]): Promise<number> {
    return this.transactions.run(async (tx) => {
      const points = await this.contacts.lockPointsOf(ids, tx);
      const sums = await this.repo.sums([...points.keys()], tx);
      const diffs = [...points].flatMap(([id, p]) => {
        const sum = sums.get(id) ?? 0;
        return sum === p ? [] : [{ id, delta: sum - p }];
      });
      if (!diffs.length) return 0;
      this.logger.warn({ msg: 'points differed from the ledger; repaired', contacts: diffs.map((d) => d.id).slice(0, 20) });
      return this.scoring.repair(diffs, tx);
    });
  }

  /**
   * Replays the stored events since `since` under draft rules, writing nothing: the kept change-feed
   * events of the types the recordEvent drafts name (each draft's filter over the contact as it is
   * now) and the stored track events of the names the trackedEvent drafts name (each draft's filter
   * over the event's properties), merged by event time (a record event first at the same instant),
   * each draft applied as the engine would (repeatable, maxPerContact, cooldown measured between the
   * events' times, the bounds; scoring-replay.ts). Answers per published point group how many
   * contacts are in it now, how many would be, and how many would enter and leave.
   */
  async whatIf(jobId: number | undefined, request: WhatIfRequest): Promise<Record<string, unknown>> {
    const drafts: RuleDefinition[] = [];
    for (const [i, r] of request.rules.entries()) drafts.push({ ...(await this.rules.draft(r, i)), id: -(i + 1) });
    const now = this.clock.now();
    const since = new Date(request.since);
    // Every event committed so far is numbered first: the replay reads numbered events only.
    await this.events.sequenceNow(true);
    const hasRecordFilter = drafts.some((d) => d.onKind === 'recordEvent' && d.filter);
    const registry = hasRecordFilter ? await this.rules.contactsRegistry() : {};
    const compiled = drafts.map((d) => this.rules.compile(d, registry, now));
    // A draft whose filter does not compile applies to nothing (as a stored rule whose field went away).
    const live = drafts.flatMap((d, i) => (compiled[i] === undefined ? [] : [i]));
    const recordDrafts = live.filter((i) => drafts[i].onKind === 'recordEvent');
    const trackedDrafts = live.filter((i) => drafts[i].onKind === 'trackedEvent');
    const state = new ReplayState(drafts);
    const base = new Map<number, number>();
    const progress = { recordEvents: 0, trackedEvents: 0 };
    const record = new PagedStream(await this.recordPages(since, drafts, recordDrafts, compiled, base, progress));
    const tracked = new PagedStream(this.trackedPages(since, drafts, trackedDrafts, compiled, base, progress));
    let reported = 0;
    for (;;) {
      if (record.needsFill) await record.fill();
      if (tracked.needsFill) await tracked.fill();
      const r = record.head();
      const t = tracked.head();
      if (!r && !t) break;
      const from = r && (!t || r.at <= t.at) ? record : tracked;
      const item = (from === record ? r : t) as ReplayItem;
      from.shift();
      const points = base.get(item.contactId);
      // A contact deleted since: the engine applies nothing to it either.
      if (points !== undefined) state.apply(item, points);
      const seen = progress.recordEvents + progress.trackedEvents;
      if (jobId !== undefined && seen - reported >= 100_000) {
        reported = seen;
        await this.repo.progress(jobId, { events: seen, ...progress, applications: state.applications });
      }
    }
    const events = progress.recordEvents + progress.trackedEvents;
    return { since: request.since, events, ...progress, applications: state.applications, pointGroups: await this.groupOutcome(state.deltas) };
  }

  /**
   * The record events' pages: the kept change-feed events since `since` of the types the drafts name,
   * each with the drafts whose type it has and whose filter matches its contact now; the contacts'
   * points now are added to `base`.
   */
  private async recordPages(
    since: Date,
    drafts: RuleDefinition[],
    indexes: number[],
    compiled: (CompiledFilter | null | undefined)[],
    base: Map<number, number>,
    progress: { recordEvents: number },
  ): Promise<() => Promise<ReplayItem[] | null>> {
    const types = [...new Set(indexes.map((i) => drafts[i].onName))];
    // From the first transaction that recent; the feed's later events of other types are skipped
    // by the typed read (which may answer a short page and a cursor further on).
    let after = types.length ? await this.events.cursorAt(since) : 0;
    let ended = !types.length;
    return async () => {
      if (ended) return null;
      const read = await this.events.read(after, REPLAY_PAGE, types);
      if (read.next === after) ended = true; // the end of the feed
      after = read.next;
      const page = read.events.filter((e) => Date.parse(e.occurredAt) >= since.getTime());
      const ids = [...new Set(page.flatMap((e) => contactIdOf(e.type, e.data) ?? []))];
      const matches = new Map<number, Set<number> | null>();
      for (const i of indexes) {
        const f = compiled[i];
        matches.set(i, f ? await this.repo.matchingContacts(f, ids) : null);
      }
      await this.addBase(ids, base);
      progress.recordEvents += page.length;
      return page.flatMap((e) => {
        const contactId = contactIdOf(e.type, e.data);
        if (contactId === null) return [];
        const applying = indexes.filter((i) => drafts[i].onName === e.type && (matches.get(i)?.has(contactId) ?? true));
        return [{ at: Date.parse(e.occurredAt), contactId, drafts: applying }];
      });
    };
  }

  /**
   * The tracked events' pages: the stored track events since `since` of the names the drafts name,
   * oldest first, each with the drafts whose name it has and whose filter matches its properties
   * (evaluated by the read); the contacts' points now are added to `base`.
   */
  private trackedPages(
    since: Date,
    drafts: RuleDefinition[],
    indexes: number[],
    compiled: (CompiledFilter | null | undefined)[],
    base: Map<number, number>,
    progress: { trackedEvents: number },
  ): () => Promise<ReplayItem[] | null> {
    const names = [...new Set(indexes.map((i) => drafts[i].onName))];
    const filtered = indexes.filter((i) => compiled[i]);
    const predicates = filtered.map((i) => ({ name: drafts[i].onName, ...(compiled[i] as CompiledFilter) }));
    const position = new Map(filtered.map((i, k) => [i, k]));
    let after: { atMicros: number; id: string } | null = null;
    let ended = !names.length;
    return async () => {
      if (ended) return null;
      const page = await this.trackedQueue.replay({ names, since, after, limit: TRACKED_REPLAY_PAGE, predicates });
      if (page.length < TRACKED_REPLAY_PAGE) ended = true;
      if (page.length) after = { atMicros: page[page.length - 1].atMicros, id: page[page.length - 1].id };
      await this.addBase([...new Set(page.map((e) => e.contactId))], base);
      progress.trackedEvents += page.length;
      return page.map((e) => {
        const applying = indexes.filter((i) => {
          if (drafts[i].onName !== e.name) return false;
          const k = position.get(i);
          return k === undefined || e.matches[k] === '1';
        });
        return { at: e.atMicros / 1000, contactId: e.contactId, drafts: applying };
      });
    };
  }

  /** Adds to `base` the points now of those of `ids` it does not hold yet (contacts that exist). */
  private async addBase(ids: number[], base: Map<number, number>): Promise<void> {
    const missing = ids.filter((id) => !base.has(id));
    for (let i = 0; i < missing.length; i += 10_000) {
      for (const [id, points] of await this.contacts.pointsOf(missing.slice(i, i + 10_000))) base.set(id, points);
    }
  }

  /** Per published point group: contacts in it now, how many would be after `deltas`, entering and leaving. */
  private async groupOutcome(deltas: Map<number, number>) {
    const groups = await this.groups.publishedRanges();
    const counts = await this.contacts.countInPointRanges(groups.map((g) => ({ min: g.minimumPoints, max: g.maximumPoints })));
    const entering = new Map<number, number>();
    const leaving = new Map<number, number>();
    const ids = [...deltas.keys()];
    for (let i = 0; i < ids.length; i += 10_000) {
      const points = await this.contacts.pointsOf(ids.slice(i, i + 10_000));
      for (const [id, before] of points) {
        const { entered, left } = tierChanges(groups, before, before + (deltas.get(id) ?? 0));
        for (const g of entered) entering.set(g.id, (entering.get(g.id) ?? 0) + 1);
        for (const g of left) leaving.set(g.id, (leaving.get(g.id) ?? 0) + 1);
      }
    }
    return groups.map((g, i) => {
      const e = entering.get(g.id) ?? 0;
      const l = leaving.get(g.id) ?? 0;
      return { id: g.id, name: g.name, now: counts[i], wouldBe: counts[i] + e - l, entering: e, leaving: l };
    });
  }
}
