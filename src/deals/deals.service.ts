import { Injectable, type OnModuleInit } from '@nestjs/common';
import { stampCreated, stampModified } from '../common/audit.js';
import { Clock } from '../common/clock.js';
import { parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { assertBatchPermission, type BatchAnswer, BatchRunner } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { type DealStage, PipelinesService } from '../pipelines/pipelines.service.js';
import { Deal } from './deal.entity.js';
import { CreateDealDto, UpdateDealDto } from './deal.dto.js';
import { DEFAULT_DEAL_QUANTITY, rejectNulls, resolveClosedAt } from './deal.rules.js';
import { DEAL_LIST_SPEC, DealsRepository } from './deals.repository.js';
import { DealStagesService } from './deal-stages.service.js';
import { type DealRecord, toDealRecord } from './deal.record.js';

export { toDealRecord, type DealRecord } from './deal.record.js';

/**
 * Deals. contact_id and owner_id are checked by their foreign keys when written (a missing one is
 * a 400 naming the field, translated by the constraint registry), not by a SELECT that could race.
 * Where a deal sits (pipeline, stage, status) is decided by PipelinesService.resolveDealStage; every
 * stage change appends a ledger row (DealStagesService) in the same transaction, under the deal's lock.
 */
@Injectable()
export class DealsService implements OnModuleInit {
  constructor(
    private readonly deals: DealsRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly batches: BatchRunner,
    private readonly pipelines: PipelinesService,
    private readonly stages: DealStagesService,
    private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.pipelines.useDeals(this.stages);
  }

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
    return this.transactions.run(async (t) => {
      const d = this.deals.create();
      this.assign(d, dto, true, who);
      const stage = await this.pipelines.resolveDealStage({ ...stageRequest(dto), current: null, replace: true }, t);
      const now = this.clock.now();
      this.place(d, dto, stage, null, now);
      stampCreated(d, who);
      const record = await this.get(await this.deals.save(d, t), t);
      await this.events.record(t, 'deal.created', record);
      await this.stages.recorded(t, null, record, now, who);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (parallel edits all land, each stage change with its ledger row). */
  async patch(id: number, dto: UpdateDealDto, who: Principal, outer?: Tx): Promise<DealRecord> {
    rejectNulls(dto, ['title', 'value', 'contact_id']);
    return this.transactions.run(async (tx) => {
      // A company set here is locked before the deal, the order a company's deletion takes them in (no deadlock).
      if (typeof dto.company_id === 'number') await this.deals.lockCompanyReference(dto.company_id, tx);
      const d = await this.deals.findForUpdate(id, tx);
      if (!d) throw notFound('Deal', id);
      return this.rewrite(d, dto, false, who, tx);
    }, outer);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset to defaults), else a new deal. */
  async put(id: number, dto: CreateDealDto, who: Principal): Promise<{ created: boolean; deal: DealRecord }> {
    return this.transactions.run(async (tx) => {
      // A company set here is locked before the deal, the order a company's deletion takes them in (no deadlock).
      if (typeof dto.company_id === 'number') await this.deals.lockCompanyReference(dto.company_id, tx);
      const d = await this.deals.findForUpdate(id, tx);
      if (!d) return { created: true, deal: await this.create(dto, who, tx) };
      return { created: false, deal: await this.rewrite(d, dto, true, who, tx) };
    });
  }

  /** A deal's stage history: each stay with its times (the current one up to the injected clock's now). */
  async stageHistory(id: number, query: Record<string, unknown> = {}) {
    const unknown = Object.keys(query)[0];
    if (unknown !== undefined) throw fieldError(unknown, 'is not a parameter of the stage history (it takes none)');
    await this.get(id);
    return this.stages.history(id);
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

  /** PATCH or PUT of a locked deal: the new values, its place in the pipelines, the events and the ledger row of a stage change. */
  private async rewrite(d: Deal, dto: UpdateDealDto, replace: boolean, who: Principal, tx: Tx): Promise<DealRecord> {
    const before = toDealRecord(d);
    this.assign(d, dto, replace, who);
    const stage = await this.pipelines.resolveDealStage({ ...stageRequest(dto), current: { pipelineId: d.pipelineId, stageId: d.stageId }, replace }, tx);
    const now = this.clock.now();
    this.place(d, dto, stage, { status: d.status, closedAt: d.closedAt }, now);
    stampModified(d, who);
    const after = await this.get(await this.deals.save(d, tx), tx);
    await this.events.recordUpdate(tx, 'deal.updated', before, after);
    await this.stages.recorded(tx, before, after, now, who);
    return after;
  }

  /** Puts the deal in `stage`: its pipeline, name and status (the stage's type), the entry time when the stage changed, closed_at. */
  private place(d: Deal, dto: UpdateDealDto, stage: DealStage, previous: { status: Deal['status']; closedAt: Date | null } | null, now: Date): void {
    const moved = previous === null || d.stageId !== stage.id;
    d.pipelineId = stage.pipelineId;
    d.stageId = stage.id;
    d.stage = stage.name;
    d.status = stage.type;
    if (moved) d.enteredStageAt = now;
    const supplied = dto.closed_at === undefined ? undefined : dto.closed_at === null ? null : parseIsoWithOffset(dto.closed_at);
    d.closedAt = resolveClosedAt({ previous, status: d.status, supplied, now });
  }

  /**
   * Copies DTO values onto the entity, but for the stage (see place). With `replace` (create, PUT)
   * omitted optional properties are reset to their defaults: quantity 1, owner the calling user,
   * probability the stage's, the others null.
   */
  private assign(d: Deal, dto: UpdateDealDto, replace: boolean, who: Principal) {
    const given = (k: keyof UpdateDealDto) => dto[k] !== undefined || replace;
    if (dto.title !== undefined && dto.title !== null) {
      d.title = dto.title.trim();
      if (d.title === '') throw fieldError('title', 'must not be empty');
    }
    if (dto.value !== undefined && dto.value !== null) d.value = dto.value;
    if (dto.contact_id !== undefined && dto.contact_id !== null) d.contactId = dto.contact_id;
    if (given('expected_close_date')) d.expectedCloseDate = dto.expected_close_date ?? null;
    if (given('probability')) d.probability = dto.probability ?? null;
    if (given('product')) d.product = dto.product ?? null;
    if (given('quantity')) d.quantity = dto.quantity ?? DEFAULT_DEAL_QUANTITY;
    if (given('company_id')) d.companyId = dto.company_id ?? null;
    if (dto.owner_id !== undefined) d.ownerId = dto.owner_id;
    else if (replace) d.ownerId = who.userId;
  }
}

/** What a deal body says about its place: pipeline, stage (by id or name) and status; null status means open (its default). */
function stageRequest(dto: UpdateDealDto) {
  return {
    pipelineId: dto.pipeline_id ?? undefined,
    stageId: dto.stage_id ?? undefined,
    stageName: dto.stage,
    status: dto.status === null ? ('open' as const) : dto.status,
  };
}
