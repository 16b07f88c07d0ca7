import { Injectable } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { CronExpressionParser } from 'cron-parser';
import { UsersService } from '../auth/users.service.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { AppError } from '../common/errors.js';
import { UpdateContactDto } from '../contacts/contact.dto.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { SegmentsService } from '../segments/segments.service.js';
import { TextMessagesService } from '../text-messages/text-messages.service.js';
import { checkDefinition, type Definition, type Step, stepError } from './workflow-definition.js';
import { compilePropertiesFilter } from './workflow-tracked.js';

/** Filter fields a workflow's filters cannot use (as for segments: segment.id). */
export const EXCLUDED_FILTER_FIELDS = ['segment.id'] as const;

/** `set` of an update_contact step as the contact edit it makes: `fields.<alias>` keys become `fields: { alias }`. */
export function contactEditOf(set: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(set)) {
    if (k.startsWith('fields.')) {
      const fields = (out.fields ??= {}) as Record<string, unknown>;
      fields[k.slice('fields.'.length)] = v;
    } else out[k] = v;
  }
  return out;
}

/** Every string of a webhook step's payload (its templates), with its path (`payload.a.0`), at most 1,000. */
export function templateStrings(v: unknown, path: string, out: [string, string][] = []): [string, string][] {
  if (out.length >= 1000) return out;
  if (typeof v === 'string') out.push([path, v]);
  else if (Array.isArray(v)) v.forEach((x, i) => templateStrings(x, `${path}.${i}`, out));
  else if (typeof v === 'object' && v !== null) for (const [k, x] of Object.entries(v)) templateStrings(x, `${path}.${k}`, out);
  return out;
}

/**
 * Checks a definition against the database and the other features: the structure first
 * (workflow-definition.ts), then every filter compiles over contacts (custom fields included), every
 * segment, campaign, user, webhook and text message named exists (segments a step adds to or
 * removes from are static), a schedule's cron parses, an SMS template's merge fields are known,
 * an update_contact's `set` is a valid contact edit. A 400 names the step key and field.
 * Answers the definition with its filters normalised to their JSON form.
 */
@Injectable()
export class WorkflowValidator {
  constructor(
    private readonly contacts: ContactsService,
    private readonly segments: SegmentsService,
    private readonly campaigns: CampaignsService,
    private readonly users: UsersService,
    private readonly webhooks: WebhooksService,
    private readonly textMessages: TextMessagesService,
  ) {}

  async check(input: { trigger: unknown; steps: unknown; settings?: unknown }): Promise<Definition> {
    const d = checkDefinition(input);
    await this.checkTrigger(d);
    for (const s of d.steps) await this.checkStep(d.steps, s);
    return d;
  }

  /** A filter over contacts compiled (a 400 naming `field` otherwise); answers its JSON form. */
  private async filter(raw: unknown, fail: (message: string) => AppError): Promise<FilterNode> {
    try {
      return (await this.contacts.compileFilter(raw, EXCLUDED_FILTER_FIELDS)).node;
    } catch (e) {
      if (e instanceof AppError && e.status === 400) throw fail(`the filter does not compile: ${e.message}`);
      throw e;
    }
  }

  /** A filter over a tracked event's properties compiled (a 400 naming `field` otherwise); answers its JSON form. */
  private propertiesFilter(raw: unknown, fail: (message: string) => AppError): FilterNode {
    try {
      return compilePropertiesFilter(raw).node;
    } catch (e) {
      if (e instanceof AppError && e.status === 400) throw fail(`the filter does not compile (it names properties.<name> of the event): ${e.message}`);
      throw e;
    }
  }

  private async checkTrigger(d: Definition): Promise<void> {
    const t = d.trigger;
    const fail = (field: string) => (message: string) =>
      new AppError('validation_failed', `trigger.${field}: ${message}`, [{ field: `trigger.${field}`, message }]);
    if (t.type === 'record_event' && t.filter !== undefined && t.filter !== null) t.filter = await this.filter(t.filter, fail('filter'));
    if (t.type === 'tracked_event') {
      t.name = t.name.trim();
      if (t.filter !== undefined && t.filter !== null) t.filter = this.propertiesFilter(t.filter, fail('filter'));
    }
    if (t.type === 'schedule') {
      try {
        CronExpressionParser.parse(t.cron, { tz: d.settings.timezone, strict: false });
        if (t.cron.trim().split(/\s+/).length !== 5) throw new Error('a cron pattern has 5 fields');
      } catch (e) {
        throw fail('cron')(`does not parse as a cron pattern (5 fields: minute hour day month weekday): ${(e as Error).message}`);
      }
    }
    if (t.type === 'segment_entered' || t.type === 'segment_exited' || t.type === 'schedule') {
      if ((await this.segments.isStatic(t.segmentId)) === null) throw fail('segmentId')(`segment ${t.segmentId} does not exist`);
    }
  }

