import { Injectable } from '@nestjs/common';
import { ActivitiesService } from '../activities/activities.service.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { AppError, type ErrorCode, fieldError, notFound } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import type { ContactRecord } from '../contacts/contact.columns.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../database/transactions.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { pointChangeError, ScoringService } from '../scoring/scoring.service.js';
import { SegmentsService } from '../segments/segments.service.js';
import { TextMessagesService } from '../text-messages/text-messages.service.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import type { Settings, Step } from './workflow-definition.js';
import { splitBucket } from './workflow-records.js';
import { nextInWindow, nextTimeOfDay, parseDuration, parseRelative, parseTimeOfDay } from './workflow-time.js';
import { contactEditOf, EXCLUDED_FILTER_FIELDS } from './workflow-validation.js';
import { WebhookStep } from './workflow-webhook-step.js';

/** What one step run needs: the enrollment, its workflow, the version's settings, the instant, and who acts. */
export interface StepContext {
  enrollmentId: number;
  workflowId: number;
  workflowName: string;
  contactId: number;
  /** Whether the enrollment is waiting at this step (a wait whose time has come). */
  waiting: boolean;
  /** The event that woke the enrollment waiting at an untilEvent step (null: it waits, or its timeout ran out). */
  woken: Record<string, unknown> | null;
  /** The step run's sequence number in the enrollment (its external effects' stable id derives from it). */
  seq: number;
  settings: Settings;
  now: Date;
  who: Principal;
  /** Webhooks that got a delivery in this transaction (their drains are queued after the commit). */
  webhooks: Set<number>;
}

/** What a step decided: go on to `next` (undefined: the end), wait until a time, or exit. */
export type StepResult =
  | { kind: 'next'; next: string | undefined; outcome: 'completed' | 'skipped'; detail: Record<string, unknown> }
  | { kind: 'wait'; until: Date; detail: Record<string, unknown> }
  | { kind: 'exit'; detail: Record<string, unknown> };

/** What a step decided for one enrollment of a group run set-based: its result, or its own failure (only it fails). */
export type GroupOutcome = { result: StepResult } | { failure: Error };

/** The step types run set-based over a group of enrollments (the others run one enrollment at a time, in the same transaction). */
export const SET_BASED_STEPS: ReadonlySet<string> = new Set([
  'branch',
  'update_contact',
  'add_points',
  'add_to_campaign',
  'remove_from_campaign',
  'add_to_segment',
  'remove_from_segment',
  'send_sms',
  'webhook',
]);

/** When a wait step started now is due (null: a wait that takes no time, e.g. an `until` in the past). */
export function waitDue(step: Step, now: Date, timezone: string): Date {
  if (step.untilEvent !== undefined) return new Date(now.getTime() + (parseDuration(step.timeout) ?? 0));
  if (step.duration !== undefined) return new Date(now.getTime() + (parseDuration(step.duration) ?? 0));
  if (step.until !== undefined) return new Date(step.until);
  return nextTimeOfDay(now, parseTimeOfDay(step.untilTimeOfDay) ?? 0, timezone);
}

/**
 * Runs one step's effect inside the step's transaction. Effects in the database (contact updates,
 * memberships, activities, notifications) are written through their features' services in that
 * transaction, with their own events; effects outside it are recorded there and sent by their
 * pipelines: an SMS is a queued text message (the job is added before the commit, the provider
 * called once with the message's Idempotency-Key), a webhook call is a delivery row with a Webhook-Id
 * derived from the enrollment and step run, drained, signed and retried like the feed's deliveries,
 * and the enrollment waits for its outcome (workflow-webhook-step.ts).
 */
@Injectable()
export class StepEffects {
  constructor(
    private readonly contacts: ContactsService,
    private readonly campaigns: CampaignsService,
    private readonly segments: SegmentsService,
    private readonly activities: ActivitiesService,
    private readonly notifications: NotificationsService,
    private readonly textMessages: TextMessagesService,
    private readonly webhookStep: WebhookStep,
    private readonly enrollments: EnrollmentsRepository,
    private readonly scoring: ScoringService,
  ) {}

  /** Whether the contact matches a filter over contacts now (branches, goals). */
  async matches(contactId: number, filter: unknown, now: Date, tx?: Tx): Promise<boolean> {
    const { compiled } = await this.contacts.compileFilter(filter, EXCLUDED_FILTER_FIELDS, now);
    return this.enrollments.contactMatches(contactId, compiled, tx);
  }

