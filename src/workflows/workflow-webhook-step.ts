import { Injectable } from '@nestjs/common';
import { AppError, fieldError, notFound } from '../common/errors.js';
import type { ContactRecord } from '../contacts/contact.columns.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../database/transactions.js';
import type { DeliveryOutcome } from '../events/webhook-deliveries.repository.js';
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

/** What the webhook step decided for one enrollment of a group: its result, or its own failure. */
export type WebhookGroupOutcome = { result: WebhookStepResult } | { failure: AppError };

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
      if (awaited && awaited.stepKey === step.key)
        return this.decide(step, ctx, awaited, await this.webhooks.deliveryOutcome(awaited.webhookId, awaited.eventId, tx));
    }
    const webhookId = this.webhookOf(step);
    const id = stepRunId(ctx.enrollmentId, ctx.seq);
    const body = this.body(step, ctx, id, await this.contacts.get(ctx.contactId, tx));
    if (!(await this.webhooks.queueDirectDeliveries(webhookId, WORKFLOW_WEBHOOK_EVENT, [{ eventId: id, body }], tx)))
      throw fieldError('webhookId', `webhook ${webhookId} does not exist`);
    ctx.webhooks.add(webhookId);
    return this.waitFor({ stepKey: step.key, webhookId, eventId: id }, ctx, 0);
  }

  /**
   * run() for a group of enrollments at this step, set-based: the deliveries the woken ones wait
   * for and their outcomes in two statements, the others' contacts in one and their deliveries
   * written in one. Each enrollment's failure (its delivery failed or is gone, its contact deleted)
   * is its own; anything thrown fails the group (the engine then runs it one by one).
   */
  async runMany(step: Step, ctxs: WebhookStepContext[], tx: Tx): Promise<Map<number, WebhookGroupOutcome>> {
    const out = new Map<number, WebhookGroupOutcome>();
    const settle = (c: WebhookStepContext, decide: () => WebhookStepResult) => {
      try {
        out.set(c.enrollmentId, { result: decide() });
      } catch (e) {
        if (!(e instanceof AppError)) throw e;
        out.set(c.enrollmentId, { failure: e });
      }
    };
    const waiting = ctxs.filter((c) => c.waiting);
    const awaited = await this.waits.awaitedAtMany(
      waiting.map((c) => ({ enrollmentId: c.enrollmentId, seq: c.seq - 1 })),
      tx,
    );
    const woken = waiting.flatMap((c) => {
      const a = awaited.get(c.enrollmentId);
      return a && a.stepKey === step.key ? [{ c, a }] : [];
    });
    const outcomes = await this.webhooks.deliveryOutcomes(
      woken.map((w) => w.a),
      tx,
    );
    for (const { c, a } of woken) settle(c, () => this.decide(step, c, a, outcomes.get(`${a.webhookId}:${a.eventId}`) ?? null));
    const calling = ctxs.filter((c) => !out.has(c.enrollmentId));
    if (!calling.length) return out;
    const webhookId = this.webhookOf(step);
    const contacts = await this.contacts.getMany(
      calling.map((c) => c.contactId),
      tx,
    );
    const rows: { c: WebhookStepContext; eventId: string; body: string }[] = [];
    for (const c of calling) {
      const contact = contacts.get(c.contactId);
      if (!contact) out.set(c.enrollmentId, { failure: notFound('Contact', c.contactId) });
      else {
        const eventId = stepRunId(c.enrollmentId, c.seq);
        rows.push({ c, eventId, body: this.body(step, c, eventId, contact) });
      }
    }
    if (!rows.length) return out;
    if (!(await this.webhooks.queueDirectDeliveries(webhookId, WORKFLOW_WEBHOOK_EVENT, rows, tx)))
      throw fieldError('webhookId', `webhook ${webhookId} does not exist`);
    for (const { c, eventId } of rows) {
      c.webhooks.add(webhookId);
      out.set(c.enrollmentId, { result: this.waitFor({ stepKey: step.key, webhookId, eventId }, c, 0) });
    }
    return out;
  }

  private webhookOf(step: Step): number {
    if (step.webhookId === undefined) throw fieldError('webhookId', `step "${step.key}" has no webhook subscription (save the workflow again)`);
    return step.webhookId;
  }

  /** The delivery's body: the event `workflow.webhook` with the contact and the step's payload rendered with its merge fields. */
  private body(step: Step, ctx: WebhookStepContext, id: string, contact: ContactRecord): string {
    const merge = { ...(contact as unknown as Record<string, unknown>), fields: contact.fields };
    const render = (v: unknown): unknown =>
      typeof v === 'string'
        ? this.textMessages.render(v, merge)
        : Array.isArray(v)
          ? v.map(render)
          : typeof v === 'object' && v !== null
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, render(x)]))
            : v;
    return JSON.stringify({
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
  }

  /** The settled delivery's outcome: on to `next`, or the enrollment fails (thrown); still pending: wait again. */
  private decide(step: Step, ctx: WebhookStepContext, awaited: AwaitedDelivery, o: DeliveryOutcome | null): WebhookStepResult {
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
