import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound, rejectNulls } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { assertBatchPermission, type BatchAnswer, BatchRunner } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { ACTIVITY_LIST_SPEC, ActivitiesRepository } from './activities.repository.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */
import { Activity } from './activity.entity.js';
import { CreateActivityDto, UpdateActivityDto } from './activity.dto.js';

/** An activity as the API returns it (the one mapper from row to record). */
export function toActivityRecord(a: Activity) {
  return {
    id: a.id,
    type: a.type,
    subject: a.subject,
    contact_id: a.contactId,
    due_date: iso(a.dueDate),
    notes: a.notes,
    outcome: a.outcome,
    ...auditOut(a),
  };
}

export type ActivityRecord = ReturnType<typeof toActivityRecord>;

/**
 * Activities. contact_id is checked by its foreign key when written (a missing contact is a 400
 * naming contact_id, translated by the constraint registry), not by a SELECT that could race.
 */
@Injectable()
export class ActivitiesService {
  constructor(
    private readonly activities: ActivitiesRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly batches: BatchRunner,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, ACTIVITY_LIST_SPEC);
    const page = await this.activities.list(q);
    return listEnvelope(q, 'activities', page, page.items.map(toActivityRecord));
  }

  async get(id: number, tx?: Tx): Promise<ActivityRecord> {
    const a = await this.activities.findRecord(id, tx);
    if (!a) throw notFound('Activity', id);
    return toActivityRecord(a);
  }

  async create(dto: CreateActivityDto, who: Principal, tx?: Tx): Promise<ActivityRecord> {
    const a = this.activities.create();
    this.assign(a, dto, true);
    stampCreated(a, who);
    return this.transactions.run(async (t) => {
      const record = await this.get(await this.activities.save(a, t), t);
      await this.events.record(t, 'activity.created', record);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (parallel edits all land). */
  async patch(id: number, dto: UpdateActivityDto, who: Principal, outer?: Tx): Promise<ActivityRecord> {
    rejectNulls(dto, ['type', 'subject', 'contact_id']);
    return this.transactions.run(async (tx) => {
      const a = await this.activities.findForUpdate(id, tx);
      if (!a) throw notFound('Activity', id);
      const before = toActivityRecord(a);
      this.assign(a, dto, false);
      stampModified(a, who);
      const after = await this.get(await this.activities.save(a, tx), tx);
      await this.events.recordUpdate(tx, 'activity.updated', before, after);
      return after;
    }, outer);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset to null), else a new activity. */
  async put(id: number, dto: CreateActivityDto, who: Principal): Promise<{ created: boolean; activity: ActivityRecord }> {
    return this.transactions.run(async (tx) => {
      const a = await this.activities.findForUpdate(id, tx);
      if (!a) return { created: true, activity: await this.create(dto, who, tx) };
      const before = toActivityRecord(a);
      this.assign(a, dto, true);
      stampModified(a, who);
      const after = await this.get(await this.activities.save(a, tx), tx);
      await this.events.recordUpdate(tx, 'activity.updated', before, after);
      return { created: false, activity: after };
    });
  }

  /** Deletes the activity; one of parallel deletes succeeds, the others are 404s. */
  async remove(id: number, outer?: Tx): Promise<ActivityRecord> {
    return this.transactions.run(async (tx) => {
      const a = await this.activities.findForUpdate(id, tx);
      if (!a || !(await this.activities.delete(id, tx))) throw notFound('Activity', id);
      const record = toActivityRecord(a);
      await this.events.record(tx, 'activity.deleted', record);
      return record;
    }, outer);
  }

  /** `POST /api/activities/batch`: up to 500 creates, updates, upserts (PUT-like) or deletes by id, each as its single-record route. */
  batch(dto: BatchWriteDto, who: Principal): Promise<BatchAnswer> {
    assertBatchPermission(dto, who, 'activities:delete');
    return this.batches.runById(dto, {
      createDto: CreateActivityDto,
      updateDto: UpdateActivityDto,
      create: (body, tx) => this.create(body as CreateActivityDto, who, tx),
      patch: (id, body, tx) => this.patch(id, body, who, tx),
      remove: (id, tx) => this.remove(id, tx),
    });
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to null. */
  private assign(a: Activity, dto: UpdateActivityDto, replace: boolean) {
    const given = (k: keyof UpdateActivityDto) => dto[k] !== undefined || replace;
    if (dto.type !== undefined && dto.type !== null) a.type = dto.type;
    if (dto.subject !== undefined && dto.subject !== null) {
      a.subject = dto.subject.trim();
      if (a.subject === '') throw fieldError('subject', 'must not be empty');
    }
    if (dto.contact_id !== undefined && dto.contact_id !== null) a.contactId = dto.contact_id;
    if (given('due_date')) a.dueDate = dto.due_date ? parseIsoWithOffset(dto.due_date) : null;
    if (given('notes')) a.notes = dto.notes ?? null;
    if (given('outcome')) a.outcome = dto.outcome ?? null;
  }
}