  private async checkStep(steps: Step[], s: Step): Promise<void> {
    const fail = (field: string) => (message: string) => stepError(steps, s.key, field, message);
    switch (s.type) {
      case 'wait': {
        const u = s.untilEvent;
        if (u && u.filter !== undefined && u.filter !== null) {
          if ('tracked' in u) u.filter = this.propertiesFilter(u.filter, fail('untilEvent.filter'));
          else u.filter = await this.filter(u.filter, fail('untilEvent.filter'));
        }
        if (u && 'tracked' in u) u.tracked = u.tracked.trim();
        break;
      }
      case 'branch':
        if (s.branches) for (const [j, b] of s.branches.entries()) b.filter = await this.filter(b.filter, fail(`branches.${j}.filter`));
        break;
      case 'goal':
        s.filter = await this.filter(s.filter, fail('filter'));
        break;
      case 'send_sms':
        if (s.body !== undefined) this.rethrowAs(() => this.textMessages.checkTemplate(s.body as string, 'body'), fail('body'));
        else
          await this.exists(
            this.textMessages.contentOf(s.textMessageId as number).then(() => true),
            fail('textMessageId'),
            `text message ${s.textMessageId}`,
          );
        break;
      case 'update_contact': {
        const dto = plainToInstance(UpdateContactDto, contactEditOf(s.set ?? {}));
        const errors = await validate(dto, { whitelist: true, forbidNonWhitelisted: true });
        if (errors.length) {
          const first = errors[0];
          throw fail(`set.${first.property}`)(Object.values(first.constraints ?? {})[0] ?? 'is not a valid contact property value');
        }
        break;
      }
      case 'add_to_campaign':
      case 'remove_from_campaign':
        await this.exists(this.campaigns.exists(s.campaignId as number), fail('campaignId'), `campaign ${s.campaignId}`);
        break;
      case 'add_to_segment':
      case 'remove_from_segment': {
        const isStatic = await this.segments.isStatic(s.segmentId as number);
        if (isStatic === null) throw fail('segmentId')(`segment ${s.segmentId} does not exist`);
        if (!isStatic) throw fail('segmentId')(`segment ${s.segmentId} is dynamic: its members follow its filter (a step adds to static segments only)`);
        break;
      }
      case 'notify_user':
        await this.exists(
          this.users.findById(s.userId as number).then((u) => u !== null),
          fail('userId'),
          `user ${s.userId}`,
        );
        break;
      case 'webhook':
        if (s.url !== undefined) {
          try {
            await this.webhooks.checkUrl(s.url);
          } catch (e) {
            if (e instanceof AppError && e.status === 400) throw fail('url')(e.details?.[0]?.message ?? e.message);
            throw e;
          }
        } else await this.exists(this.webhooks.exists(s.webhookId as number), fail('webhookId'), `webhook ${s.webhookId}`);
        for (const [path, text] of templateStrings(s.payload ?? {}, 'payload')) this.rethrowAs(() => this.textMessages.checkTemplate(text, path), fail(path));
        break;
      default:
        break;
    }
  }

  private async exists(found: Promise<boolean>, fail: (m: string) => AppError, what: string): Promise<void> {
    let ok: boolean;
    try {
      ok = await found;
    } catch (e) {
      if (e instanceof AppError && e.status === 404) ok = false;
      else throw e;
    }
    if (!ok) throw fail(`${what} does not exist`);
  }

  private rethrowAs(check: () => void, fail: (m: string) => AppError): void {
    try {
      check();
    } catch (e) {
      if (e instanceof AppError && e.status === 400) throw fail(e.details?.[0]?.message ?? e.message);
      throw e;
    }
  }
}
