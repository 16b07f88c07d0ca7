import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { SegmentsService } from '../segments/segments.service.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowEventWaits } from './workflow-event-waits.js';
import { WorkflowTrackedFollower } from './workflow-tracked-follower.js';
import { RECORD_EVENT_CONTACT } from './workflow-definition.js';
import { nextScheduleTick } from './workflow-schedule.js';
import { EXCLUDED_FILTER_FIELDS } from './workflow-validation.js';
import type { Workflow } from './workflow.entity.js';
import { WorkflowsRepository } from './workflows.repository.js';

/** Change events one follower pass reads per transaction. */
export const FOLLOW_BATCH = 1_000;
/** Events whose contact changed: the running enrollments' goals are checked for it. */
type EventRecord = Awaited<ReturnType<EventsService['afterIn']>>[number];

const CONTACT_CHANGES = new Set(['contact.created', 'contact.updated', 'campaign.contact_added', 'campaign.contact_removed']);

/**
 * Entry driven by events, not by polling lists:
 * - segment_entered / segment_exited: a listener of the segments feature, called inside the
 *   transaction of every membership change, enrols the contacts that joined or left, set-based, in
 *   that transaction (a full rebuild, which does not list who joined, enrols the members never
 *   enrolled in the workflow);
 * - record_event: a follower of the change feed (as the segments refresher and the webhook
 *   dispatcher), with its own cursor, enrols the contact of each matching event (the event's type,
 *   `changed` names in its `previous`, the filter on the contact as it is when read), in one
 *   transaction with the cursor's move;
 * - untilEvent waits on change events: the same pass wakes the enrollments waiting for them
 *   (workflow-event-waits.ts);
 * - goals: the same pass converts running enrollments whose contact changed and now matches a goal;
 * - tracked_event triggers and tracked untilEvent waits: the tracked-event queue
 *   (workflow-tracked-follower.ts);
 * - schedule: each due tick enrols the segment's members, set-based, and moves to the next tick.
 */
@Injectable()
export class WorkflowTriggers implements OnModuleInit {
  private readonly logger = new Logger('WorkflowTriggers');

  constructor(
    private readonly workflows: WorkflowsRepository,
    private readonly enrollments: EnrollmentsRepository,
    private readonly enrolling: EnrollmentsService,
    private readonly segments: SegmentsService,
    private readonly contacts: ContactsService,
    private readonly events: EventsService,
    private readonly transactions: Transactions,
    private readonly clock: Clock,
    private readonly eventWaits: WorkflowEventWaits,
    private readonly tracked: WorkflowTrackedFollower,
  ) {}

  onModuleInit(): void {
    this.segments.onMembershipChanged((segmentId, joined, left, tx) => this.membershipChanged(segmentId, joined, left, tx));
  }

  /** A segment's members changed inside `tx`: the active workflows triggered by it enrol who joined (entered) or left (exited). */
  async membershipChanged(segmentId: number, joined: number[] | null, left: number[] | null, tx: Tx): Promise<void> {
    const workflows = await this.workflows.activeOnSegment(segmentId, tx);
    for (const w of workflows) {
      if (w.trigger.type === 'segment_entered') {
        if (joined === null) await this.enrolling.enrol(w, { segmentId }, tx, true);
        else if (joined.length) await this.enrolling.enrol(w, { ids: joined }, tx);
      } else if (w.trigger.type === 'segment_exited' && left?.length) await this.enrolling.enrol(w, { ids: left }, tx);
    }
  }

  /** Follows the feed until caught up (or another process holds the cursor), then the tracked-event queue, then runs the due schedules. */
  async follow(): Promise<void> {
    await this.events.sequenceNow(true);
    for (let i = 0; i < 100; i++) {
      const read = await this.followOnce();
      if (read < FOLLOW_BATCH) break;
    }
    await this.tracked.follow();
    await this.runSchedules();
  }

