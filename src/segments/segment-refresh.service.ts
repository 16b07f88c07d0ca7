import { Injectable, Logger } from '@nestjs/common';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { Clock } from '../common/clock.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { compileFilter } from '../lists/filter-sql.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { dependsOnTime, namesBehaviour } from '../tracking/index.js';
import { TrackingService } from '../tracking/tracking.service.js';
import { CHANGE_EVENTS, SegmentsRepository } from './segments.repository.js';
import { EXCLUDED_FILTER_FIELDS, REFRESH_BATCH, SegmentsService, TIME_REFRESH_MS } from './segments.service.js';

/**
 * The refresher's work on dynamic segments (SegmentRefresher runs these in a loop; each is safe to
 * run in several processes at once): building segments whose filter changed, re-evaluating the
 * contacts of new change events and of new tracked events, and re-evaluating segments whose filter
 * depends on time. Membership changes are announced through SegmentsService's listeners, in the
 * transaction that made them.
 */
@Injectable()
export class SegmentRefreshService {
  private readonly logger = new Logger('Segments');

  constructor(
    private readonly segments: SegmentsRepository,
    private readonly segmentsService: SegmentsService,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly contacts: ContactsService,
    private readonly campaigns: CampaignsService,
    private readonly tracking: TrackingService,
    private readonly clock: Clock,
  ) {}

  /** Rebuilds every dynamic segment whose members were not built for its current filter; answers how many it built. */
  async buildPending(): Promise<number> {
    let built = 0;
    for (const id of await this.segments.pendingBuilds()) {
      if (await this.rebuild(id)) built++;
    }
    return built;
  }

  /**
   * Rebuilds one dynamic segment, set-based, under its membership lock (a second process waits,
   * then finds it built): inserts every matching contact, deletes every member that no longer
   * matches, mirrors the result into its campaigns, and marks the version built. A filter that no
   * longer compiles (e.g. a custom field it names was unpublished) marks the build failed with the
   * reason. Answers whether it built.
   */
  async rebuild(id: number): Promise<boolean> {
    let failed: { version: number; error: string } | null = null;
    await this.segments.markBuildStarted(id);
    const done = await this.transactions.run(async (tx) => {
      await this.segments.lockMembership(id, tx);
      // Read without a row lock: an edit of the segment does not wait for its rebuild (finishBuild
      // records the version only if it is still the current one).
      const current = await this.segments.findRecord(id, tx);
      if (!current?.filter || current.type !== 'dynamic' || current.builtVersion === current.filterVersion) return false;
      const start = { filter: current.filter, version: current.filterVersion };
      const registry = await this.contacts.filterRegistry(EXCLUDED_FILTER_FIELDS, tx);
      const now = this.clock.now();
      let compiled;
      try {
        compiled = compileFilter(start.filter, registry, now).compiled;
      } catch (e) {
        failed = { version: start.version, error: e instanceof Error ? e.message.slice(0, 500) : String(e) };
        return false;
      }
      const t0 = Date.now();
      const r = await this.segments.rebuild(id, compiled, tx);
      if ((await this.campaigns.mirroredSegments([id], tx)).size) await this.campaigns.mirrorSegment(id, null, tx);
      await this.segments.finishBuild(id, start.version, null, tx);
      if (r.added || r.removed) await this.segmentsService.membershipChanged(id, null, null, tx);
      await this.segments.markTimeEvaluated(id, now, tx);
      this.logger.log({ msg: 'segment rebuilt', segmentId: id, version: start.version, added: r.added, removed: r.removed, ms: Date.now() - t0 });
      return true;
    });
    if (failed) {
      const f = failed as { version: number; error: string };
      this.logger.warn({ msg: 'segment rebuild failed', segmentId: id, err: f.error });
      await this.segments.finishBuild(id, f.version, f.error);
    }
    return done;
  }

  /**
   * One refresh pass: reads the change events among the next REFRESH_BATCH events after the refresh
   * cursor (contacts created or updated, campaign memberships added or removed), re-evaluates those
   * contacts against every dynamic segment (one set-based statement per segment, under its
   * membership lock), mirrors what changed into the segments' campaigns, and advances the cursor,
   * all in one transaction. Another process's pass in progress makes this one answer -1 at once.
   * A cursor older than the feed's retention missed events: every dynamic segment is rebuilt.
   * Answers how many events of the feed it looked through (REFRESH_BATCH when more may follow).
   */
  async refreshChanges(): Promise<number> {
    return this.transactions.run(async (tx) => {
      const cursor = await this.segments.lockCursor(tx);
      if (!cursor) return -1;
      if (cursor.lastSequence < cursor.prunedThrough) {
        this.logger.warn({ msg: 'segment refresh fell behind the event retention; rebuilding every dynamic segment', cursor: cursor.lastSequence });
        await this.segments.requireRebuildAll(tx);
        await this.segments.advanceCursor(cursor.feedSequence, tx);
        this.segmentsService.wakeRefresher();
        return 0;
      }
      if (!(await this.segments.dynamicSegments(tx)).length) {
        // No dynamic segment (read after the feed's position, in a later snapshot): no event up to that
        // position changes a membership, and a dynamic segment created after this read is built from the
        // contacts as they are by then. The cursor moves there without reading the events (an import of a
        // million contacts would otherwise have its change events read here for nothing).
        if (cursor.feedSequence > cursor.lastSequence) await this.segments.advanceCursor(cursor.feedSequence, tx);
        return 0;
      }
      // The change events among the next REFRESH_BATCH of the feed; the cursor moves to the end of what
      // was read, so later passes do not read the other events again.
      const window = await this.events.scanIdsIn(tx, cursor.lastSequence, REFRESH_BATCH, CHANGE_EVENTS);
      const changes = {
        ids: [...new Set(window.refs.flatMap((r) => (r.id === null ? [] : [r.id])))],
        upTo: window.scannedThrough,
        events: window.refs.length,
      };
      // Numbers are consecutive: how many events of the feed this pass looked through.
      const scanned = window.scannedThrough - cursor.lastSequence;
      if (!changes.events) {
        if (changes.upTo > cursor.lastSequence) await this.segments.advanceCursor(changes.upTo, tx);
        return scanned;
      }
      if (changes.ids.length) await this.reevaluateContacts(changes.ids, tx, false);
      await this.segments.advanceCursor(changes.upTo, tx);
      return scanned;
    });
  }

