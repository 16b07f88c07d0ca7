import { Injectable, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { Tx } from '../database/transactions.js';
import type { SettledDelivery } from '../events/webhook-deliveries.repository.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WebhookWaitsRepository } from './webhook-waits.repository.js';
import { WORKFLOW_WEBHOOK_EVENT } from './workflow-webhook-step.js';

/**
 * Wakes the enrollments whose webhook step waits for a delivery that just settled (succeeded, or
 * dead: a 4xx, its retries exhausted, its webhook disabled or deleted), in the transaction that
 * settles it: the enrollment becomes due now and its step reads the outcome (workflow-webhook-step.ts).
 * An enrollment is woken only while it waits for that very delivery (the history row of its
 * waiting run names it), so a redelivery of an old call, or a delivery settling twice, wakes
 * nothing; the row lock and the step's own check make the outcome land once.
 */
@Injectable()
export class WorkflowWebhookWaits implements OnModuleInit {
  constructor(
    private readonly webhooks: WebhooksService,
    private readonly waits: WebhookWaitsRepository,
    private readonly enrolling: EnrollmentsService,
    private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.webhooks.onDeliveriesSettled({
      settled: async (deliveries, tx) => {
        await this.settled(deliveries, tx);
      },
      committed: () => this.enrolling.notify(),
    });
  }

  /** Answers how many enrollments woke. */
  async settled(deliveries: readonly SettledDelivery[], tx: Tx): Promise<number> {
    const byEnrollment = new Map<number, string>();
    for (const d of deliveries) {
      if (d.eventType !== WORKFLOW_WEBHOOK_EVENT) continue;
      const id = enrollmentOf(d.body);
      if (id !== null) byEnrollment.set(id, d.eventId);
    }
    if (!byEnrollment.size) return 0;
    const awaiting = await this.waits.lockWaiting([...byEnrollment.keys()], tx);
    const due = [...awaiting].filter(([id, eventId]) => byEnrollment.get(id) === eventId).map(([id]) => id);
    await this.waits.wake(due, this.clock.now(), tx);
    return due.length;
  }
}

/** The enrollment a workflow webhook call's body names (data.enrollmentId), null when unreadable. */
function enrollmentOf(body: string): number | null {
  try {
    const id = (JSON.parse(body) as { data?: { enrollmentId?: unknown } }).data?.enrollmentId;
    return typeof id === 'number' && Number.isInteger(id) && id > 0 ? id : null;
  } catch {
    return null;
  }
}