  /** One batch of the feed in one transaction with the cursor's move; answers how many events it read (-1: another process follows). */
  async followOnce(): Promise<number> {
    return this.transactions.run(async (tx) => {
      const cursor = await this.workflows.lockTriggerCursor(tx);
      if (!cursor) return -1;
      const triggered = await this.workflows.activeWithTrigger(['record_event'], tx);
      const withGoals = await this.workflows.activeWithGoals(tx);
      const waits = await this.eventWaits.waits('record', tx);
      if (!triggered.length && !withGoals.length && !waits.length) {
        // Nothing listens: the cursor moves to the feed's head without reading the events.
        if (cursor.feedSequence > cursor.lastSequence) await this.workflows.advanceTriggerCursor(cursor.feedSequence, tx);
        return 0;
      }
      const from = Math.max(cursor.lastSequence, cursor.prunedThrough);
      if (from > cursor.lastSequence)
        this.logger.warn({ msg: 'workflow triggers fell behind the event retention; events were skipped', from: cursor.lastSequence });
      const events = await this.events.afterIn(tx, from, FOLLOW_BATCH);
      if (!events.length) {
        if (cursor.feedSequence > cursor.lastSequence) await this.workflows.advanceTriggerCursor(cursor.feedSequence, tx);
        return 0;
      }
      for (const w of triggered) await this.recordEvents(w, events, tx);
      if (waits.length && (await this.eventWaits.recordEvents(waits, events, tx))) this.enrolling.notify();
      const changed = [...new Set(events.filter((e) => CONTACT_CHANGES.has(e.type)).map((e) => contactOf(e)))].filter((c): c is number => c !== null);
      if (changed.length) for (const w of withGoals) await this.checkGoals(w, changed, tx);
      await this.workflows.advanceTriggerCursor(events[events.length - 1].sequence, tx);
      return events.length;
    });
  }

  /** Enrols the contacts of the events matching a record_event trigger. */
  private async recordEvents(w: Workflow, events: EventRecord[], tx: Tx): Promise<void> {
    if (w.trigger.type !== 'record_event') return;
    const t = w.trigger;
    const field = RECORD_EVENT_CONTACT[t.event];
    const ids = new Set<number>();
    for (const e of events) {
      if (e.type !== t.event) continue;
      if (t.changed && !t.changed.some((name) => e.previous !== null && Object.hasOwn(e.previous, name))) continue;
      const id = Number(e.data[field]);
      if (Number.isInteger(id) && id > 0) ids.add(id);
    }
    if (!ids.size) return;
    let candidates = [...ids];
    if (t.filter !== undefined && t.filter !== null) {
      try {
        const { compiled } = await this.contacts.compileFilter(t.filter, EXCLUDED_FILTER_FIELDS, this.clock.now());
        candidates = await this.enrollments.matchingContacts(candidates, compiled, tx);
      } catch (e) {
        this.logger.warn({ msg: 'a record_event filter no longer compiles; its events enrol nobody', workflowId: w.id, err: (e as Error).message });
        return;
      }
    }
    if (candidates.length) await this.enrolling.enrol(w, { ids: candidates }, tx);
  }

  /** Converts the running enrollments of changed contacts that match one of the workflow's goals now. */
  private async checkGoals(w: Workflow, contactIds: number[], tx: Tx): Promise<void> {
    let running = await this.enrollments.runningContacts(w.id, contactIds, tx);
    for (const goal of w.steps.filter((s) => s.type === 'goal')) {
      if (!running.length) return;
      try {
        const { compiled } = await this.contacts.compileFilter(goal.filter, EXCLUDED_FILTER_FIELDS, this.clock.now());
        const converted = await this.enrollments.matchingContacts(running, compiled, tx);
        if (converted.length) {
          await this.enrollments.endRunning(w.id, converted, 'converted', null, this.clock.now(), tx);
          const done = new Set(converted);
          running = running.filter((c) => !done.has(c));
        }
      } catch (e) {
        this.logger.warn({ msg: 'a goal filter no longer compiles', workflowId: w.id, goal: goal.key, err: (e as Error).message });
      }
    }
  }

  /** Each due schedule enrols its segment's members (set-based) and moves to its next tick. */
  async runSchedules(): Promise<number> {
    return this.transactions.run(async (tx) => {
      const now = this.clock.now();
      const due = await this.workflows.lockDueSchedules(now, tx);
      for (const w of due) {
        if (w.trigger.type === 'schedule') await this.enrolling.enrol(w, { segmentId: w.trigger.segmentId }, tx);
        await this.workflows.setScheduleNext(w.id, nextScheduleTick(w, now), tx);
      }
      return due.length;
    });
  }
}

function contactOf(e: EventRecord): number | null {
  const field = e.type.startsWith('contact.') ? 'id' : 'contactId';
  const id = Number(e.data[field]);
  return Number.isInteger(id) && id > 0 ? id : null;
}