  /**
   * Re-evaluates these contacts against every built dynamic segment (or, with `behaviourOnly`, those
   * whose filter names a behavioural field), one set-based statement per segment under its
   * membership lock, and mirrors what changed into the segments' campaigns.
   */
  private async reevaluateContacts(ids: number[], tx: Tx, behaviourOnly: boolean): Promise<void> {
    // Read again after the changes (a later snapshot): a segment whose build finished meanwhile is re-evaluated too.
    const dynamic = await this.segments.dynamicSegments(tx);
    const mirrored = await this.campaigns.mirroredSegments(
      dynamic.map((d) => d.id),
      tx,
    );
    const registry = dynamic.length ? await this.contacts.filterRegistry(EXCLUDED_FILTER_FIELDS, tx) : {};
    const now = this.clock.now();
    for (const seg of dynamic) {
      await this.segments.lockMembership(seg.id, tx);
      // The filter as it is now that the membership is ours (a rebuild for a newer filter may have just finished).
      const current = await this.segments.findRecord(seg.id, tx);
      // A segment waiting for its rebuild is skipped: the rebuild, which takes this lock after
      // these events were committed, reads their contacts as they are now.
      if (!current?.filter || current.type !== 'dynamic' || current.builtVersion !== current.filterVersion) continue;
      if (behaviourOnly && !namesBehaviour(current.filter as FilterNode)) continue;
      let compiled;
      try {
        compiled = compileFilter(current.filter, registry, now).compiled;
      } catch {
        continue; // a filter that no longer compiles fails its next rebuild, which says why
      }
      const r = await this.segments.reevaluate(seg.id, compiled, ids, tx);
      const changed = [...r.added, ...r.removed];
      if (changed.length && mirrored.has(seg.id)) await this.campaigns.mirrorSegment(seg.id, changed, tx);
      await this.segmentsService.membershipChanged(seg.id, r.added, r.removed, tx);
    }
  }

  /**
   * Re-evaluates the contacts whose tracked events changed (queued by the intake in its
   * transaction) against the segments whose filter names a behavioural field; answers how many
   * contacts it took (at most REFRESH_BATCH; the queue's rows another pass holds are skipped).
   */
  async refreshTracked(): Promise<number> {
    return this.transactions.run(async (tx) => {
      const ids = await this.tracking.takeSegmentQueue(REFRESH_BATCH, tx);
      if (ids.length) await this.reevaluateContacts(ids, tx, true);
      return ids.length;
    });
  }

  /**
   * Re-evaluates as a whole every built dynamic segment whose filter depends on time alone (see
   * TIME_REFRESH_MS) and whose last such evaluation is older than TIME_REFRESH_MS by the clock;
   * answers how many it re-evaluated.
   */
  async refreshTimeWindows(): Promise<number> {
    const now = this.clock.now();
    let done = 0;
    for (const { id } of await this.segments.dueForTimeRefresh(new Date(now.getTime() - TIME_REFRESH_MS), now)) {
      const refreshed = await this.transactions.run(async (tx) => {
        await this.segments.lockMembership(id, tx);
        const current = await this.segments.findRecord(id, tx);
        if (!current?.filter || current.type !== 'dynamic' || current.builtVersion !== current.filterVersion || !dependsOnTime(current.filter as FilterNode))
          return false;
        let compiled;
        try {
          compiled = compileFilter(current.filter, await this.contacts.filterRegistry(EXCLUDED_FILTER_FIELDS, tx), now).compiled;
        } catch {
          return false;
        }
        const r = await this.segments.rebuild(id, compiled, tx);
        if (r.added || r.removed) {
          if ((await this.campaigns.mirroredSegments([id], tx)).size) await this.campaigns.mirrorSegment(id, null, tx);
          await this.segmentsService.membershipChanged(id, null, null, tx);
          this.logger.log({ msg: 'segment re-evaluated for time', segmentId: id, added: r.added, removed: r.removed });
        }
        await this.segments.markTimeEvaluated(id, now, tx);
        return true;
      });
      if (refreshed) done++;
    }
    return done;
  }
}
