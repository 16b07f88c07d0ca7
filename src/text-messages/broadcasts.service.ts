import { Inject, Injectable, Logger } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { jobCredentialOf } from '../auth/tokens.service.js';
import { AppError, conflict, fieldError, notFound, unavailable } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { Broadcast } from './broadcast.entity.js';
import { CreateBroadcastDto, UpdateBroadcastDto } from './broadcast.dto.js';
import { SegmentsService } from '../segments/segments.service.js';
import { audienceSql, BROADCAST_LIST_SPEC, BroadcastsRepository } from './broadcasts.repository.js';
import { MergeFieldError, parseTemplate, templateAliases, templateSql } from './merge-fields.js';
import { BroadcastMessagesRepository, SKIP_REASONS } from './broadcast-messages.repository.js';
import { missingReferenceMessage } from '../common/documented-rules.js';

const MESSAGE_STATUSES = ['queued', 'sent', 'delivered', 'failed', 'canceled'] as const;

export type BroadcastRecord = Awaited<ReturnType<BroadcastsService['toRecords']>>[number];

/** How long a send waits for a segment that is being rebuilt (Retry-After, and the scheduled start's retry). */
export const AUDIENCE_RETRY_SECONDS = 5;

/** A send refused while the audience's dynamic segment is rebuilt for a changed filter (409, Retry-After); a scheduled start waits and retries. */
export class AudienceNotReady extends AppError {
  constructor(segmentId: number) {
    super('conflict', `Segment ${segmentId} is being rebuilt for its current filter; send when its membership is ready`, undefined, {
      'Retry-After': String(AUDIENCE_RETRY_SECONDS),
    });
  }
}

/**
 * Broadcasts: one content with merge fields to an audience. `send` resolves the audience at that
 * moment and creates one queued text message per recipient in one statement; the `sms.broadcast`
 * jobs (broadcasts.processor.ts) hand them to the provider in batches.
 *
 *   draft ──send──▶ sending ──all messages out of queued──▶ completed
 *   draft ──edit with scheduledFor──▶ scheduled ──due (worker)──▶ sending
 *   draft | scheduled | sending ──cancel──▶ canceled (queued, unclaimed messages end canceled)
 *   scheduled | sending ──the token it acts for revoked, deleted or expired (worker)──▶ canceled (the same)
 */
@Injectable()
export class BroadcastsService {
  private readonly logger = new Logger('Broadcasts');

  constructor(
    private readonly broadcasts: BroadcastsRepository,
    private readonly messages: BroadcastMessagesRepository,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    private readonly events: EventsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly segments: SegmentsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async toRecords(list: Broadcast[], tx?: Tx) {
    const counts = await this.messages.broadcastCounts(
      list.map((b) => b.id),
      tx,
    );
    return list.map((b) => {
      const c = counts.get(b.id) ?? {};
      return {
        id: b.id,
        name: b.name,
        content: b.content,
        audience: b.audience,
        status: b.status,
        scheduledFor: iso(b.scheduledFor),
        startedAt: iso(b.startedAt),
        completedAt: iso(b.completedAt),
        canceledAt: iso(b.canceledAt),
        recipients: b.recipients,
        counts: Object.fromEntries(MESSAGE_STATUSES.map((s) => [s, c[s] ?? 0])) as Record<(typeof MESSAGE_STATUSES)[number], number>,
        skipped: Object.fromEntries(SKIP_REASONS.map((r) => [r, b.skipped[r] ?? 0])) as Record<(typeof SKIP_REASONS)[number], number>,
        ...auditOut(b),
      };
    });
  }

  private async record(b: Broadcast, tx?: Tx): Promise<BroadcastRecord> {
    return (await this.toRecords([b], tx))[0];
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, BROADCAST_LIST_SPEC);
    const page = await this.broadcasts.list(q);
    return listEnvelope(q, 'broadcasts', page, await this.toRecords(page.items));
  }

  private async find(id: number, tx?: Tx): Promise<Broadcast> {
    const b = tx ? await this.broadcasts.findForUpdate(id, tx) : await this.broadcasts.findById(id);
    if (!b) throw notFound('Broadcast', id);
    return b;
  }

  async get(id: number): Promise<BroadcastRecord> {
    return this.record(await this.find(id));
  }

