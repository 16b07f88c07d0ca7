import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { stampCreated, stampModified } from '../common/audit.js';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, conflict, fieldError, notFound, unavailable } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { auditFields, defineList } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/validation.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { parseIdempotencyKey } from '../sms/sms-provider.js';
import { signatureProblem } from '../sms/signature.js';
import { canEdit, canSend, deliveryTransition, TEXT_MESSAGE_STATUSES, type TextMessageStatus } from './text-message-state.js';
import { CreateTextMessageDto, UpdateTextMessageDto } from './text-message.dto.js';
import { TEXT_MESSAGE_COLUMNS, type TextMessageRecord, toTextMessageRecord } from './text-message.columns.js';
import { TextMessage } from './text-message.entity.js';
import { TextMessageRepository } from './text-message.repository.js';
import { MergeFieldError, type MergeContact, parseTemplate, renderTemplate } from './merge-fields.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { ContactsService } from '../contacts/contacts.service.js';

export const TEXT_MESSAGE_LIST_SPEC = defineList({
  name: 'text messages',
  sortable: ['id', 'recipient', 'status', 'scheduledFor', 'sentAt', 'deliveredAt', 'createdAt', 'modifiedAt'],
  searchExpression: 'sf_text(t.content, t.recipient)',
  filters: {
    status: { type: 'string', column: 't.status', values: TEXT_MESSAGE_STATUSES },
    campaignId: { type: 'int', column: 't.campaign_id' },
    broadcastId: { type: 'int', column: 't.broadcast_id' },
  },
  fields: {
    id: { type: 'id', sql: 't.id' },
    content: { type: 'string', sql: 't.content' },
    recipient: { type: 'string', sql: 't.recipient' },
    status: { type: 'enum', sql: 't.status', values: TEXT_MESSAGE_STATUSES },
    'campaign.id': { type: 'id', sql: 't.campaign_id' },
    campaignId: { type: 'id', sql: 't.campaign_id' },
    scheduledFor: { type: 'datetime', sql: 't.scheduled_for' },
    sentAt: { type: 'datetime', sql: 't.sent_at' },
    deliveredAt: { type: 'datetime', sql: 't.delivered_at' },
    failedAt: { type: 'datetime', sql: 't.failed_at' },
    failureCode: { type: 'string', sql: 't.failure_code' },
    ...auditFields('t'),
  },
  properties: [
    'id',
    'content',
    'recipient',
    'status',
    'scheduledFor',
    'sentAt',
    'deliveredAt',
    'failedAt',
    'failureReason',
    'failureCode',
    'campaign',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

export type { TextMessageRecord };

/**
 * Starts a new send of `t` (send number + 1, `queued` now, the last send's outcome and claim cleared).
 * `idempotentHandover`: a workflow step's message, handed over again with its Idempotency-Key after
 * a worker death (TextMessagesProcessor); false for a user's send, which stays at most once.
 */
function startSend(t: TextMessage, idempotentHandover: boolean): void {
  t.status = 'queued';
  t.sendCount = (t.sendCount ?? 0) + 1;
  t.queuedAt = new Date();
  t.sentAt = null;
  t.deliveredAt = null;
  t.failedAt = null;
  t.canceledAt = null;
  t.failureCode = null;
  t.failureReason = null;
  t.claimToken = null;
  t.claimedAt = null;
  t.provider = null;
  t.providerMessageId = null;
  t.idempotentHandover = idempotentHandover;
}

@Injectable()
export class TextMessagesService {
  private readonly logger = new Logger('TextMessages');

  constructor(
    private readonly messages: TextMessageRepository,
    private readonly transactions: Transactions,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobQueue,
    private readonly notifications: NotificationsService,
    private readonly events: EventsService,
    private readonly contacts: ContactsService,
  ) {}

  /** Records for a batch of messages, with their campaigns' names in one query. */
  async toRecords(list: TextMessage[], tx?: Tx): Promise<TextMessageRecord[]> {
    const ids = [...new Set(list.map((t) => t.campaignId).filter((id): id is number => id !== null))];
    const campaigns = await this.messages.campaignNames(ids, tx);
    return list.map((t) => toTextMessageRecord(t, t.campaignId === null ? null : (campaigns.get(t.campaignId) ?? null)));
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, TEXT_MESSAGE_LIST_SPEC);
    const page = await this.messages.list(q, TEXT_MESSAGE_LIST_SPEC);
    return listEnvelope(q, 'textMessages', page, await this.toRecords(page.items));
  }

  /** The message; with `tx`, locked until that transaction ends (edits, sends and deletes apply one after the other). */
  async findEntity(id: number, tx?: Tx): Promise<TextMessage> {
    const t = tx ? await this.messages.findForUpdate(id, tx) : await this.messages.findById(id);
    if (!t) throw notFound('Text message', id);
    return t;
  }

  async get(id: number): Promise<TextMessageRecord> {
    return (await this.toRecords([await this.findEntity(id)]))[0];
  }

  async create(dto: CreateTextMessageDto, who: Principal): Promise<TextMessageRecord> {
    return this.transactions.run(async (tx) => {
      const t = new TextMessage();
      t.status = 'draft';
      t.sendCount = 0;
      this.assign(t, dto, true);
      stampCreated(t, who);
      return this.saveAndQueue(t, tx, null);
    });
  }

  async patch(id: number, dto: UpdateTextMessageDto, who: Principal): Promise<TextMessageRecord> {
    return this.transactions.run(async (tx) => {
      const t = await this.findEntity(id, tx);
      this.assertEditable(t);
      const before = (await this.toRecords([t], tx))[0];
      this.assign(t, dto, false);
      stampModified(t, who);
      return this.saveAndQueue(t, tx, before);
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new message. */
  async put(id: number, dto: CreateTextMessageDto, who: Principal): Promise<{ created: boolean; textMessage: TextMessageRecord }> {
    if (!(await this.messages.exists(id))) return { created: true, textMessage: await this.create(dto, who) };
    const textMessage = await this.transactions.run(async (tx) => {
      const t = await this.findEntity(id, tx);
      this.assertEditable(t);
      const before = (await this.toRecords([t], tx))[0];
      this.assign(t, dto, true);
      stampModified(t, who);
      return this.saveAndQueue(t, tx, before);
    });
    return { created: false, textMessage };
  }

  /**
   * Deletes the message in any state. A queued message is not sent then (its job finds nothing),
   * unless a worker was already handing it to the provider at that moment. Of concurrent deletes,
   * one answers the message and the others 404.
   */
  async remove(id: number): Promise<TextMessageRecord> {
    return this.transactions.run(async (tx) => {
      const t = await this.messages.remove(id, tx);
      if (!t) throw notFound('Text message', id);
      const record = (await this.toRecords([t], tx))[0];
      await this.events.record(tx, 'text_message.deleted', record);
      return record;
    });
  }

  /**
   * Queues the message for sending now (from draft or failed; 409 otherwise) and answers it in
   * `queued`. A queue known to be down is a 503 before anything changes. The state change, its
   * opt-out check and its event are one statement (bench row "send 10,000 text messages"); the job
   * is added after that commits, batched with the other sends of the moment (JobQueue.enqueue of a
   * unique id). A send committed whose job is never added (the process died in between, or Redis
   * failed at that instant) stays `queued` and is not lost: the recovery pass re-queues it (every
   * worker start, and every 5 minutes once it is 2 minutes overdue; TextMessagesProcessor.recover).
   */
  async send(id: number, who: Principal): Promise<TextMessageRecord> {
    if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the message was not queued. Try again shortly.');
    const queued = await this.messages.queueSend(id, who);
    if (!queued) throw notFound('Text message', id);
    if (!queued.row) {
      if (!canSend(queued.previousStatus)) throw conflict(`Text message ${id} is ${queued.previousStatus}; only draft or failed messages can be sent`);
      throw conflict(
        `The recipient ${queued.recipient} has opted out of text messages (a contact with this number has an sms do-not-contact entry); the message was not queued`,
      );
    }
    const { sendCount, ...row } = queued.row;
    try {
      await this.enqueueSend(row.id, sendCount, null);
    } catch (e) {
      // Committed: the message is queued and the recovery pass adds its job; answering 503 would tell the caller it was not.
      this.logger.warn({
        msg: 'text message queued but its job was not added; the recovery pass will add it',
        textMessageId: row.id,
        err: (e as Error).message,
      });
    }
    return TEXT_MESSAGE_COLUMNS.toRecord(row);
  }

  /** Adds the job of one send, `sms:<id>:<sendCount>` (the id carries the send count, so no earlier job can have it), delayed to `scheduledFor`. */
  private enqueueSend(messageId: number, sendCount: number, scheduledFor: Date | null): Promise<unknown> {
    return this.jobs.enqueue(
      'sms.send',
      { messageId, generation: sendCount, queuedAt: Date.now() },
      { jobId: JOB_IDS.smsSend(messageId, sendCount), uniqueId: true, delayMs: scheduledFor ? scheduledFor.getTime() - Date.now() : 0 },
    );
  }

  /**
   * Checks an SMS template (merge fields such as {{contact.name}} or {{fields.plan}}): a 400 naming
   * `field` when a merge field is unknown.
   */
  checkTemplate(content: string, field: string): void {
    try {
      parseTemplate(content);
    } catch (e) {
      if (e instanceof MergeFieldError) throw fieldError(field, e.message);
      throw e;
    }
  }

  /** A template with merge fields rendered for a contact (a workflow's webhook payload strings). */
  render(content: string, contact: MergeContact): string {
    return renderTemplate(parseTemplate(content), contact);
  }

  /** The content of a text message (a workflow's send_sms step may take its body from one); 404 when it does not exist. */
  async contentOf(id: number, tx?: Tx): Promise<string> {
    const t = await this.messages.findById(id, tx);
    if (!t) throw notFound('Text message', id);
    return t.content;
  }

  /**
   * Queues one message to a contact inside the caller's transaction (a workflow's send_sms step):
   * the template rendered for the contact, sent to its phone through the usual pipeline (the
   * opt-out check, the job `sms:<id>:1` added before the commit, the provider's Idempotency-Key)
   * at `scheduledFor` (null: now). Answers the message, or `opted_out` when the recipient opted out
   * (nothing is queued); a phone that is not valid is a 400.
   */
  async queueForContact(
    contact: MergeContact & { id: number; phone: string | null },
    template: string,
    scheduledFor: Date | null,
    who: Principal,
    tx: Tx,
  ): Promise<TextMessageRecord | 'opted_out'> {
    const recipient = contact.phone ? toE164(contact.phone) : null;
    if (!recipient) throw fieldError('phone', `contact ${contact.id} has no valid phone number`);
    if ((await this.contacts.optedOutPhones([recipient], tx)).size) return 'opted_out';
    const t = new TextMessage();
    t.status = 'draft';
    t.sendCount = 0;
    t.content = renderTemplate(parseTemplate(template), contact);
    t.recipient = recipient;
    t.contactId = contact.id;
    t.campaignId = null;
    t.scheduledFor = scheduledFor;
    stampCreated(t, who);
    return this.saveAndQueue(t, tx, null, true);
  }

  /**
   * queueForContact for many contacts at once (a workflow's send_sms step over a batch of
   * enrollments), in `tx`: one opt-out read, one multi-row INSERT of the `queued` messages (send 1),
   * each send's job `sms:<id>:1` added before the commit (the queue batches them), the
   * text_message.created and .queued events in one statement. Each message's Idempotency-Key is
   * `textmessage-<id>-1`, as for one message. Answers per item, in order: the message, `opted_out`
   * (nothing queued), or the 400 of a contact without a valid phone (nothing queued for it).
   */
  async queueForContacts(
    items: { contact: MergeContact & { id: number; phone: string | null }; template: string; scheduledFor: Date | null }[],
    who: Principal,
    tx: Tx,
  ): Promise<(TextMessageRecord | 'opted_out' | AppError)[]> {
    const out = new Array<TextMessageRecord | 'opted_out' | AppError>(items.length);
    if (!items.length) return out;
    if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the message was not queued. Try again shortly.');
    const recipients = items.map((i) => (i.contact.phone ? toE164(i.contact.phone) : null));
    const optedOut = await this.contacts.optedOutPhones(
      recipients.filter((r): r is string => r !== null),
      tx,
    );
    const parsed = new Map<string, ReturnType<typeof parseTemplate>>();
    const pending: { index: number; t: TextMessage }[] = [];
    for (const [index, item] of items.entries()) {
      const recipient = recipients[index];
      if (!recipient) {
        out[index] = fieldError('phone', `contact ${item.contact.id} has no valid phone number`);
        continue;
      }
      if (optedOut.has(recipient)) {
        out[index] = 'opted_out';
        continue;
      }
      let template = parsed.get(item.template);
      if (!template) parsed.set(item.template, (template = parseTemplate(item.template)));
      const t = new TextMessage();
      t.content = renderTemplate(template, item.contact);
      t.recipient = recipient;
      t.contactId = item.contact.id;
      t.campaignId = null;
      t.scheduledFor = item.scheduledFor;
      t.sendCount = 0;
      startSend(t, true);
      stampCreated(t, who);
      pending.push({ index, t });
    }
    if (!pending.length) return out;
    const saved = await this.messages.insertMany(
      pending.map((p) => p.t),
      tx,
    );
    await Promise.all(saved.map((m) => this.enqueueSend(m.id, m.sendCount, m.scheduledFor)));
    const records = await this.toRecords(saved, tx);
    await this.events.recordMany(
      tx,
      records.flatMap((record) => [
        { type: 'text_message.created' as const, data: record },
        { type: 'text_message.queued' as const, data: record, previous: { status: 'draft' } },
      ]),
    );
    for (const [k, p] of pending.entries()) out[p.index] = records[k];
    return out;
  }

  private assertEditable(t: TextMessage) {
    if (!canEdit(t.status)) throw conflict(`Text message ${t.id} is ${t.status}; only draft or failed messages can be edited`);
  }

  /**
   * Saves the message; when it is (newly) queued — by send, or by a scheduledFor on create/edit —
   * starts a new send: send_count + 1, failure cleared, and a job `sms:<id>:<sendCount>` delayed to
   * scheduledFor, added before the transaction commits (503 and a rollback when it cannot be).
   */
  private async saveAndQueue(t: TextMessage, tx: Tx, before: TextMessageRecord | null, forceQueue = false): Promise<TextMessageRecord> {
    const queue = forceQueue || (t.scheduledFor !== null && (t.status === 'draft' || t.status === 'failed'));
    if (queue) {
      if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the message was not queued. Try again shortly.');
      // A courtesy check for a clear answer; the worker checks again when it claims the message, so
      // an opt-out that commits after this still wins (the message ends `canceled`, opted_out).
      if ((await this.contacts.optedOutPhones([t.recipient], tx)).size) {
        throw conflict(
          `The recipient ${t.recipient} has opted out of text messages (a contact with this number has an sms do-not-contact entry); the message was not queued`,
        );
      }
      // A new workflow step's message (forceQueue) is exactly once; a user's send is at most once.
      startSend(t, forceQueue && t.id === undefined);
    }
    // An existing message (locked by the caller) is written with a plain UPDATE.
    let saved: TextMessage;
    if (t.id !== undefined) {
      await this.messages.update(t.id, t, tx);
      saved = t;
    } else saved = await this.messages.insert(t, tx);
    if (queue) await this.enqueueSend(saved.id, saved.sendCount, saved.scheduledFor);
    const record = (await this.toRecords([saved], tx))[0];
    // created / updated for the edit itself (a send only changes the status: queued says it all), then queued.
    if (!before) await this.events.record(tx, 'text_message.created', record);
    else if (!forceQueue) await this.events.recordUpdate(tx, 'text_message.updated', before, record);
    if (queue) await this.events.record(tx, 'text_message.queued', record, { status: before?.status ?? 'draft' });
    return record;
  }

  /** Writes the event of a status change made by the worker or a delivery report (text_message.sent|delivered|failed|canceled). */
  async recordStatus(
    tx: Tx,
    id: number,
    type: 'text_message.sent' | 'text_message.delivered' | 'text_message.failed' | 'text_message.canceled',
    previousStatus: string,
  ): Promise<void> {
    const t = await this.messages.findById(id, tx);
    if (t) await this.events.record(tx, type, (await this.toRecords([t], tx))[0], { status: previousStatus });
  }

  /**
   * Copies DTO values onto the entity; with `replace`, omitted optional properties are reset. A
   * campaign that does not exist is refused by its foreign key (text_messages_campaign_id_fkey → 400).
   */
  private assign(t: TextMessage, dto: UpdateTextMessageDto, replace: boolean) {
    for (const key of ['content', 'recipient'] as const) {
      if (dto[key] === null) throw fieldError(key, 'must not be null');
    }
    if (dto.content !== undefined) {
      if (dto.content.trim() === '') throw fieldError('content', 'must not be blank');
      t.content = dto.content;
    }
    if (dto.recipient !== undefined) {
      const e164 = toE164(dto.recipient);
      if (!e164) throw fieldError('recipient', 'must be a valid phone number, e.g. +14155550100');
      t.recipient = e164;
    }
    if (dto.campaignId !== undefined || replace) t.campaignId = dto.campaignId ?? null;
    if (dto.scheduledFor !== undefined || replace) {
      t.scheduledFor = dto.scheduledFor ? parseIsoWithOffset(dto.scheduledFor) : null;
    }
  }

  /**
   * A delivery report from the HTTP gateway. The signature (header X-Signature: HMAC-SHA256 of its
   * timestamp and the raw body with SMS_WEBHOOK_SECRET, the timestamp within 5 minutes of now) is
   * checked before anything else: 401 when it is missing, wrong or too old. The message is found by `reference` (our Idempotency-Key) or the gateway's `id`; a
   * report for an earlier send of the message, or one that would move it backwards, is acknowledged
   * and ignored.
   */
  async deliveryReport(rawBody: Buffer | undefined, signature: unknown, body: unknown): Promise<{ accepted: boolean; status: TextMessageStatus | null }> {
    const problem = signatureProblem(this.config.smsWebhookSecret, rawBody, signature);
    if (problem !== null) throw new AppError('unauthorized', `The delivery report is refused: ${problem}`);
    const b = (body ?? {}) as Record<string, unknown>;
    const status = b.status === 'undelivered' ? 'failed' : b.status;
    const ref = parseIdempotencyKey(b.reference);
    const providerId = typeof b.id === 'string' || typeof b.id === 'number' ? String(b.id) : null;
    if (typeof b.status !== 'string') throw fieldError('status', 'is required');
    const target = ref ? { id: ref.messageId } : providerId ? { providerMessageId: providerId } : null;
    if (!target) throw fieldError('reference', 'reference (the Idempotency-Key) or id (the gateway message id) is required');
    if (status !== 'delivered' && status !== 'failed') return { accepted: false, status: null };
    const at = typeof b.timestamp === 'string' ? (parseIsoWithOffset(b.timestamp) ?? new Date()) : new Date();
    const reason = typeof b.error === 'string' ? b.error.slice(0, 500) : null;

    return this.transactions.run(async (tx) => {
      const t = await this.messages.findForDelivery(target, tx);
      if (!t || (ref && ref.sendCount !== t.sendCount)) return { accepted: false, status: t?.status ?? null };
      const next = deliveryTransition({ status: t.status, claimed: t.claimToken !== null, failureCode: t.failureCode }, status);
      if (!next) return { accepted: false, status: t.status };
      if (next !== 'delivered' && next !== 'failed') return { accepted: false, status: t.status };
      await this.applyDelivery(t.id, next, at, reason, tx);
      if (next === 'failed' && t.createdBy !== null) {
        await this.notifications.notify(
          t.createdBy,
          'sms_failed',
          `The text message to ${t.recipient} was not delivered${reason ? `: ${reason}` : ''}`,
          { textMessageId: t.id, reason },
          tx,
        );
      }
      return { accepted: true, status: next };
    });
  }

  /** Writes a delivery outcome (shared by delivery reports and providers that report at once). */
  async applyDelivery(id: number, next: 'delivered' | 'failed', at: Date, reason: string | null, tx: Tx): Promise<void> {
    const previous = (await this.messages.findById(id, tx))?.status ?? null;
    if (next === 'delivered') await this.messages.markDelivered(id, at, tx);
    else await this.messages.markDeliveryFailed(id, at, reason ?? 'the gateway reported the message undelivered', tx);
    if (previous !== null) await this.recordStatus(tx, id, next === 'delivered' ? 'text_message.delivered' : 'text_message.failed', previous);
  }
}
