import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { ContactsService } from '../contacts/contacts.service.js';
import type { Definition, Step } from './workflow-definition.js';
import { StepEffects, waitDue } from './workflow-steps.js';
import { WorkflowValidator } from './workflow-validation.js';
import type { DryRunDto } from './workflow.dto.js';
import { WorkflowsRepository } from './workflows.repository.js';

interface PathStep {
  key: string;
  type: string;
  decision: string;
  dueAt?: string | null;
}

/** What an action step would do, in words. */
function describe(s: Step): string {
  switch (s.type) {
    case 'send_sms':
      return s.body !== undefined ? `would send the SMS "${s.body.slice(0, 80)}"` : `would send the content of text message ${s.textMessageId}`;
    case 'update_contact':
      return `would set ${Object.keys(s.set ?? {}).join(', ')}`;
    case 'add_to_campaign':
      return `would add the contact to campaign ${s.campaignId}`;
    case 'remove_from_campaign':
      return `would remove the contact from campaign ${s.campaignId}`;
    case 'add_to_segment':
      return `would add the contact to segment ${s.segmentId}`;
    case 'remove_from_segment':
      return `would remove the contact from segment ${s.segmentId}`;
    case 'create_activity':
      return `would create the ${s.activityType} activity "${s.subject}"`;
    case 'notify_user':
      return `would notify user ${s.userId}`;
    case 'add_points':
      return `would add ${s.points} points`;
    case 'webhook':
      return s.url !== undefined ? `would call ${s.url}` : `would call webhook ${s.webhookId}`;
    default:
      return '';
  }
}

/**
 * `POST /api/workflows/{id}/dry-run`: the path a contact would take through the workflow (the saved
 * current version, or a draft definition in the body) starting at `at`, with each branch's decision
 * and why (filters evaluated on the contact as it is now), each wait's due time (the simulated time
 * moves on to it), and the goals checked; it writes nothing. A split cannot know the enrollment id
 * that decides it: the path follows its first way and says so.
 */
@Injectable()
export class WorkflowDryRun {
  constructor(
    private readonly workflows: WorkflowsRepository,
    private readonly validator: WorkflowValidator,
    private readonly effects: StepEffects,
    private readonly contacts: ContactsService,
    private readonly clock: Clock,
  ) {}

  async run(id: number, dto: DryRunDto) {
    const w = await this.workflows.findRecord(id);
    if (!w) throw notFound('Workflow', id);
    let def: Definition = { trigger: w.trigger, steps: w.steps, settings: w.settings };
    if (dto.definition) {
      const d = dto.definition;
      try {
        def = await this.validator.check({ trigger: d.trigger ?? w.trigger, steps: d.steps, settings: d.settings ?? w.settings });
      } catch (e) {
        // The draft's problems are named inside the body's definition.
        if (!(e instanceof AppError) || e.status !== 400) throw e;
        const details = (e.details ?? []).map((x) => ({ ...x, field: `definition.${x.field}` }));
        throw new AppError('validation_failed', `definition: ${e.message}`, details);
      }
    }
    if (!(await this.contacts.exists(dto.contactId))) throw fieldError('contactId', `contact ${dto.contactId} does not exist`);
    const at = dto.at ? parseIsoWithOffset(dto.at) : this.clock.now();
    if (!at) throw fieldError('at', 'must be an ISO 8601 date-time with an offset');
    return this.walk(def, dto.contactId, at);
  }

  private async walk(def: Definition, contactId: number, at: Date) {
    const path: PathStep[] = [];
    const byKey = new Map(def.steps.map((s) => [s.key, s]));
    const goals = def.steps.filter((s) => s.type === 'goal');
    const now = this.clock.now();
    let t = at;
    let step: Step | undefined = def.steps[0];
    const seen = new Set<string>();
    const answer = (ends: string, converted = false) => ({ contactId, at: at.toISOString(), converted, path, ends });
    for (const g of goals) {
      if (await this.effects.matches(contactId, g.filter, now)) {
        path.push({ key: g.key, type: 'goal', decision: 'the contact matches this goal now: it would convert at once' });
        return answer('converted', true);
      }
    }
    while (step) {
      if (seen.has(step.key)) {
        path.push({ key: step.key, type: step.type, decision: 'the path loops back here (after a wait); the dry run stops' });
        return answer('looping');
      }
      seen.add(step.key);
      let next: string | undefined = step.next;
      switch (step.type) {
        case 'wait': {
          const due = waitDue(step, t, def.settings.timezone);
          if (step.untilEvent !== undefined) {
            // No event can be foreseen: the path the timeout takes, with the event's way named.
            const u = step.untilEvent;
            const what = 'tracked' in u ? `the tracked event "${u.tracked}"` : `a ${u.record} event of the contact`;
            path.push({
              key: step.key,
              type: step.type,
              decision: `waits for ${what} (→ ${step.next ?? 'the end'}) until the timeout (→ ${step.timeoutNext ?? 'the end'}); the dry run follows the timeout`,
              dueAt: due.toISOString(),
            });
            t = due;
            next = step.timeoutNext;
            break;
          }
          const over = due.getTime() <= t.getTime();
          path.push({ key: step.key, type: step.type, decision: over ? 'the wait is already over' : 'waits', dueAt: due.toISOString() });
          if (!over) t = due;
          break;
        }
        case 'branch':
          next = await this.branch(step, contactId, now, path);
          break;
        case 'exit':
          path.push({ key: step.key, type: step.type, decision: 'exits the workflow' });
          return answer('exited');
        default:
          path.push({ key: step.key, type: step.type, decision: describe(step) });
      }
      step = next === undefined ? undefined : byKey.get(next);
    }
    return answer('completed');
  }

  private async branch(step: Step, contactId: number, now: Date, path: PathStep[]): Promise<string | undefined> {
    if (step.split) {
      const shares = step.split.map((s) => `${s.percentage}% → ${s.next}`).join(', ');
      path.push({ key: step.key, type: step.type, decision: `split (${shares}): the enrollment's id decides; the dry run follows the first way` });
      return step.split[0].next;
    }
    for (const [i, b] of (step.branches ?? []).entries()) {
      if (await this.effects.matches(contactId, b.filter, now)) {
        path.push({ key: step.key, type: step.type, decision: `branch ${i} (→ ${b.next}): the contact matches its filter` });
        return b.next;
      }
    }
    path.push({
      key: step.key,
      type: step.type,
      decision: `no branch filter matches the contact: ${step.defaultNext === undefined ? 'the path ends' : `default → ${step.defaultNext}`}`,
    });
    return step.defaultNext;
  }
}