  async create(dto: CreateBroadcastDto, who: Principal): Promise<BroadcastRecord> {
    await this.validate(dto);
    return this.transactions.run(async (tx) => {
      const b = new Broadcast();
      b.status = 'draft';
      b.skipped = {};
      b.recipients = null;
      this.assign(b, dto, true);
      stampCreated(b, who);
      return this.save(b, null, tx, who);
    });
  }

  async patch(id: number, dto: UpdateBroadcastDto, who: Principal): Promise<BroadcastRecord> {
    await this.validate(dto);
    return this.transactions.run(async (tx) => {
      const b = await this.find(id, tx);
      this.assertEditable(b);
      const before = await this.record(b, tx);
      this.assign(b, dto, false);
      stampModified(b, who);
      return this.save(b, before, tx, who);
    });
  }

  async put(id: number, dto: CreateBroadcastDto, who: Principal): Promise<{ created: boolean; broadcast: BroadcastRecord }> {
    if (!(await this.broadcasts.exists(id))) return { created: true, broadcast: await this.create(dto, who) };
    await this.validate(dto);
    const broadcast = await this.transactions.run(async (tx) => {
      const b = await this.find(id, tx);
      this.assertEditable(b);
      const before = await this.record(b, tx);
      this.assign(b, dto, true);
      stampModified(b, who);
      return this.save(b, before, tx, who);
    });
    return { created: false, broadcast };
  }

  /** Deletes a broadcast that is not sending (409: cancel it first); its messages stay, without broadcastId. */
  async remove(id: number): Promise<BroadcastRecord> {
    return this.transactions.run(async (tx) => {
      const b = await this.broadcasts.findForUpdate(id, tx);
      if (!b) throw notFound('Broadcast', id);
      if (b.status === 'sending') throw conflict(`Broadcast ${id} is sending; cancel it before deleting it`);
      const record = await this.record(b, tx);
      // The row, then its messages in id order, then the DELETE: see BroadcastsRepository.findForUpdate.
      await this.messages.detachFromBroadcast(id, tx);
      await this.broadcasts.delete(id, tx);
      await this.events.record(tx, 'broadcast.deleted', record);
      return record;
    });
  }

  /**
   * Sends now (from draft or scheduled; 409 otherwise, so of two concurrent sends one gets 202 and
   * the other 409): resolves the audience and creates the messages in this transaction, then queues
   * the sending jobs. 503 (nothing changed) when the job queue is unreachable.
   */
  async send(id: number, who: Principal): Promise<BroadcastRecord> {
    if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the broadcast was not sent. Try again shortly.');
    const record = await this.transactions.run(async (tx) => {
      const b = await this.find(id, tx);
      if (b.status !== 'draft' && b.status !== 'scheduled') throw conflict(`Broadcast ${id} is ${b.status}; only draft or scheduled broadcasts can be sent`);
      return this.start(b, tx, who);
    });
    await this.queueLanes(id);
    return record;
  }

  /** Starts a scheduled broadcast that is due (the worker's start job); false when it is not (any more). */
  async startScheduled(id: number): Promise<boolean> {
    const started = await this.transactions.run(async (tx) => {
      const b = await this.broadcasts.findForUpdate(id, tx);
      if (!b || b.status !== 'scheduled' || (b.scheduledFor && b.scheduledFor.getTime() > Date.now() + 1000)) return false;
      await this.start(b, tx, null);
      return true;
    });
    if (started) await this.queueLanes(id);
    return started;
  }

