import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { AppError, conflict, fieldError, notFound, unavailable } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/validation.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { parseIdempotencyKey } from '../sms/sms-provider.js';
import { verifySignature } from '../sms/signature.js';
import { canEdit, canSend, deliveryTransition, TEXT_MESSAGE_STATUSES, type TextMessageStatus } from './text-message-state.js';
import { CreateTextMessageDto, UpdateTextMessageDto } from './text-message.dto.js';
import { TextMessage } from './text-message.entity.js';
import { NotificationsService } from '../notifications/notifications.service.js';

export const TEXT_MESSAGE_LIST_SPEC: ListSpec = {
  sortable: {
    id: 't.id',
    recipient: 't.recipient',
    status: 't.status',
    scheduledFor: 't.scheduled_for',
    sentAt: 't.sent_at',
    deliveredAt: 't.delivered_at',
    createdAt: 't.created_at',
    modifiedAt: 't.modified_at',
  },
  searchExpression: 'sf_text(t.content, t.recipient)',
  filters: {
    status: { type: 'string', column: 't.status', values: TEXT_MESSAGE_STATUSES },
    campaignId: { type: 'int', column: 't.campaign_id' },
  },
};

export type TextMessageRecord = ReturnType<TextMessagesService['toRecord']>;

@Injectable()
export class TextMessagesService {
  private readonly logger = new Logger('TextMessages');

  constructor(
    @InjectRepository(TextMessage) private readonly messages: Repository<TextMessage>,
    @InjectDataSource() private readonly db: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobQueue,
    private readonly notifications: NotificationsService,
  ) {}

  toRecord(t: TextMessage, campaigns: Map<number, string>) {
    return {
      id: t.id,
      content: t.content,
      recipient: t.recipient,
      status: t.status,
      scheduledFor: iso(t.scheduledFor),
      sentAt: iso(t.sentAt),
      deliveredAt: iso(t.deliveredAt),
      failedAt: iso(t.failedAt),
      failureReason: t.failureReason,
      failureCode: t.failureCode,
      campaign: t.campaignId !== null && campaigns.has(t.campaignId) ? { id: t.campaignId, name: campaigns.get(t.campaignId)! } : null,
      ...auditOut(t),
    };
  }

