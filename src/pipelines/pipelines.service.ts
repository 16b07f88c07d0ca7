import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { Clock } from '../common/clock.js';
import { conflict, type ErrorDetail, fieldError, notFound, validationError } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { Pipeline, PipelineStage } from './pipeline.entity.js';
import { AddStageDto, CreatePipelineDto, StageInputDto, UpdatePipelineDto, UpdateStageDto } from './pipeline.dto.js';
import { firstStageOfType, stageListProblems, type StageType } from './pipeline.rules.js';
import { PIPELINE_LIST_SPEC, PipelinesRepository } from './pipelines.repository.js';

/** A stage as the API returns it, `order` its index in the pipeline. */
function toStageRecord(s: PipelineStage, order: number) {
  return { id: s.id, name: s.name, order, probability: s.probability, type: s.type };
}

/** A pipeline as the API returns it (the one mapper from rows to record). */
export function toPipelineRecord(p: Pipeline, stages: PipelineStage[]) {
  return {
    id: p.id,
    name: p.name,
    isDefault: p.isDefault,
    strictStages: p.strictStages,
    stages: stages.map(toStageRecord),
    ...auditOut(p),
  };
}

export type PipelineRecord = ReturnType<typeof toPipelineRecord>;

/** A stage a deal is in: what the deals feature reads and writes. */
export interface DealStage {
  id: number;
  pipelineId: number;
  name: string;
  type: StageType;
  probability: number;
}

const dealStage = (s: PipelineStage): DealStage => ({ id: s.id, pipelineId: s.pipelineId, name: s.name, type: s.type, probability: s.probability });

/**
 * What the deals feature does for the pipelines when stages change under deals (it registers itself,
 * see DealsService): pipelines sit below deals, so they reach the deals only through this.
 */
export interface PipelineDeals {
  /** Deals in the pipeline (or, with stageId, in that stage), counted in `tx`. */
  count(pipelineId: number, stageId: number | null, tx: Tx): Promise<number>;
  /** Moves every deal of stage `fromStageId` to `to`, each with its ledger row and events. Answers how many. */
  moveAll(fromStageId: number, to: DealStage, who: Principal, tx: Tx): Promise<number>;
  /** The deals of a stage take its new name and type (status) after an edit, with their events. */
  restamp(stage: DealStage, who: Principal, tx: Tx): Promise<void>;
}

/** What a deal write says about where the deal goes (undefined: not given; null: reset). */
export interface DealStageRequest {
  pipelineId?: number | null;
  stageId?: number | null;
  stageName?: string | null;
  status?: StageType | null;
  /** Where the deal is now (null on creation). */
  current: { pipelineId: number; stageId: number } | null;
  /** A full replace (PUT): an omitted stage resets to the pipeline's first open stage. */
  replace: boolean;
}

type Mode = 'create' | 'replace' | 'patch';

/**
 * Pipelines and their stages. Every change of a pipeline or of its stages locks the pipeline's row
 * and writes one pipeline.created / updated / deleted event with the whole pipeline.
 */
@Injectable()
export class PipelinesService {
  private deals: PipelineDeals | null = null;

  constructor(
    private readonly pipelines: PipelinesRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {}

  /** Called once by the deals feature at start-up. */
  useDeals(deals: PipelineDeals): void {
    this.deals = deals;
  }

  private get dealsPort(): PipelineDeals {
    if (!this.deals) throw new Error('the deals feature has not registered with PipelinesService');
    return this.deals;
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, PIPELINE_LIST_SPEC);
    const page = await this.pipelines.list(q);
    const stages = await this.pipelines.stagesOfMany(page.items.map((p) => p.id));
    return listEnvelope(
      q,
      'pipelines',
      page,
      page.items.map((p) => toPipelineRecord(p, stages.get(p.id) ?? [])),
    );
  }

  async get(id: number, tx?: Tx): Promise<PipelineRecord> {
    const p = await this.pipelines.findRecord(id, tx);
    if (!p) throw notFound('Pipeline', id);
    return toPipelineRecord(p, await this.pipelines.stagesOf(id, tx));
  }

  async create(dto: CreatePipelineDto, who: Principal, tx?: Tx): Promise<PipelineRecord> {
    checkStages(dto.stages);
    const p = this.pipelines.create();
    this.assign(p, dto, 'create');
    stampCreated(p, who);
    return this.transactions.run(async (t) => {
      if (p.isDefault) {
        await this.pipelines.lockDefault(t);
        await this.pipelines.clearDefault(0, t);
      }
      const id = await this.pipelines.save(p, t);
      for (const [i, s] of dto.stages.entries()) {
        if (s.id !== undefined) throw fieldError(`stages.${i}.id`, 'must be omitted for a new pipeline');
        await this.pipelines.insertStage(id, { name: s.name.trim(), probability: s.probability, type: s.type ?? 'open', position: i }, t);
      }
      const record = await this.get(id, t);
      await this.events.record(t, 'pipeline.created', record);
      return record;
    }, tx);
  }