  /** Resolves the audience and creates the messages (one statement); `sending`, or `completed` at once when nobody is left. */
  private async start(b: Broadcast, tx: Tx, who: Principal | null): Promise<BroadcastRecord> {
    const before = await this.record(b, tx);
    if ('segmentId' in b.audience) {
      const state = await this.segments.audienceState(b.audience.segmentId, tx);
      if (state === 'missing') throw conflict(`Broadcast ${b.id}'s audience, segment ${b.audience.segmentId}, no longer exists; change the audience`);
      if (state === 'building') throw new AudienceNotReady(b.audience.segmentId);
    }
    const params: unknown[] = [];
    const audience = audienceSql(b.audience, params);
    const content = templateSql(parseTemplate(b.content), 'c', params);
    const { created, skipped } = await this.messages.insertForBroadcast(
      {
        broadcastId: b.id,
        campaignId: 'campaignId' in b.audience ? b.audience.campaignId : null,
        audienceSql: audience,
        contentSql: content,
        params,
        userId: who?.userId ?? b.createdBy,
        userName: who?.userName ?? b.createdByUser,
      },
      tx,
    );
    b.status = created > 0 ? 'sending' : 'completed';
    b.startedAt = new Date();
    if (created === 0) b.completedAt = new Date();
    b.recipients = created;
    b.skipped = skipped;
    if (who) {
      stampModified(b, who);
      actFor(b, who);
    } else b.modifiedAt = new Date();
    await this.broadcasts.update(b.id, b, tx);
    const after = await this.record(b, tx);
    await this.events.record(tx, 'broadcast.sending', after, { status: before.status });
    if (created === 0) await this.events.record(tx, 'broadcast.completed', after, { status: 'sending' });
    this.logger.log({ msg: 'broadcast started', broadcastId: b.id, recipients: created, skipped });
    return after;
  }

  /** Queues the sending jobs of a broadcast (one per lane; a lane's job that still exists is not added twice). */
  async queueLanes(id: number): Promise<void> {
    for (let lane = 0; lane < this.config.smsBroadcastLanes; lane++) {
      await this.jobs.enqueue('sms.broadcast', { broadcastId: id, lane }, { jobId: JOB_IDS.broadcastLane(id, lane) });
    }
  }

  /**
   * Cancels a draft, scheduled or sending broadcast (409 when completed or canceled): its queued
   * messages that no worker has claimed end `canceled` (failureCode canceled); those a worker has
   * already claimed are being handed to the provider and finish normally.
   */
  async cancel(id: number, who: Principal): Promise<BroadcastRecord> {
    return this.transactions.run(async (tx) => {
      const b = await this.find(id, tx);
      if (b.status === 'completed' || b.status === 'canceled') throw conflict(`Broadcast ${id} is ${b.status}; it cannot be canceled`);
      const before = await this.record(b, tx);
      b.status = 'canceled';
      b.canceledAt = new Date();
      stampModified(b, who);
      await this.broadcasts.update(b.id, b, tx);
      const n = await this.messages.cancelQueuedOfBroadcast(b.id, tx);
      const after = await this.record(b, tx);
      await this.events.record(tx, 'broadcast.canceled', after, { status: before.status });
      this.logger.log({ msg: 'broadcast canceled', broadcastId: id, canceledMessages: n });
      return after;
    });
  }

  /**
   * Cancels a sending or scheduled broadcast because the token it acts for is no longer valid
   * (`reason`): like a cancel, its unclaimed queued messages end `canceled` (their failureReason says
   * why), with broadcast.canceled. False when it was neither sending nor scheduled any more.
   */
  async cancelForEndedCredential(id: number, reason: string): Promise<boolean> {
    const done = await this.transactions.run(async (tx) => {
      const b = await this.broadcasts.findForUpdate(id, tx);
      if (!b || (b.status !== 'sending' && b.status !== 'scheduled')) return null;
      const before = await this.record(b, tx);
      b.status = 'canceled';
      b.canceledAt = new Date();
      b.modifiedAt = new Date();
      await this.broadcasts.update(b.id, b, tx);
      const n = await this.messages.cancelQueuedOfBroadcast(b.id, tx, `the broadcast was canceled: ${reason}`);
      await this.events.record(tx, 'broadcast.canceled', await this.record(b, tx), { status: before.status });
      return n;
    });
    if (done === null) return false;
    this.logger.warn({ msg: 'broadcast canceled: the token it acts for is no longer valid', broadcastId: id, reason, canceledMessages: done });
    return true;
  }

  /** Marks a sending broadcast completed once none of its messages is queued (broadcast.completed). */
  async completeIfDone(id: number): Promise<boolean> {
    return this.transactions.run(async (tx) => {
      const done = await this.broadcasts.completeIfDone(id, tx);
      const b = done ? await this.broadcasts.findById(id, tx) : null;
      if (b) await this.events.record(tx, 'broadcast.completed', await this.record(b, tx), { status: 'sending' });
      return done;
    });
  }