  /** Records for a batch of messages, with their campaigns' names in one query. */
  async toRecords(list: TextMessage[], manager?: EntityManager): Promise<TextMessageRecord[]> {
    const ids = [...new Set(list.map((t) => t.campaignId).filter((id): id is number => id !== null))];
    const campaigns = new Map<number, string>();
    if (ids.length) {
      const rows: { id: number; name: string }[] = await (manager ?? this.db).query(`SELECT id, name FROM campaigns WHERE id = ANY($1)`, [ids]);
      for (const r of rows) campaigns.set(r.id, r.name);
    }
    return list.map((t) => this.toRecord(t, campaigns));
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, TEXT_MESSAGE_LIST_SPEC);
    const { total, items } = await paginate(this.messages.createQueryBuilder('t'), q, TEXT_MESSAGE_LIST_SPEC);
    return { total, textMessages: await this.toRecords(items) };
  }

  async findEntity(id: number, manager?: EntityManager, lock = false): Promise<TextMessage> {
    const repo = manager ? manager.getRepository(TextMessage) : this.messages;
    const t = await repo.findOne({ where: { id }, ...(lock ? { lock: { mode: 'pessimistic_write' as const } } : {}) });
    if (!t) throw notFound('Text message', id);
    return t;
  }

  async get(id: number): Promise<TextMessageRecord> {
    return (await this.toRecords([await this.findEntity(id)]))[0];
  }

  async create(dto: CreateTextMessageDto, who: Principal): Promise<TextMessageRecord> {
    return this.db.transaction(async (m) => {
      const t = m.getRepository(TextMessage).create({ status: 'draft', sendCount: 0 });
      await this.assign(t, dto, true, m);
      stampCreated(t, who);
      return this.saveAndQueue(t, m);
    });
  }

  async patch(id: number, dto: UpdateTextMessageDto, who: Principal): Promise<TextMessageRecord> {
    return this.db.transaction(async (m) => {
      const t = await this.findEntity(id, m, true);
      this.assertEditable(t);
      await this.assign(t, dto, false, m);
      stampModified(t, who);
      return this.saveAndQueue(t, m);
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new message. */
  async put(id: number, dto: CreateTextMessageDto, who: Principal): Promise<{ created: boolean; textMessage: TextMessageRecord }> {
    const exists = await this.messages.exists({ where: { id } });
    if (!exists) return { created: true, textMessage: await this.create(dto, who) };
    const textMessage = await this.db.transaction(async (m) => {
      const t = await this.findEntity(id, m, true);
      this.assertEditable(t);
      await this.assign(t, dto, true, m);
      stampModified(t, who);
      return this.saveAndQueue(t, m);
    });
    return { created: false, textMessage };
  }

  /**
   * Deletes the message in any state. A queued message is not sent then (its job finds nothing),
   * unless a worker was already handing it to the provider at that moment.
   */
  async remove(id: number): Promise<TextMessageRecord> {
    const t = await this.findEntity(id);
    const record = (await this.toRecords([t]))[0];
    await this.messages.delete({ id });
    return record;
  }

  /**
   * Queues the message for sending now (from draft or failed; 409 otherwise) and answers it in
   * `queued`. The state change and the job are one unit: the job is added inside the transaction,
   * so a queue that is down (503) leaves the message as it was.
   */
  async send(id: number, who: Principal): Promise<TextMessageRecord> {
    if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the message was not queued. Try again shortly.');
    return this.db.transaction(async (m) => {
      const t = await this.findEntity(id, m, true);
      if (!canSend(t.status)) throw conflict(`Text message ${id} is ${t.status}; only draft or failed messages can be sent`);
      t.scheduledFor = null;
      t.status = 'queued';
      stampModified(t, who);
      return this.saveAndQueue(t, m, true);
    });
  }

  private assertEditable(t: TextMessage) {
    if (!canEdit(t.status)) throw conflict(`Text message ${t.id} is ${t.status}; only draft or failed messages can be edited`);
  }

  /**
   * Saves the message; when it is (newly) queued — by send, or by a scheduledFor on create/edit —
   * starts a new send: send_count + 1, failure cleared, and a job `sms:<id>:<sendCount>` delayed to
   * scheduledFor, added before the transaction commits (503 and a rollback when it cannot be).
   */
  private async saveAndQueue(t: TextMessage, m: EntityManager, forceQueue = false): Promise<TextMessageRecord> {
    const queue = forceQueue || (t.scheduledFor !== null && (t.status === 'draft' || t.status === 'failed'));
    if (queue) {
      if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the message was not queued. Try again shortly.');
      t.status = 'queued';
      t.sendCount = (t.sendCount ?? 0) + 1;
      t.queuedAt = new Date();
      t.sentAt = null;
      t.deliveredAt = null;
      t.failedAt = null;
      t.failureCode = null;
      t.failureReason = null;
      t.claimToken = null;
      t.claimedAt = null;
      t.provider = null;
      t.providerMessageId = null;
    }
    // An existing message is written with a plain UPDATE (save() would first re-read the row).
    let saved: TextMessage;
    if (t.id !== undefined) {
      const { id, createdAt: _createdAt, ...changes } = t;
      await m.getRepository(TextMessage).update({ id }, changes);
      saved = t;
    } else saved = await m.getRepository(TextMessage).save(t);
    if (queue) {
      await this.jobs.enqueue(
        'sms.send',
        { messageId: saved.id, generation: saved.sendCount, queuedAt: Date.now() },
        // The id carries the send count, so no earlier job can have it.
        { jobId: JOB_IDS.smsSend(saved.id, saved.sendCount), uniqueId: true, delayMs: saved.scheduledFor ? saved.scheduledFor.getTime() - Date.now() : 0 },
      );
    }
    return (await this.toRecords([saved], m))[0];
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset. */
  private async assign(t: TextMessage, dto: UpdateTextMessageDto, replace: boolean, m: EntityManager) {
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
    if (dto.campaignId !== undefined || replace) {
      const campaignId = dto.campaignId ?? null;
      if (campaignId !== null) {
        const found: unknown[] = await m.query(`SELECT 1 FROM campaigns WHERE id = $1`, [campaignId]);
        if (!found.length) throw fieldError('campaignId', `campaign ${campaignId} does not exist`);
      }
      t.campaignId = campaignId;
    }
    if (dto.scheduledFor !== undefined || replace) {
      t.scheduledFor = dto.scheduledFor ? parseIsoWithOffset(dto.scheduledFor) : null;
    }
  }

  /**
   * A delivery report from the HTTP gateway. The signature (HMAC-SHA256 of the raw body with
   * SMS_WEBHOOK_SECRET, header X-Signature) is checked before anything else: 401 when it is missing
   * or wrong. The message is found by `reference` (our Idempotency-Key) or the gateway's `id`; a
   * report for an earlier send of the message, or one that would move it backwards, is acknowledged
   * and ignored.
   */
  async deliveryReport(rawBody: Buffer | undefined, signature: unknown, body: unknown): Promise<{ accepted: boolean; status: TextMessageStatus | null }> {
    if (!verifySignature(this.config.smsWebhookSecret, rawBody, signature)) {
      throw new AppError('unauthorized', 'The delivery report is not signed with the webhook secret (X-Signature: sha256=<hex HMAC-SHA256 of the body>)');
    }
    const b = (body ?? {}) as Record<string, unknown>;
    const status = b.status === 'undelivered' ? 'failed' : b.status;
    const ref = parseIdempotencyKey(b.reference);
    const providerId = typeof b.id === 'string' || typeof b.id === 'number' ? String(b.id) : null;
    if (typeof b.status !== 'string') throw fieldError('status', 'is required');
    if (!ref && !providerId) throw fieldError('reference', 'reference (the Idempotency-Key) or id (the gateway message id) is required');
    if (status !== 'delivered' && status !== 'failed') return { accepted: false, status: null };
    const at = typeof b.timestamp === 'string' ? (parseIsoWithOffset(b.timestamp) ?? new Date()) : new Date();
    const reason = typeof b.error === 'string' ? b.error.slice(0, 500) : null;

    return this.db.transaction(async (m) => {
      const rows: { id: number; status: TextMessageStatus; send_count: number; claim_token: string | null; failure_code: TextMessage['failureCode']; created_by: number | null; recipient: string }[] =
        ref
          ? await m.query(`SELECT id, status, send_count, claim_token, failure_code, created_by, recipient FROM text_messages WHERE id = $1 FOR UPDATE`, [ref.messageId])
          : await m.query(
              `SELECT id, status, send_count, claim_token, failure_code, created_by, recipient FROM text_messages WHERE provider = 'http' AND provider_message_id = $1 FOR UPDATE`,
              [providerId],
            );
      const t = rows[0];
      if (!t || (ref && ref.sendCount !== t.send_count)) return { accepted: false, status: t?.status ?? null };
      const next = deliveryTransition({ status: t.status, claimed: t.claim_token !== null, failureCode: t.failure_code }, status);
      if (!next) return { accepted: false, status: t.status };
      if (next !== 'delivered' && next !== 'failed') return { accepted: false, status: t.status };
      await this.applyDelivery(m, t.id, next, at, reason);
      if (next === 'failed' && t.created_by !== null) {
        await this.notifications.notify(t.created_by, 'sms_failed', `The text message to ${t.recipient} was not delivered${reason ? `: ${reason}` : ''}`, { textMessageId: t.id, reason }, m);
      }
      return { accepted: true, status: next };
    });
  }

  /** Writes a delivery outcome (shared by delivery reports and providers that report at once). */
  async applyDelivery(m: EntityManager, id: number, next: 'delivered' | 'failed', at: Date, reason: string | null): Promise<void> {
    if (next === 'delivered') {
      await m.query(
        `UPDATE text_messages SET status = 'delivered', delivered_at = $2, sent_at = coalesce(sent_at, $2),
           failed_at = NULL, failure_code = NULL, failure_reason = NULL, claim_token = NULL, claimed_at = NULL WHERE id = $1`,
        [id, at],
      );
    } else {
      await m.query(
        `UPDATE text_messages SET status = 'failed', failed_at = $2, failure_code = 'delivery_failed', failure_reason = $3,
           claim_token = NULL, claimed_at = NULL WHERE id = $1`,
        [id, at, reason ?? 'the gateway reported the message undelivered'],
      );
    }
  }
}