  /** Of `contactIds`, those matching a filter over contacts now (a group's branch, goals): one statement. */
  async matchingContacts(contactIds: number[], filter: unknown, now: Date, tx: Tx): Promise<Set<number>> {
    if (!contactIds.length) return new Set();
    const { compiled } = await this.contacts.compileFilter(filter, EXCLUDED_FILTER_FIELDS, now);
    return new Set(await this.enrollments.matchingContacts(contactIds, compiled, tx));
  }

  async run(step: Step, ctx: StepContext, tx: Tx): Promise<StepResult> {
    const done = (detail: Record<string, unknown> = {}): StepResult => ({ kind: 'next', next: step.next, outcome: 'completed', detail });
    switch (step.type) {
      case 'wait': {
        if (step.untilEvent !== undefined && ctx.waiting) {
          if (ctx.woken) return done({ waited: true, event: ctx.woken });
          return { kind: 'next', next: step.timeoutNext, outcome: 'completed', detail: { waited: true, timedOut: true } };
        }
        if (ctx.waiting) return done({ waited: true });
        const until = waitDue(step, ctx.now, ctx.settings.timezone);
        if (until.getTime() <= ctx.now.getTime()) return done({ waited: false, dueAt: until.toISOString() });
        return { kind: 'wait', until, detail: { dueAt: until.toISOString() } };
      }
      case 'branch':
        return this.branch(step, ctx, tx);
      case 'exit':
        return { kind: 'exit', detail: {} };
      case 'add_points': {
        // A ledger row (source workflow) and the contact's points, in this step's transaction.
        const added = await this.scoring.addPoints(
          ctx.contactId,
          step.points as number,
          {
            source: 'workflow',
            reason: step.reason ?? `workflow "${ctx.workflowName}", step ${step.key}`,
            details: { workflowId: ctx.workflowId, enrollmentId: ctx.enrollmentId, stepKey: step.key, stepRun: ctx.seq },
          },
          tx,
        );
        return done({ points: step.points, total: added?.points ?? null });
      }
      case 'update_contact': {
        const contact = await this.contacts.patch(ctx.contactId, contactEditOf(step.set ?? {}), ctx.who, tx);
        return done({ set: Object.keys(step.set ?? {}), contactModifiedAt: contact.modifiedAt });
      }
      case 'add_to_campaign':
        return done({ campaignId: step.campaignId, added: await this.campaigns.addContacts(step.campaignId as number, [ctx.contactId], tx) });
      case 'remove_from_campaign':
        return done({ campaignId: step.campaignId, removed: await this.campaigns.removeContacts(step.campaignId as number, [ctx.contactId], tx) });
      case 'add_to_segment':
        return done({ segmentId: step.segmentId, added: await this.segments.addContacts(step.segmentId as number, [ctx.contactId], tx) });
      case 'remove_from_segment':
        return done({ segmentId: step.segmentId, removed: await this.segments.removeContacts(step.segmentId as number, [ctx.contactId], tx) });
      case 'create_activity': {
        const due = step.due === undefined ? null : new Date(ctx.now.getTime() + (parseRelative(step.due) ?? 0));
        const a = await this.activities.create(
          {
            type: step.activityType as 'call',
            subject: step.subject as string,
            contact_id: ctx.contactId,
            due_date: due ? due.toISOString() : null,
            notes: step.notes ?? null,
          },
          ctx.who,
          tx,
        );
        return done({ activityId: a.id });
      }
      case 'notify_user': {
        const n = await this.notifications.notify(
          step.userId as number,
          'workflow',
          step.message as string,
          { workflowId: ctx.workflowId, enrollmentId: ctx.enrollmentId, contactId: ctx.contactId },
          tx,
        );
        return done({ notificationId: n.id });
      }
      case 'send_sms':
        return this.sendSms(step, ctx, tx);
      case 'webhook':
        return this.webhookStep.run(step, ctx, tx);
      case 'goal':
        // Goals are never reached (validation refuses a next to one); they are checked before each step.
        return done();
    }
  }