  async patch(id: number, dto: UpdatePipelineDto, who: Principal): Promise<PipelineRecord> {
    if (dto.stages) checkStages(dto.stages);
    return this.change(id, who, async (p, tx) => {
      this.assign(p, dto, 'patch');
      if (dto.stages) await this.syncStages(p, dto.stages, who, tx);
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new pipeline. */
  async put(id: number, dto: CreatePipelineDto, who: Principal): Promise<{ created: boolean; pipeline: PipelineRecord }> {
    checkStages(dto.stages);
    return this.transactions.run(async (tx) => {
      const existing = await this.pipelines.findRecord(id, tx);
      if (!existing) return { created: true, pipeline: await this.create(dto, who, tx) };
      const pipeline = await this.change(id, who, async (p, t) => {
        this.assign(p, dto, 'replace');
        await this.syncStages(p, dto.stages, who, t);
      });
      return { created: false, pipeline };
    });
  }

  /** Deletes a pipeline without deals (409 otherwise, and for the default pipeline); one of parallel deletes succeeds, the others are 404s. */
  async remove(id: number): Promise<PipelineRecord> {
    return this.transactions.run(async (tx) => {
      const p = await this.pipelines.findForDelete(id, tx);
      if (!p) throw notFound('Pipeline', id);
      if (p.isDefault) throw conflict('The default pipeline cannot be deleted: make another pipeline the default first');
      const deals = await this.dealsPort.count(id, null, tx);
      if (deals > 0) throw conflict(`Pipeline ${id} holds ${deals} deal(s): move them to another pipeline first`);
      const record = await this.get(id, tx);
      if (!(await this.pipelines.delete(id, tx))) throw notFound('Pipeline', id);
      await this.events.record(tx, 'pipeline.deleted', record);
      return record;
    });
  }

  /** Adds a stage (last, or at `order`). */
  addStage(id: number, dto: AddStageDto, who: Principal): Promise<PipelineRecord> {
    return this.change(id, who, async (p, tx) => {
      const stages = await this.pipelines.stagesOf(id, tx);
      const type = dto.type ?? 'open';
      const problems = stageListProblems([...stages, { name: dto.name.trim(), type }]);
      if (problems.length)
        throw validationError(
          'The stage cannot be added',
          problems.map((d) => ({ ...d, field: 'name' })),
        );
      const newId = await this.pipelines.insertStage(id, { name: dto.name.trim(), probability: dto.probability, type, position: stages.length }, tx);
      const order = stages.map((s) => s.id);
      order.splice(Math.min(dto.order ?? order.length, order.length), 0, newId);
      await this.pipelines.renumber(order, tx);
    });
  }

  /** Renames a stage, changes its probability or type, or moves it to `order`; its deals follow its name and type. */
  updateStage(id: number, stageId: number, dto: UpdateStageDto, who: Principal): Promise<PipelineRecord> {
    return this.change(id, who, async (_p, tx) => {
      const stages = await this.pipelines.stagesOf(id, tx);
      const stage = stages.find((s) => s.id === stageId);
      if (!stage) throw notFound('Stage', stageId);
      const next = { name: dto.name?.trim() ?? stage.name, type: dto.type ?? stage.type, probability: dto.probability ?? stage.probability };
      const problems = stageListProblems(stages.map((s) => (s.id === stageId ? next : s)));
      if (problems.length) throw validationError('The stage cannot be changed', problems);
      await this.pipelines.updateStage(stageId, next, tx);
      if (dto.order !== undefined) {
        const order = stages.map((s) => s.id).filter((s) => s !== stageId);
        order.splice(Math.min(dto.order, order.length), 0, stageId);
        await this.pipelines.renumber(order, tx);
      }
      if (next.name !== stage.name || next.type !== stage.type) await this.dealsPort.restamp(dealStage(Object.assign(stage, next)), who, tx);
    });
  }

  /**
   * Removes a stage. One that holds deals needs `moveDealsTo`, another current stage of the same
   * pipeline, where its deals go (each with its ledger row and events). The stage is marked removed
   * first, so that a deal being written into it meanwhile is moved too.
   */
  removeStage(id: number, stageId: number, moveDealsTo: number | undefined, who: Principal): Promise<PipelineRecord> {
    return this.change(id, who, async (_p, tx) => {
      const stages = await this.pipelines.stagesOf(id, tx);
      if (!stages.some((s) => s.id === stageId)) throw notFound('Stage', stageId);
      const rest = stages.filter((s) => s.id !== stageId);
      const problems = stageListProblems(rest);
      if (problems.length) throw validationError('The stage cannot be removed', problems);
      const target = moveDealsTo === undefined ? null : rest.find((s) => s.id === moveDealsTo);
      if (moveDealsTo !== undefined && !target) {
        throw fieldError('moveDealsTo', `must be another stage of pipeline ${id}: ${rest.map((s) => `${s.id} (${s.name})`).join(', ')}`);
      }
      await this.pipelines.markStageRemoved(stageId, this.clock.now(), tx);
      const held = await this.dealsPort.count(id, stageId, tx);
      if (held > 0 && !target) throw conflict(`Stage ${stageId} holds ${held} deal(s): give moveDealsTo, the stage they go to`);
      if (target) await this.dealsPort.moveAll(stageId, dealStage(target), who, tx);
      await this.pipelines.renumber(
        rest.map((s) => s.id),
        tx,
      );
    });
  }

  /**
   * Where a deal goes (see README "Pipelines"): the pipeline given, else the deal's, else the
   * default; in it the stage given by id or name, else (status given) the first stage of that
   * type unless the deal's stage already has it, else the deal's current stage, else the first open
   * stage. An unknown name is a 400 in a strict pipeline and a new stage (of the given status's
   * type) in the others. A status that does not match the stage named is a 400 in a strict pipeline;
   * in the others the status wins (its first stage). Holds the pipeline and the stage until `tx` ends.
   */
  async resolveDealStage(req: DealStageRequest, tx: Tx): Promise<DealStage> {
    const pipelineId = req.pipelineId ?? req.current?.pipelineId ?? (await this.pipelines.defaultId(tx));
    if (pipelineId === null) throw fieldError('pipeline_id', 'there is no default pipeline: give one');
    const pipeline = await this.pipelines.findForDeal(pipelineId, tx);
    if (!pipeline) throw fieldError('pipeline_id', `pipeline ${pipelineId} does not exist`);
    const stages = await this.pipelines.stagesOf(pipelineId, tx);
    const names = () => stages.map((s) => `${s.name} (${s.id})`).join(', ');
    let stage: PipelineStage | null;
    if (req.stageId !== undefined && req.stageId !== null) {
      stage = stages.find((s) => s.id === req.stageId) ?? null;
      if (!stage) throw fieldError('stage_id', `must be a stage of pipeline ${pipelineId}: ${names()}`);
      if (req.stageName && req.stageName.trim() !== stage.name) throw fieldError('stage', `names another stage than stage_id ${stage.id} (${stage.name})`);
    } else if (req.stageName?.trim()) {
      const name = req.stageName.trim();
      stage = stages.find((s) => s.name === name) ?? null;
      if (!stage && pipeline.strictStages) throw fieldError('stage', `must be one of the stages of pipeline ${pipelineId}: ${names()}`);
      stage ??= await this.pipelines.addStageIfMissing(pipelineId, name, req.status ?? 'open', tx);
    } else {
      const keep = req.current && req.current.pipelineId === pipelineId && !req.replace && req.stageName === undefined;
      const current = keep ? (stages.find((s) => s.id === req.current?.stageId) ?? null) : null;
      const wanted = req.status ?? (current ? current.type : 'open');
      stage = current && current.type === wanted ? current : firstStageOfType(stages, wanted);
      if (!stage) throw fieldError('status', `pipeline ${pipelineId} has no ${wanted} stage`);
    }
    if (req.status && stage.type !== req.status && !pipeline.strictStages && req.stageId == null) {
      // A free-text pipeline keeps the old contract, where stage and status were independent: the status wins.
      stage = firstStageOfType(stages, req.status) ?? stage;
    }
    if (req.status && stage.type !== req.status) {
      throw fieldError('status', `must match the type of stage ${stage.name} (${stage.type}); omit it, or give a ${req.status} stage`);
    }
    const held = await this.pipelines.stageForDeal(stage.id, tx);
    if (!held || held.removedAt) throw fieldError('stage_id', `stage ${stage.id} was removed from pipeline ${pipelineId}`);
    return dealStage(held);
  }

  /** Stages by id, removed ones included (for a deal's stage history). */
  async stagesByIds(ids: number[], tx?: Tx): Promise<DealStage[]> {
    return (await this.pipelines.stagesByIds(ids, tx)).map(dealStage);
  }

  /** A pipeline's current stages in order (404 when the pipeline does not exist): the reports' rows. */
  async stagesForReport(id: number, tx?: Tx): Promise<DealStage[]> {
    const p = await this.pipelines.findRecord(id, tx);
    if (!p) throw notFound('Pipeline', id);
    return (await this.pipelines.stagesOf(id, tx)).map(dealStage);
  }

  /** Locks the pipeline, runs `edit`, stamps it and writes pipeline.updated. */
  private change(id: number, who: Principal, edit: (p: Pipeline, tx: Tx) => Promise<void>): Promise<PipelineRecord> {
    return this.transactions.run(async (tx) => {
      const p = await this.pipelines.findForEdit(id, tx);
      if (!p) throw notFound('Pipeline', id);
      const before = await this.get(id, tx);
      const wasDefault = p.isDefault;
      await edit(p, tx);
      if (wasDefault && !p.isDefault) throw fieldError('isDefault', 'the default pipeline stays the default until another pipeline takes the mark');
      if (p.isDefault && !wasDefault) {
        await this.pipelines.lockDefault(tx);
        await this.pipelines.clearDefault(id, tx);
      }
      stampModified(p, who);
      await this.pipelines.save(p, tx);
      const after = await this.get(id, tx);
      await this.events.recordUpdate(tx, 'pipeline.updated', before, after);
      return after;
    });
  }

  /**
   * Makes the pipeline's stages the given list: listed ids are kept (renamed, re-typed, reordered),
   * stages without an id are added, current stages left out are removed (409 when they hold deals).
   */
  private async syncStages(p: Pipeline, wanted: StageInputDto[], who: Principal, tx: Tx): Promise<void> {
    const stages = await this.pipelines.stagesOf(p.id, tx);
    const byId = new Map(stages.map((s) => [s.id, s]));
    const problems: ErrorDetail[] = [];
    for (const [i, s] of wanted.entries()) {
      if (s.id !== undefined && !byId.has(s.id))
        problems.push({ field: `stages.${i}.id`, message: `must be a stage of pipeline ${p.id} (or omitted for a new stage)` });
    }
    if (new Set(wanted.filter((s) => s.id !== undefined).map((s) => s.id)).size !== wanted.filter((s) => s.id !== undefined).length) {
      problems.push({ field: 'stages', message: 'names one stage id twice' });
    }
    if (problems.length) throw validationError('Invalid stages', problems);
    const kept = new Set(wanted.map((s) => s.id));
    for (const s of stages) {
      if (kept.has(s.id)) continue;
      const held = await this.dealsPort.count(p.id, s.id, tx);
      if (held > 0) throw conflict(`Stage ${s.id} (${s.name}) holds ${held} deal(s): remove it with DELETE /api/pipelines/${p.id}/stages/${s.id}?moveDealsTo=`);
      await this.pipelines.markStageRemoved(s.id, this.clock.now(), tx);
    }
    // Renamed stages first take a name no stage has, so that names swapped between stages never meet in the unique index.
    for (const s of wanted) {
      const old = s.id === undefined ? undefined : byId.get(s.id);
      if (old && old.name !== s.name.trim()) await this.pipelines.updateStage(old.id, { name: `\u2060renaming ${old.id}` }, tx);
    }
    const order: number[] = [];
    for (const [i, s] of wanted.entries()) {
      const values = { name: s.name.trim(), probability: s.probability, type: s.type ?? 'open', position: i };
      if (s.id === undefined) {
        order.push(await this.pipelines.insertStage(p.id, values, tx));
        continue;
      }
      const old = byId.get(s.id);
      if (!old) throw new Error(`stage ${s.id} vanished under the pipeline's lock`);
      await this.pipelines.updateStage(s.id, values, tx);
      order.push(s.id);
      if (old.name !== values.name || old.type !== values.type) await this.dealsPort.restamp({ ...dealStage(old), ...values }, who, tx);
    }
    await this.pipelines.renumber(order, tx);
  }

  private assign(p: Pipeline, dto: UpdatePipelineDto, mode: Mode): void {
    if (dto.name !== undefined && dto.name !== null) p.name = dto.name.trim();
    if (dto.isDefault !== undefined && dto.isDefault !== null) p.isDefault = dto.isDefault;
    else if (mode === 'create') p.isDefault = false;
    if (dto.strictStages !== undefined && dto.strictStages !== null) p.strictStages = dto.strictStages;
    else if (mode !== 'patch') p.strictStages = true;
  }
}

/** 400 when a stage list breaks the rules (an open stage, unique names). */
function checkStages(stages: readonly StageInputDto[]): void {
  const problems = stageListProblems(stages.map((s) => ({ name: s.name.trim(), type: s.type ?? 'open' })));
  if (problems.length) throw validationError('Invalid stages', problems);
}
