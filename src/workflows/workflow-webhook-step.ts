import { Injectable } from '@nestjs/common';
import { AppError, fieldError } from '../common/errors.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../database/transactions.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { TextMessagesService } from '../text-messages/text-messages.service.js';
import { WebhookWaitsRepository, type AwaitedDelivery } from './webhook-waits.repository.js';
import type { Step } from './workflow-definition.js';
import { stepRunId } from './workflow-records.js';

/** What the webhook step reads of a step run's context (StepContext of workflow-steps.ts, which runs it). */
export interface WebhookStepContext {
  enrollmentId: number;
  workflowId: number;
  workflowName: string;
  contactId: number;
  /** Whether the enrollment waits at this step (its delivery settled, or the recheck is due). */
  waiting: boolean;
  seq: number;
  now: Date;
  /** Webhooks that got a delivery in this transaction (their drains are queued after the commit). */
  webhooks: Set<number>;
}

/** What the webhook step decides (a StepResult of workflow-steps.ts): on to `next`, or wait. */
export type WebhookStepResult =
  | { kind: 'next'; next: string | undefined; outcome: 'completed'; detail: Record<string, unknown> }
  | { kind: 'wait'; until: Date; detail: Record<string, unknown> };

/** The event type of a workflow webhook step's delivery (its body's `type`). */
export const WORKFLOW_WEBHOOK_EVENT = 'workflow.webhook';

/**
 * How long a webhook step waits for its delivery before looking at it again: the deliveries' retry
 * window (72 h, events/webhook-retry.ts) and an hour. The delivery's settling wakes the enrollment
 * long before (workflow-webhook-waits.ts); this only covers a wake that never came.
 */
export const WEBHOOK_STEP_RECHECK_MS = 73 * 3600_000;

/**
 * The `webhook` step (docs/decisions/workflow-webhook-outcomes.md). Its first run writes one
 * delivery (signed and retried by the webhooks' drain, its Webhook-Id stable for the enrollment and
 * step run) and the enrollment waits there (status `waiting`, the history row naming the delivery).
 * When the delivery settles the enrollment is woken and the step's second run reads the outcome:
 * a success goes on to `next`; a refusal (a 4xx other than 408/429, a 410) or retries that ran out
 * fail the enrollment with the status and a short reason, so no later step runs after a failed call.
 */
@Injectable()
export class WebhookStep {
  constructor(
    private readonly contacts: ContactsService,
    private readonly textMessages: TextMessagesService,
    private readonly webhooks: WebhooksService,
    private readonly waits: WebhookWaitsRepository,
  ) {}

  async run(step: Step, ctx: WebhookStepContext, tx: Tx): Promise<WebhookStepResult> {
    if (ctx.waiting) {
      const awaited = await this.waits.awaitedAt(ctx.enrollmentId, ctx.seq - 1, tx);
      if (awaited && awaited.stepKey === step.key) return this.outcome(step, ctx, awaited, tx);
    }
    return this.call(step, ctx, tx);
  }

  /** A signed delivery to the webhook, with a Webhook-Id stable for this enrollment and step run; the enrollment waits for its outcome. */
  private async call(step: Step, ctx: WebhookStepContext, tx: Tx): Promise<WebhookStepResult> {
    const id = stepRunId(ctx.enrollmentId, ctx.seq);
    if (step.webhookId === undefined) throw fieldError('webhookId', `step "${step.key}" has no webhook subscription (save the workflow again)`);
    const contact = await this.contacts.get(ctx.contactId);
    const merge = { ...(contact as unknown as Record<string, unknown>), fields: contact.fields };
    const render = (v: unknown): unknown =>
      typeof v === 'string'
        ? this.textMessages.render(v, merge)
        : Array.isArray(v)
          ? v.map(render)
          : typeof v === 'object' && v !== null
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, render(x)]))
            : v;
    const body = JSON.stringify({
      id,
      type: WORKFLOW_WEBHOOK_EVENT,
      occurredAt: ctx.now.toISOString(),
      data: {
        workflowId: ctx.workflowId,
        workflowName: ctx.workflowName,
        enrollmentId: ctx.enrollmentId,
        stepKey: step.key,
        contact,
        payload: step.payload === undefined ? null : render(step.payload),
      },
    });
    if (!(await this.webhooks.queueDirectDelivery(step.webhookId, id, WORKFLOW_WEBHOOK_EVENT, body, tx)))
      throw fieldError('webhookId', `webhook ${step.webhookId} does not exist`);
    ctx.webhooks.add(step.webhookId);
    return this.waitFor({ stepKey: step.key, webhookId: step.webhookId, eventId: id }, ctx, 0);
  }

  /** The settled delivery's outcome: on to `next`, or the enrollment fails; still pending: wait again. */
  private async outcome(step: Step, ctx: WebhookStepContext, awaited: AwaitedDelivery, tx: Tx): Promise<WebhookStepResult> {
    const o = await this.webhooks.deliveryOutcome(awaited.webhookId, awaited.eventId, tx);
    if (!o) throw new AppError('conflict', `webhook call ${awaited.eventId} failed: its delivery is gone (webhook ${awaited.webhookId} was deleted)`);
    if (o.state === 'failed') throw new AppError('conflict', `webhook call failed: ${o.reason ?? 'the delivery failed'}`);
    if (o.state === 'pending') return this.waitFor(awaited, ctx, o.attempts);
    return {
      kind: 'next',
      next: step.next,
      outcome: 'completed',
      detail: { webhookId: awaited.webhookId, webhookEventId: awaited.eventId, delivered: true, status: o.code, attempts: o.attempts },
    };
  }

  private waitFor(awaited: AwaitedDelivery, ctx: WebhookStepContext, attempts: number): WebhookStepResult {
    return {
      kind: 'wait',
      until: new Date(ctx.now.getTime() + WEBHOOK_STEP_RECHECK_MS),
      detail: { reason: 'waiting for the webhook delivery to settle', webhookId: awaited.webhookId, webhookEventId: awaited.eventId, attempts },
    };
  }
}