  /**
   * Runs one step for a group of enrollments at the same step of the same workflow version (their
   * contacts distinct: one running enrollment per workflow and contact), set-based: one statement
   * per effect for the whole group, through the owning features' batch paths, with their events.
   * Answers each enrollment's outcome by enrollment id; an outcome may be the enrollment's own
   * failure when the batch path tells items apart (a contact edit refused, a phone that is not
   * valid). Anything thrown means the group as a whole failed: the caller rolls it back and runs
   * the enrollments one by one. Only for SET_BASED_STEPS (and a branch without a split).
   */
  async runMany(step: Step, ctxs: StepContext[], tx: Tx): Promise<Map<number, GroupOutcome>> {
    const out = new Map<number, GroupOutcome>();
    const ok = (c: StepContext, detail: Record<string, unknown>, next = step.next, outcome: 'completed' | 'skipped' = 'completed') =>
      out.set(c.enrollmentId, { result: { kind: 'next', next, outcome, detail } });
    const contactIds = ctxs.map((c) => c.contactId);
    switch (step.type) {
      case 'branch': {
        let rest = ctxs;
        for (const [i, b] of (step.branches ?? []).entries()) {
          if (!rest.length) break;
          const matched = await this.matchingContacts(
            rest.map((c) => c.contactId),
            b.filter,
            ctxs[0].now,
            tx,
          );
          for (const c of rest) if (matched.has(c.contactId)) ok(c, { branch: i, matched: true }, b.next);
          rest = rest.filter((c) => !matched.has(c.contactId));
        }
        for (const c of rest) ok(c, { branch: null, matched: false }, step.defaultNext);
        return out;
      }
      case 'update_contact': {
        const edit = contactEditOf(step.set ?? {});
        const answer = await this.contacts.batch({ mode: 'update', atomic: false, items: ctxs.map((c) => ({ ...edit, id: c.contactId })) }, ctxs[0].who, tx);
        const modified = await this.contacts.getMany(contactIds, tx);
        for (const [i, c] of ctxs.entries()) {
          const r = answer.results[i];
          if (r.error) out.set(c.enrollmentId, { failure: stepFailure(r.error) });
          else ok(c, { set: Object.keys(step.set ?? {}), contactModifiedAt: modified.get(c.contactId)?.modifiedAt ?? null });
        }
        return out;
      }
      case 'add_points': {
        const outcomes = await this.scoring.addPointsMany(
          ctxs.map((c) => ({
            contactId: c.contactId,
            delta: step.points as number,
            context: {
              source: 'workflow' as const,
              reason: step.reason ?? `workflow "${c.workflowName}", step ${step.key}`,
              details: { workflowId: c.workflowId, enrollmentId: c.enrollmentId, stepKey: step.key, stepRun: c.seq },
            },
          })),
          tx,
        );
        for (const [i, c] of ctxs.entries()) {
          const o = outcomes[i];
          // (A workflow's change names no rule and event, so it is never a duplicate.)
          if (o.status === 'applied' || o.status === 'duplicate') ok(c, { points: step.points, total: o.points });
          else out.set(c.enrollmentId, { failure: pointChangeError(o.status, c.contactId) });
        }
        return out;
      }
      case 'add_to_campaign':
      case 'remove_from_campaign': {
        const adding = step.type === 'add_to_campaign';
        const id = step.campaignId as number;
        const n = adding ? await this.campaigns.addContacts(id, contactIds, tx) : await this.campaigns.removeContacts(id, contactIds, tx);
        // The batch statement counts the group's changes, not whose: each run names its group's count.
        for (const c of ctxs) ok(c, { campaignId: id, [adding ? 'addedInGroup' : 'removedInGroup']: n, group: ctxs.length });
        return out;
      }
      case 'add_to_segment':
      case 'remove_from_segment': {
        const adding = step.type === 'add_to_segment';
        const id = step.segmentId as number;
        const n = adding ? await this.segments.addContacts(id, contactIds, tx) : await this.segments.removeContacts(id, contactIds, tx);
        for (const c of ctxs) ok(c, { segmentId: id, [adding ? 'addedInGroup' : 'removedInGroup']: n, group: ctxs.length });
        return out;
      }
      case 'send_sms':
        return this.sendSmsMany(step, ctxs, tx);
      case 'webhook':
        return this.webhookStep.runMany(step, ctxs, tx);
      default:
        throw new Error(`step type ${step.type} has no set-based run`);
    }
  }

