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
import { type RuleDefinition, ScoringRulesService } from './scoring-rules.service.js';
import type { ScoringSettingsDto, WhatIfDto } from './scoring.dto.js';
import { type ScoringJobRow, ScoringRepository } from './scoring.repository.js';
import { ScoringService } from './scoring.service.js';
import { contactIdOf, decayDelta, decayPeriodIndex, durationMs, MAX_POINTS, MIN_POINTS, tierChanges } from './scoring.rules.js';

/** Contacts per transaction of decay and recompute. */
const PAGE = 1_000;
/** Change-feed events a what-if reads per query. */
const REPLAY_PAGE = 5_000;
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

  /** Checks every contact's points against its ledger's sum and repairs a difference (points become the sum). */
  async recompute(jobId?: number): Promise<{ checked: number; repaired: number }> {
    let checked = 0;
    let repaired = 0;
    for (let after = 0; ;) {
      const page = await this.transactions.run(async (tx) => {
        const rows = await this.contacts.pointsPage(after, PAGE, false, tx);
        const sums = await this.repo.sums(
          rows.map((r) => r.id),
          tx,
        );
        const diffs = rows.flatMap((r) => {
          const sum = sums.get(r.id) ?? 0;
          return sum === r.points ? [] : [{ id: r.id, delta: sum - r.points }];
        });
        if (diffs.length) {
          this.logger.warn({ msg: 'points differed from the ledger; repaired', contacts: diffs.map((d) => d.id).slice(0, 20) });
          repaired += await this.scoring.repair(diffs, tx);
        }
        return rows;
      });
      checked += page.length;
      if (jobId !== undefined) await this.repo.progress(jobId, { checked, repaired });
      if (page.length < PAGE) break;
      after = page[page.length - 1].id;
    }
    return { checked, repaired };
  }

  /**
   * Replays the kept change-feed events since `since` under draft rules, writing nothing: each draft
   * applied as the engine would (its filter over the contact as it is now, repeatable, maxPerContact,
   * cooldown measured between the events' times, the bounds). Answers per published point group how
   * many contacts are in it now, how many would be, and how many would enter and leave.
   */
  async whatIf(jobId: number | undefined, request: WhatIfRequest): Promise<Record<string, unknown>> {
    const drafts: RuleDefinition[] = [];
    for (const [i, r] of request.rules.entries()) drafts.push({ ...(await this.rules.draft(r, i)), id: -(i + 1) });
    const now = this.clock.now();
    // Every event committed so far is numbered first: the replay reads numbered events only.
    await this.events.sequenceNow(true);
    const registry = await this.rules.contactsRegistry();
    const compiled = new Map<number, CompiledFilter | null | undefined>(drafts.map((d) => [d.id, this.rules.compile(d, registry, now)]));
    const live = drafts.filter((d) => d.onKind === 'recordEvent' && compiled.get(d.id) !== undefined);
    const types = [...new Set(live.map((d) => d.onName))];
    const deltas = new Map<number, number>();
    const usage = new Map<string, { count: number; lastMs: number }>();
    let events = 0;
    let applications = 0;
    const since = new Date(request.since);
    // From the first transaction that recent; the feed's later events of other types are skipped
    // by the typed read (which may answer a short page and a cursor further on).
    for (let after = types.length ? await this.events.cursorAt(since) : 0; types.length;) {
      const read = await this.events.read(after, REPLAY_PAGE, types);
      const page = read.events.filter((e) => Date.parse(e.occurredAt) >= since.getTime());
      const ids = [...new Set(page.flatMap((e) => contactIdOf(e.type, e.data) ?? []))];
      const matches = new Map<number, Set<number> | null>();
      for (const d of live) {
        const f = compiled.get(d.id);
        matches.set(d.id, f ? await this.repo.matchingContacts(f, ids) : null);
      }
      const base = await this.contacts.pointsOf(ids);
      for (const e of page) {
        const contactId = contactIdOf(e.type, e.data);
        if (contactId === null || !base.has(contactId)) continue;
        for (const d of live) {
          if (d.onName !== e.type) continue;
          const m = matches.get(d.id);
          if (m && !m.has(contactId)) continue;
          const key = `${d.id}:${contactId}`;
          const u = usage.get(key) ?? { count: 0, lastMs: -Infinity };
          const at = Date.parse(e.occurredAt);
          const cooldown = durationMs(d.cooldown);
          if ((!d.repeatable && u.count > 0) || (d.maxPerContact !== null && u.count >= d.maxPerContact)) continue;
          if (cooldown !== null && at - u.lastMs < cooldown) continue;
          const points = (base.get(contactId) ?? 0) + (deltas.get(contactId) ?? 0) + d.delta;
          if (points < MIN_POINTS || points > MAX_POINTS) continue;
          deltas.set(contactId, (deltas.get(contactId) ?? 0) + d.delta);
          usage.set(key, { count: u.count + 1, lastMs: at });
          applications++;
        }
      }
      events += page.length;
      if (jobId !== undefined) await this.repo.progress(jobId, { events, applications });
      if (read.next === after) break; // the end of the feed
      after = read.next;
    }
    return { since: request.since, events, applications, pointGroups: await this.groupOutcome(deltas) };
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
