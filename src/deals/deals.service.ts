import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { assertBatchPermission, type BatchAnswer, BatchRunner } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { Deal } from './deal.entity.js';
import { CreateDealDto, UpdateDealDto } from './deal.dto.js';
import { DEFAULT_DEAL_QUANTITY, DEFAULT_DEAL_STATUS, rejectNulls, resolveClosedAt } from './deal.rules.js';
import { DEAL_LIST_SPEC, DealsRepository } from './deals.repository.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */

/** A deal as the API returns it (the one mapper from row to record). */
export function toDealRecord(d: Deal) {
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
    company_id: d.companyId,
    ...auditOut(d),
  };
}

export type DealRecord = ReturnType<typeof toDealRecord>;

/**
 * Deals. contact_id and owner_id are checked by their foreign keys when written (a missing one is
 * a 400 naming the field, translated by the constraint registry), not by a SELECT that could race.
 */
@Injectable()
export class DealsService {
  constructor(
    private readonly deals: DealsRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly batches: BatchRunner,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, DEAL_LIST_SPEC);
    const page = await this.deals.list(q);
    return listEnvelope(q, 'deals', page, page.items.map(toDealRecord));
  }

  async get(id: number, tx?: Tx): Promise<DealRecord> {
    const d = await this.deals.findRecord(id, tx);
    if (!d) throw notFound('Deal', id);
    return toDealRecord(d);
  }

  async create(dto: CreateDealDto, who: Principal, tx?: Tx): Promise<DealRecord> {
    const d = this.deals.create();
    this.assign(d, dto, null, true, who);
    stampCreated(d, who);
    return this.transactions.run(async (t) => {
      const record = await this.get(await this.deals.save(d, t), t);
      await this.events.record(t, 'deal.created', record);
      await this.recordTransitions(t, null, record);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (parallel edits all land). */
  async patch(id: number, dto: UpdateDealDto, who: Principal, outer?: Tx): Promise<DealRecord> {
    rejectNulls(dto, ['title', 'value', 'contact_id']);
    return this.transactions.run(async (tx) => {
      // A company set here is locked before the deal, the order a company's deletion takes them in (no deadlock).
      if (typeof dto.company_id === 'number') await this.deals.lockCompanyReference(dto.company_id, tx);
      const d = await this.deals.findForUpdate(id, tx);
      if (!d) throw notFound('Deal', id);
      const before = toDealRecord(d);
      this.assign(d, dto, { status: d.status, closedAt: d.closedAt }, false, who);
      stampModified(d, who);
      const after = await this.get(await this.deals.save(d, tx), tx);
      await this.events.recordUpdate(tx, 'deal.updated', before, after);
      await this.recordTransitions(tx, before, after);
      return after;
    }, outer);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset to defaults), else a new deal. */
  async put(id: number, dto: CreateDealDto, who: Principal): Promise<{ created: boolean; deal: DealRecord }> {
    return this.transactions.run(async (tx) => {
      // A company set here is locked before the deal, the order a company's deletion takes them in (no deadlock).
      if (typeof dto.company_id === 'number') await this.deals.lockCompanyReference(dto.company_id, tx);
      const d = await this.deals.findForUpdate(id, tx);
      if (!d) return { created: true, deal: await this.create(dto, who, tx) };
      const before = toDealRecord(d);
      this.assign(d, dto, { status: d.status, closedAt: d.closedAt }, true, who);
      stampModified(d, who);
      const after = await this.get(await this.deals.save(d, tx), tx);
      await this.events.recordUpdate(tx, 'deal.updated', before, after);
      await this.recordTransitions(tx, before, after);
      return { created: false, deal: after };
    });
  }

  /** Deletes the deal; one of parallel deletes succeeds, the others are 404s. */
  async remove(id: number, outer?: Tx): Promise<DealRecord> {
    return this.transactions.run(async (tx) => {
      const d = await this.deals.findForUpdate(id, tx);
      if (!d || !(await this.deals.delete(id, tx))) throw notFound('Deal', id);
      const record = toDealRecord(d);
      await this.events.record(tx, 'deal.deleted', record);
      return record;
    }, outer);
  }

  /** `POST /api/deals/batch`: up to 500 creates, updates, upserts (PUT-like) or deletes by id, each as its single-record route. */
  batch(dto: BatchWriteDto, who: Principal, outer?: Tx): Promise<BatchAnswer> {
    assertBatchPermission(dto, who, 'deals:delete');
    return this.batches.runById(
      dto,
      {
        createDto: CreateDealDto,
        updateDto: UpdateDealDto,
        create: (body, tx) => this.create(body as CreateDealDto, who, tx),
        patch: (id, body, tx) => this.patch(id, body, who, tx),
        remove: (id, tx) => this.remove(id, tx),
      },
      outer,
    );
  }

  /**
   * Detaches every deal of a company being deleted, in the caller's transaction (the company is
   * locked): company_id becomes null and each deal gets a deal.updated event. Answers how many.
   */
  async detachCompany(companyId: number, who: Principal, tx: Tx): Promise<number> {
    const deals = await this.deals.detachCompany(companyId, who, tx);
    await this.events.recordMany(
      tx,
      deals.map((d) => ({ type: 'deal.updated' as const, data: toDealRecord(d), previous: { company_id: companyId } })),
    );
    return deals.length;
  }

  /** deal.stage_changed when the stage changed; deal.won / deal.lost when the status became won / lost (on creation too). */
  private async recordTransitions(tx: Tx, before: DealRecord | null, after: DealRecord): Promise<void> {
    if (before && before.stage !== after.stage) await this.events.record(tx, 'deal.stage_changed', after, { stage: before.stage });
    if (after.status !== 'open' && before?.status !== after.status) {
      await this.events.record(tx, after.status === 'won' ? 'deal.won' : 'deal.lost', after, before ? { status: before.status } : null);
    }
  }

  /**
   * Copies DTO values onto the entity. With `replace` (create, PUT) omitted optional properties are
   * reset to their defaults: status open, quantity 1, owner the calling user, the others null.
   */
  private assign(d: Deal, dto: UpdateDealDto, previous: { status: Deal['status']; closedAt: Date | null } | null, replace: boolean, who: Principal) {
    const given = (k: keyof UpdateDealDto) => dto[k] !== undefined || replace;
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
    if (given('company_id')) d.companyId = dto.company_id ?? null;
    if (dto.owner_id !== undefined) d.ownerId = dto.owner_id;
    else if (replace) d.ownerId = who.userId;
    const supplied = dto.closed_at === undefined ? undefined : dto.closed_at === null ? null : parseIsoWithOffset(dto.closed_at);
    d.closedAt = resolveClosedAt({ previous, status: d.status, supplied, now: new Date() });
  }
}
