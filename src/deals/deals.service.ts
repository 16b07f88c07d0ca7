import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, QueryFailedError, Repository } from 'typeorm';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { Deal } from './deal.entity.js';
import { CreateDealDto, UpdateDealDto } from './deal.dto.js';
import { DEAL_STATUSES, DEFAULT_DEAL_QUANTITY, DEFAULT_DEAL_STATUS, rejectNulls, resolveClosedAt } from './deal.rules.js';

export const DEAL_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'd.id',
    title: 'd.title',
    value: 'd.value',
    contact_id: 'd.contact_id',
    expected_close_date: 'd.expected_close_date',
    stage: 'd.stage',
    probability: 'd.probability',
    status: 'd.status',
    product: 'd.product',
    quantity: 'd.quantity',
    closed_at: 'd.closed_at',
    owner_id: 'd.owner_id',
    createdAt: 'd.created_at',
    modifiedAt: 'd.modified_at',
  },
  // Same expression as the deals_search_trgm index.
  searchExpression: 'sf_text(d.title, d.stage, d.product)',
  filters: {
    status: { type: 'string', column: 'd.status', values: DEAL_STATUSES },
    contact_id: { type: 'int', column: 'd.contact_id' },
    owner_id: { type: 'int', column: 'd.owner_id' },
  },
};

export type DealRecord = ReturnType<DealsService['toRecord']>;

@Injectable()
export class DealsService {
  constructor(
    @InjectRepository(Deal) private readonly deals: Repository<Deal>,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  toRecord(d: Deal) {
    return {
      id: d.id,
      title: d.title,
      value: Number(d.value),
      contact_id: d.contactId,
      expected_close_date: d.expectedCloseDate,
      stage: d.stage,
      probability: d.probability,
      status: d.status,
      product: d.product,
      quantity: d.quantity,
      closed_at: iso(d.closedAt),
      owner_id: d.ownerId,
      ...auditOut(d),
    };
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, DEAL_LIST_SPEC);
    const { total, items } = await paginate(this.deals.createQueryBuilder('d'), q, DEAL_LIST_SPEC);
    return { total, deals: items.map((d) => this.toRecord(d)) };
  }

  private async findEntity(id: number): Promise<Deal> {
    const d = await this.deals.findOne({ where: { id } });
    if (!d) throw notFound('Deal', id);
    return d;
  }

  async get(id: number): Promise<DealRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreateDealDto, who: Principal): Promise<DealRecord> {
    const d = this.deals.create();
    this.assign(d, dto, null, true, who);
    stampCreated(d, who);
    return this.persist(d, null);
  }

  async patch(id: number, dto: UpdateDealDto, who: Principal): Promise<DealRecord> {
    rejectNulls(dto, ['title', 'value', 'contact_id']);
    const d = await this.findEntity(id);
    const before = { contactId: d.contactId, ownerId: d.ownerId };
    this.assign(d, dto, { status: d.status, closedAt: d.closedAt }, false, who);
    stampModified(d, who);
    return this.persist(d, before);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset to defaults), else a new deal. */
  async put(id: number, dto: CreateDealDto, who: Principal): Promise<{ created: boolean; deal: DealRecord }> {
    const existing = await this.deals.findOne({ where: { id } });
    if (!existing) return { created: true, deal: await this.create(dto, who) };
    const before = { contactId: existing.contactId, ownerId: existing.ownerId };
    this.assign(existing, dto, { status: existing.status, closedAt: existing.closedAt }, true, who);
    stampModified(existing, who);
    return { created: false, deal: await this.persist(existing, before) };
  }

  async remove(id: number): Promise<DealRecord> {
    const d = await this.findEntity(id);
    const record = this.toRecord(d);
    await this.deals.delete({ id });
    return record;
  }

  /**
   * Copies DTO values onto the entity. With `replace` (create, PUT) omitted optional properties are
   * reset to their defaults: status open, quantity 1, owner the calling user, the others null.
   */
  private assign(d: Deal, dto: UpdateDealDto, previous: { status: Deal['status']; closedAt: Date | null } | null, replace: boolean, who: Principal) {
    const given = <K extends keyof UpdateDealDto>(k: K) => dto[k] !== undefined || replace;
    if (dto.title !== undefined && dto.title !== null) {
      d.title = dto.title.trim();
      if (d.title === '') throw fieldError('title', 'must not be empty');
    }
    if (dto.value !== undefined && dto.value !== null) d.value = dto.value;
    if (dto.contact_id !== undefined && dto.contact_id !== null) d.contactId = dto.contact_id;
    if (given('expected_close_date')) d.expectedCloseDate = dto.expected_close_date ?? null;
    if (given('stage')) d.stage = dto.stage ?? null;
    if (given('probability')) d.probability = dto.probability ?? null;
    if (given('status')) d.status = dto.status ?? DEFAULT_DEAL_STATUS;
    if (given('product')) d.product = dto.product ?? null;
    if (given('quantity')) d.quantity = dto.quantity ?? DEFAULT_DEAL_QUANTITY;
    if (dto.owner_id !== undefined) d.ownerId = dto.owner_id;
    else if (replace) d.ownerId = who.userId;
    const supplied = dto.closed_at === undefined ? undefined : dto.closed_at === null ? null : parseIsoWithOffset(dto.closed_at);
    d.closedAt = resolveClosedAt({ previous, status: d.status, supplied, now: new Date() });
  }

  /** Checks the referenced contact and owner (when they changed), saves, and answers the stored record. */
  private async persist(d: Deal, before: { contactId: number; ownerId: number | null } | null): Promise<DealRecord> {
    if (!before || before.contactId !== d.contactId) await this.ensureExists('contacts', d.contactId, 'contact_id', 'contact');
    if (d.ownerId !== null && (!before || before.ownerId !== d.ownerId)) await this.ensureExists('users', d.ownerId, 'owner_id', 'user');
    try {
      const saved = await this.deals.save(d);
      return this.get(saved.id);
    } catch (e) {
      // The contact or owner was deleted between the check and the write.
      const pg = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
      if (e instanceof QueryFailedError && pg?.code === '23503') {
        if (pg.constraint === 'deals_contact_id_fkey') throw fieldError('contact_id', `contact ${d.contactId} does not exist`);
        if (pg.constraint === 'deals_owner_id_fkey') throw fieldError('owner_id', `user ${d.ownerId} does not exist`);
      }
      throw e;
    }
  }

  private async ensureExists(table: 'contacts' | 'users', id: number, field: string, what: string): Promise<void> {
    const rows: unknown[] = await this.db.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id]);
    if (!rows.length) throw fieldError(field, `${what} ${id} does not exist`);
  }
}
