import { Injectable, Logger } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { TrackedEventQueue } from '../tracking/tracked-event-queue.repository.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import { type TrackedEventIn, WorkflowEventWaits } from './workflow-event-waits.js';
import { compilePropertiesFilter } from './workflow-tracked.js';
import type { Workflow } from './workflow.entity.js';
import { WorkflowsRepository } from './workflows.repository.js';

/** The workflows' consumer name on the tracked-event queue. */
export const TRACKED_CONSUMER = 'workflows';
/** Queued tracked events one transaction takes. */
export const TRACKED_BATCH = 500;

/**
 * Tracked events for the workflows, from the workflows' queue (src/tracking/tracked-event-queue):
 * the names declared are those of the active tracked_event triggers and of the untilEvent waits of
 * active and paused workflows (rewritten in every transaction that saves or deletes a workflow);
 * each batch of queued events is taken in the transaction that enrols their contacts (the triggers
 * whose name and properties filter they match) and wakes the waits they match, so an event acts
 * once, whatever crashes; parallel runners share the queue (SKIP LOCKED).
 */
@Injectable()
export class WorkflowTrackedFollower {
  private readonly logger = new Logger('WorkflowTrackedFollower');

  constructor(
    private readonly queue: TrackedEventQueue,
    private readonly workflows: WorkflowsRepository,
    private readonly enrollments: EnrollmentsRepository,
    private readonly enrolling: EnrollmentsService,
    private readonly eventWaits: WorkflowEventWaits,
    private readonly transactions: Transactions,
  ) {}

  /** Rewrites the names the workflows consume, in the transaction `tx` that changed a workflow (after its rows are written). */
  declare(tx: Tx): Promise<void> {
    return this.queue.declare(TRACKED_CONSUMER, (t) => this.workflows.trackedNames(t), tx);
  }

  /** Takes queued events until none is left (or 100 batches); answers how many were taken. */
  async follow(): Promise<number> {
    let total = 0;
    for (let i = 0; i < 100; i++) {
      const n = await this.transactions.run((tx) => this.followOnce(tx));
      total += n;
      if (n === 0) break;
    }
    return total;
  }

  /** One batch in `tx`; answers how many queue rows it took. */
  private async followOnce(tx: Tx): Promise<number> {
    const events = await this.queue.claim(TRACKED_CONSUMER, TRACKED_BATCH, tx);
    if (!events.length) return 0;
    const list: TrackedEventIn[] = events.map((e) => ({
      id: e.id,
      name: e.name,
      contactId: e.contactId,
      occurredAt: e.occurredAt,
      properties: e.properties ?? {},
    }));
    let acted = false;
    for (const w of await this.workflows.activeWithTrigger(['tracked_event'], tx)) if (await this.enrolOn(w, list, tx)) acted = true;
    const waits = await this.eventWaits.waits('tracked', tx);
    if (waits.length && (await this.eventWaits.trackedEvents(waits, list, tx))) acted = true;
    if (acted) this.enrolling.notify();
    return events.length;
  }

  /** Enrols the contacts of the events matching a tracked_event trigger; answers whether it enrolled someone. */
  private async enrolOn(w: Workflow, events: TrackedEventIn[], tx: Tx): Promise<boolean> {
    if (w.trigger.type !== 'tracked_event') return false;
    const t = w.trigger;
    let hits = events.filter((e) => e.name === t.name);
    if (!hits.length) return false;
    if (t.filter !== undefined && t.filter !== null) {
      try {
        const ok = await this.enrollments.matchingProperties(
          compilePropertiesFilter(t.filter).compiled,
          hits.map((e) => e.properties ?? {}),
          tx,
        );
        hits = hits.filter((_, i) => ok.has(i));
      } catch (e) {
        this.logger.warn({ msg: 'a tracked_event filter no longer compiles; its events enrol nobody', workflowId: w.id, err: (e as Error).message });
        return false;
      }
    }
    if (!hits.length) return false;
    return (await this.enrolling.enrol(w, { ids: [...new Set(hits.map((e) => e.contactId))] }, tx)).length > 0;
  }
}