  /** sendSms for a group: the contacts read once, the messages queued through the text messages' batch path. */
  private async sendSmsMany(step: Step, ctxs: StepContext[], tx: Tx): Promise<Map<number, GroupOutcome>> {
    const out = new Map<number, GroupOutcome>();
    const { settings, now, who } = ctxs[0];
    const template = step.body ?? (await this.textMessages.contentOf(step.textMessageId as number, tx));
    const w = settings.sendWindow;
    const at = w ? nextInWindow(now, w, settings.timezone) : now;
    const scheduledFor = at.getTime() > now.getTime() ? at : null;
    const contacts = await this.contacts.getMany(
      ctxs.map((c) => c.contactId),
      tx,
    );
    const sending: { c: StepContext; contact: ContactRecord }[] = [];
    for (const c of ctxs) {
      const contact = contacts.get(c.contactId);
      if (!contact) out.set(c.enrollmentId, { failure: notFound('Contact', c.contactId) });
      else if (!contact.phone) out.set(c.enrollmentId, { failure: fieldError('phone', `contact ${c.contactId} has no phone number`) });
      else sending.push({ c, contact });
    }
    const sent = await this.textMessages.queueForContacts(
      sending.map(({ contact }) => ({
        contact: { ...(contact as unknown as Record<string, unknown>), fields: contact.fields, id: contact.id, phone: contact.phone },
        template,
        scheduledFor,
      })),
      who,
      tx,
    );
    for (const [i, { c }] of sending.entries()) {
      const r = sent[i];
      if (r instanceof AppError) out.set(c.enrollmentId, { failure: r });
      else if (r === 'opted_out') out.set(c.enrollmentId, { result: { kind: 'next', next: step.next, outcome: 'skipped', detail: { reason: 'opted_out' } } });
      else
        out.set(c.enrollmentId, {
          result: { kind: 'next', next: step.next, outcome: 'completed', detail: { textMessageId: r.id, scheduledFor: scheduledFor?.toISOString() ?? null } },
        });
    }
    return out;
  }

  private async branch(step: Step, ctx: StepContext, tx: Tx): Promise<StepResult> {
    if (step.split) {
      const bucket = splitBucket(ctx.enrollmentId, step.key);
      let upTo = 0;
      for (const [i, s] of step.split.entries()) {
        upTo += s.percentage;
        if (bucket < upTo) return { kind: 'next', next: s.next, outcome: 'completed', detail: { split: i, bucket } };
      }
      const last = step.split[step.split.length - 1];
      return { kind: 'next', next: last.next, outcome: 'completed', detail: { split: step.split.length - 1, bucket } };
    }
    for (const [i, b] of (step.branches ?? []).entries()) {
      if (await this.matches(ctx.contactId, b.filter, ctx.now, tx))
        return { kind: 'next', next: b.next, outcome: 'completed', detail: { branch: i, matched: true } };
    }
    return { kind: 'next', next: step.defaultNext, outcome: 'completed', detail: { branch: null, matched: false } };
  }

  /** The contact's SMS through the text messages pipeline, at the send window's next opening when outside it; skipped when opted out. */
  private async sendSms(step: Step, ctx: StepContext, tx: Tx): Promise<StepResult> {
    const contact = await this.contacts.get(ctx.contactId);
    const template = step.body ?? (await this.textMessages.contentOf(step.textMessageId as number, tx));
    const w = ctx.settings.sendWindow;
    const at = w ? nextInWindow(ctx.now, w, ctx.settings.timezone) : ctx.now;
    const scheduledFor = at.getTime() > ctx.now.getTime() ? at : null;
    if (!contact.phone) throw fieldError('phone', `contact ${ctx.contactId} has no phone number`);
    const sent = await this.textMessages.queueForContact(
      { ...(contact as unknown as Record<string, unknown>), fields: contact.fields, id: contact.id, phone: contact.phone },
      template,
      scheduledFor,
      ctx.who,
      tx,
    );
    if (sent === 'opted_out') return { kind: 'next', next: step.next, outcome: 'skipped', detail: { reason: 'opted_out' } };
    return { kind: 'next', next: step.next, outcome: 'completed', detail: { textMessageId: sent.id, scheduledFor: scheduledFor?.toISOString() ?? null } };
  }
}

/** A batch item's error (the single-record route's answer) as the step's own failure. */
function stepFailure(e: { code: string; message: string }): AppError {
  return new AppError(e.code as ErrorCode, e.message);
}