  private assertEditable(b: Broadcast) {
    if (b.status !== 'draft' && b.status !== 'scheduled') throw conflict(`Broadcast ${b.id} is ${b.status}; only draft or scheduled broadcasts can be edited`);
  }

  /** Saves; a (new) scheduledFor makes it `scheduled` and queues its start job, none makes it a draft again. */
  private async save(b: Broadcast, before: BroadcastRecord | null, tx: Tx, who: Principal): Promise<BroadcastRecord> {
    b.status = b.scheduledFor ? 'scheduled' : 'draft';
    // A scheduled broadcast is sent by the worker for the token that scheduled it.
    actFor(b, who);
    let saved: Broadcast;
    if (b.id !== undefined) {
      await this.broadcasts.update(b.id, b, tx);
      saved = b;
    } else saved = await this.broadcasts.insert(b, tx);
    if (b.scheduledFor) {
      if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the broadcast was not scheduled. Try again shortly.');
      await this.jobs.enqueue(
        'sms.broadcast',
        { broadcastId: saved.id, lane: 0 },
        { jobId: JOB_IDS.broadcastStart(saved.id, b.scheduledFor.getTime()), delayMs: b.scheduledFor.getTime() - Date.now() },
      );
    }
    const record = await this.record(saved, tx);
    if (!before) await this.events.record(tx, 'broadcast.created', record);
    else await this.events.recordUpdate(tx, 'broadcast.updated', before, record);
    return record;
  }

  /** Checks the audience shape and the merge fields (400 naming what is wrong). */
  private async validate(dto: UpdateBroadcastDto) {
    if (dto.content !== undefined) {
      if (dto.content.trim() === '') throw fieldError('content', 'must not be blank');
      let aliases: string[];
      try {
        aliases = templateAliases(parseTemplate(dto.content));
      } catch (e) {
        if (e instanceof MergeFieldError) throw fieldError('content', e.message);
        throw e;
      }
      if (aliases.length) {
        const published = new Set((await this.fieldValues.publishedRules()).map((r) => r.alias));
        const unknown = aliases.filter((a) => !published.has(a));
        if (unknown.length)
          throw fieldError('content', `has an unknown merge field {{contact.fields.${unknown[0]}}}: no published contact field has that alias`);
      }
    }
    if (dto.audience !== undefined) {
      const a = dto.audience;
      const given = [a.campaignId, a.segmentId, a.contactIds].filter((v) => v !== undefined && v !== null).length;
      if (given !== 1) throw fieldError('audience', 'must have exactly one of campaignId, segmentId or contactIds');
      if (a.segmentId !== undefined && a.segmentId !== null && (await this.segments.audienceState(a.segmentId)) === 'missing') {
        throw fieldError('audience.segmentId', missingReferenceMessage('segment', a.segmentId));
      }
      if (a.campaignId !== undefined && a.campaignId !== null && !(await this.broadcasts.campaignExists(a.campaignId))) {
        throw fieldError('audience.campaignId', missingReferenceMessage('campaign', a.campaignId));
      }
    }
  }

  private assign(b: Broadcast, dto: UpdateBroadcastDto, replace: boolean) {
    if (dto.content === null) throw fieldError('content', 'must not be null');
    if (dto.audience === null) throw fieldError('audience', 'must not be null');
    if (dto.content !== undefined) b.content = dto.content;
    if (dto.audience !== undefined) {
      const a = dto.audience;
      b.audience =
        a.campaignId !== undefined
          ? { campaignId: a.campaignId }
          : a.segmentId !== undefined
            ? { segmentId: a.segmentId }
            : { contactIds: [...new Set(a.contactIds ?? [])] };
    }
    if (dto.name !== undefined || replace) b.name = dto.name?.trim() ? dto.name.trim() : null;
    if (dto.scheduledFor !== undefined || replace) b.scheduledFor = dto.scheduledFor ? parseIsoWithOffset(dto.scheduledFor) : null;
  }
}

/** Records the token a broadcast's sending acts for (none for a console session). */
function actFor(b: Broadcast, who: Principal): void {
  const c = jobCredentialOf(who);
  b.apiTokenId = c?.apiTokenId ?? null;
  b.accessTokenId = c?.accessTokenId ?? null;
}
