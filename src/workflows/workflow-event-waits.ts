import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../database/transactions.js';
import type { EventRecord } from '../events/events.service.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { RECORD_EVENT_CONTACT, type UntilEvent } from './workflow-definition.js';
import { compilePropertiesFilter } from './workflow-tracked.js';
import { EXCLUDED_FILTER_FIELDS } from './workflow-validation.js';
import { WorkflowsRepository } from './workflows.repository.js';

/** A tracked event as the waits and the tracked_event trigger read it. */
export interface TrackedEventIn {
  id: string;
  name: string;
  contactId: number;
  occurredAt: Date | string;
  properties: Record<string, unknown> | null;
}

type Wait = { workflowId: number; version: number; stepKey: string; untilEvent: UntilEvent };

/**
 * untilEvent waits: an event of the contact that matches the wait's filter wakes its enrollment
 * (due now, `woken_by` the event), in the transaction that consumes the event (the trigger
 * follower's cursor move for change-feed events, the queue rows' deletion for tracked events), so
 * an event wakes a wait once, whatever crashes. An enrollment whose timeout ran first has moved on
 * and is not woken (the UPDATE re-checks it under its row lock). Only events consumed while the
 * enrollment waits count.
 */
@Injectable()
export class WorkflowEventWaits {
  private readonly logger = new Logger('WorkflowEventWaits');

  constructor(
    private readonly workflows: WorkflowsRepository,
    private readonly enrollments: EnrollmentsRepository,
    private readonly contacts: ContactsService,
    private readonly clock: Clock,
  ) {}

  /** The untilEvent waits of `kind` that enrollments may be at now. */
  async waits(kind: 'tracked' | 'record', tx: Tx): Promise<Wait[]> {
    return (await this.workflows.eventWaits(tx)).filter((w) => kind in w.untilEvent);
  }

  /** Change-feed events wake the record waits they match (the contact the event names, the filter on the contact as it is now). */
  async recordEvents(waits: Wait[], events: readonly EventRecord[], tx: Tx): Promise<number> {
    let woken = 0;
    for (const w of waits) {
      const u = w.untilEvent;
      if (!('record' in u)) continue;
      const field = RECORD_EVENT_CONTACT[u.record];
      // The newest event of each contact (one from before its wait began does not wake it).
      const byContact = new Map<number, EventRecord>();
      for (const e of events) {
        if (e.type !== u.record) continue;
        const id = Number(e.data[field]);
        if (Number.isInteger(id) && id > 0) byContact.set(id, e);
      }
      let candidates = await this.enrollments.waitingAt(w, [...byContact.keys()], tx);
      if (candidates.length && u.filter !== undefined && u.filter !== null) {
        try {
          const { compiled } = await this.contacts.compileFilter(u.filter, EXCLUDED_FILTER_FIELDS, this.clock.now());
          candidates = await this.enrollments.matchingContacts(candidates, compiled, tx);
        } catch (e) {
          this.logger.warn({ msg: 'an untilEvent filter no longer compiles; its events wake nobody', workflowId: w.workflowId, err: (e as Error).message });
          continue;
        }
      }
      const now = this.clock.now();
      woken += await this.enrollments.wake(
        w,
        candidates.map((c) => {
          const e = byContact.get(c) as EventRecord;
          return { contactId: c, event: { source: 'record', type: e.type, eventId: e.id, sequence: e.sequence }, occurredAt: e.occurredAt };
        }),
        now,
        tx,
      );
    }
    return woken;
  }

  /** Tracked events wake the tracked waits they match (the event's name, the filter on its properties). */
  async trackedEvents(waits: Wait[], events: readonly TrackedEventIn[], tx: Tx): Promise<number> {
    let woken = 0;
    for (const w of waits) {
      const u = w.untilEvent;
      if (!('tracked' in u)) continue;
      const named = events.filter((e) => e.name === u.tracked);
      if (!named.length) continue;
      const waiting = new Set(await this.enrollments.waitingAt(w, [...new Set(named.map((e) => e.contactId))], tx));
      let hits = named.filter((e) => waiting.has(e.contactId));
      if (hits.length && u.filter !== undefined && u.filter !== null) {
        const ok = await this.enrollments.matchingProperties(
          compilePropertiesFilter(u.filter).compiled,
          hits.map((e) => e.properties ?? {}),
          tx,
        );
        hits = hits.filter((_, i) => ok.has(i));
      }
      woken += await this.enrollments.wake(
        w,
        hits.map((e) => ({ contactId: e.contactId, event: trackedEventRef(e) })),
        this.clock.now(),
        tx,
      );
    }
    return woken;
  }
}

/** What an enrollment woken by a tracked event records of it (its step history shows it). */
export function trackedEventRef(e: TrackedEventIn): Record<string, unknown> {
  return {
    source: 'tracked',
    name: e.name,
    eventId: e.id,
    occurredAt: e.occurredAt instanceof Date ? e.occurredAt.toISOString() : e.occurredAt,
    properties: e.properties ?? {},
  };
}
