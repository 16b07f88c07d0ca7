import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, QueryFailedError, Repository } from 'typeorm';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { rejectNulls } from '../deals/deal.rules.js';
import { Activity } from './activity.entity.js';
import { CreateActivityDto, UpdateActivityDto } from './activity.dto.js';
import { ACTIVITY_TYPES } from './activity.rules.js';

export const ACTIVITY_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'a.id',
    type: 'a.type',
    subject: 'a.subject',
    contact_id: 'a.contact_id',
    due_date: 'a.due_date',
    notes: 'a.notes',
    outcome: 'a.outcome',
    createdAt: 'a.created_at',
    modifiedAt: 'a.modified_at',
  },
  // Same expression as the activities_search_trgm index.
  searchExpression: 'sf_text(a.subject, a.notes, a.outcome)',
  filters: {
    type: { type: 'string', column: 'a.type', values: ACTIVITY_TYPES },
    contact_id: { type: 'int', column: 'a.contact_id' },
  },
};

export type ActivityRecord = ReturnType<ActivitiesService['toRecord']>;

@Injectable()
export class ActivitiesService {
  constructor(
    @InjectRepository(Activity) private readonly activities: Repository<Activity>,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  toRecord(a: Activity) {
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

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, ACTIVITY_LIST_SPEC);
    const { total, items } = await paginate(this.activities.createQueryBuilder('a'), q, ACTIVITY_LIST_SPEC);
    return { total, activities: items.map((a) => this.toRecord(a)) };
  }

  private async findEntity(id: number): Promise<Activity> {
    const a = await this.activities.findOne({ where: { id } });
    if (!a) throw notFound('Activity', id);
    return a;
  }

  async get(id: number): Promise<ActivityRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreateActivityDto, who: Principal): Promise<ActivityRecord> {
    const a = this.activities.create();
    this.assign(a, dto, true);
    stampCreated(a, who);
    return this.persist(a, null);
  }

  async patch(id: number, dto: UpdateActivityDto, who: Principal): Promise<ActivityRecord> {
    rejectNulls(dto, ['type', 'subject', 'contact_id']);
    const a = await this.findEntity(id);
    const previousContact = a.contactId;
    this.assign(a, dto, false);
    stampModified(a, who);
    return this.persist(a, previousContact);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset to null), else a new activity. */
  async put(id: number, dto: CreateActivityDto, who: Principal): Promise<{ created: boolean; activity: ActivityRecord }> {
    const existing = await this.activities.findOne({ where: { id } });
    if (!existing) return { created: true, activity: await this.create(dto, who) };
    const previousContact = existing.contactId;
    this.assign(existing, dto, true);
    stampModified(existing, who);
    return { created: false, activity: await this.persist(existing, previousContact) };
  }

  async remove(id: number): Promise<ActivityRecord> {
    const a = await this.findEntity(id);
    const record = this.toRecord(a);
    await this.activities.delete({ id });
    return record;
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to null. */
  private assign(a: Activity, dto: UpdateActivityDto, replace: boolean) {
    const given = <K extends keyof UpdateActivityDto>(k: K) => dto[k] !== undefined || replace;
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

  private async persist(a: Activity, previousContact: number | null): Promise<ActivityRecord> {
    if (previousContact !== a.contactId) {
      const rows: unknown[] = await this.db.query(`SELECT 1 FROM contacts WHERE id = $1`, [a.contactId]);
      if (!rows.length) throw fieldError('contact_id', `contact ${a.contactId} does not exist`);
    }
    try {
      const saved = await this.activities.save(a);
      return this.get(saved.id);
    } catch (e) {
      // The contact was deleted between the check and the write.
      const pg = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
      if (e instanceof QueryFailedError && pg?.code === '23503' && pg.constraint === 'activities_contact_id_fkey') {
        throw fieldError('contact_id', `contact ${a.contactId} does not exist`);
      }
      throw e;
    }
  }
}
