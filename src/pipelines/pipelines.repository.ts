import { Injectable } from '@nestjs/common';
import { In } from 'typeorm';
import { Transactions, type Tx } from '../database/transactions.js';
import { AUDIT_PROPERTIES, auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { Pipeline, PipelineStage } from './pipeline.entity.js';
import type { StageType } from './pipeline.rules.js';

export const PIPELINE_LIST_SPEC = defineList({
  name: 'pipelines',
  searchExpression: 'sf_text(p.name)',
  filters: {
    isDefault: { type: 'boolean', column: 'p.is_default' },
    strictStages: { type: 'boolean', column: 'p.strict_stages' },
  },
  fields: {
    id: { type: 'id', sql: 'p.id' },
    name: { type: 'string', sql: 'p.name' },
    isDefault: { type: 'boolean', sql: 'p.is_default' },
    strictStages: { type: 'boolean', sql: 'p.strict_stages' },
    ...auditFields('p'),
  },
  properties: ['id', 'name', 'isDefault', 'strictStages', 'stages', 'createdAt', 'modifiedAt', ...AUDIT_PROPERTIES],
});

/** A stage as written: name, probability, type and its sort key. */
export interface StageValues {
  name: string;
  probability: number;
  type: StageType;
  position: number;
}

/** Every query of the pipelines and pipeline_stages tables. */
@Injectable()
export class PipelinesRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Pipeline);
  }

  private stageRepo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(PipelineStage);
  }

  /** A new, unsaved pipeline. */
  create(): Pipeline {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Pipeline>> {
    return paginate(this.repo().createQueryBuilder('p'), q, PIPELINE_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Pipeline | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /**
   * The row, locked against other edits until `tx` ends; null when absent. FOR NO KEY UPDATE: deals
   * being written into the pipeline (FOR KEY SHARE) go on meanwhile, so an edit that then locks those
   * deals never waits for a deal write that waits for it.
   */
  findForEdit(id: number, tx: Tx): Promise<Pipeline | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'for_no_key_update' } });
  }

  /** The row, locked until `tx` ends (a deletion: deal writes into the pipeline wait, then find it gone); null when absent. */
  findForDelete(id: number, tx: Tx): Promise<Pipeline | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /**
   * The row, held against deletion until `tx` ends (FOR KEY SHARE, what a deal's foreign key takes;
   * it waits for a deletion under way, so a deal never lands in a pipeline being deleted).
   */
  async findForDeal(id: number, tx: Tx): Promise<Pipeline | null> {
    const rows = await tx.query<{ id: number }[]>(`SELECT id FROM pipelines WHERE id = $1 FOR KEY SHARE`, [id]);
    return rows.length ? this.findRecord(id, tx) : null;
  }

  /** The default pipeline's id (null when there is none). */
  async defaultId(tx?: Tx): Promise<number | null> {
    const rows = await this.transactions.handle(tx).query<{ id: number }[]>(`SELECT id FROM pipelines WHERE is_default`);
    return rows[0]?.id ?? null;
  }

  /** Takes the default mark from every pipeline but `exceptId` (the caller holds the pipelines' locks). */
  async clearDefault(exceptId: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE pipelines SET is_default = false WHERE is_default AND id <> $1`, [exceptId]);
  }

  /** Locks the default pipeline's row (FOR UPDATE) until `tx` ends, so that two pipelines never both take the mark. */
  async lockDefault(tx: Tx): Promise<void> {
    await tx.query(`SELECT id FROM pipelines WHERE is_default FOR NO KEY UPDATE`);
  }

  /** Inserts a new pipeline or writes the changed columns of a loaded one; answers its id. */
  async save(p: Pipeline, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(p)).id;
  }

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** The current (not removed) stages of a pipeline, in order. */
  stagesOf(pipelineId: number, tx?: Tx): Promise<PipelineStage[]> {
    return this.stageRepo(tx)
      .createQueryBuilder('s')
      .where('s.pipeline_id = :pipelineId AND s.removed_at IS NULL', { pipelineId })
      .orderBy('s.position', 'ASC')
      .addOrderBy('s.id', 'ASC')
      .getMany();
  }

  /** The current stages of several pipelines, in order, by pipeline id. */
  async stagesOfMany(pipelineIds: number[], tx?: Tx): Promise<Map<number, PipelineStage[]>> {
    const out = new Map<number, PipelineStage[]>(pipelineIds.map((id) => [id, []]));
    if (!pipelineIds.length) return out;
    const rows = await this.stageRepo(tx)
      .createQueryBuilder('s')
      .where('s.pipeline_id IN (:...pipelineIds) AND s.removed_at IS NULL', { pipelineIds })
      .orderBy('s.position', 'ASC')
      .addOrderBy('s.id', 'ASC')
      .getMany();
    for (const s of rows) out.get(s.pipelineId)?.push(s);
    return out;
  }

  /** Stages by id, removed ones included (the ledger's history names them). */
  stagesByIds(ids: number[], tx?: Tx): Promise<PipelineStage[]> {
    return ids.length ? this.stageRepo(tx).find({ where: { id: In(ids) } }) : Promise.resolve([]);
  }

  /**
   * A stage a deal is being written into, held until `tx` ends (FOR SHARE: a removal, which marks
   * the row, waits for the deal's write and then moves it along with the stage's other deals).
   * Null when absent; a removed stage comes back with removedAt set.
   */
  async stageForDeal(stageId: number, tx: Tx): Promise<PipelineStage | null> {
    const rows = await tx.query<{ id: number }[]>(`SELECT id FROM pipeline_stages WHERE id = $1 FOR SHARE`, [stageId]);
    return rows.length ? this.stageRepo(tx).findOne({ where: { id: stageId } }) : null;
  }

  async insertStage(pipelineId: number, v: StageValues, tx: Tx): Promise<number> {
    const rows = await tx.query<{ id: number }[]>(
      `INSERT INTO pipeline_stages (pipeline_id, name, position, probability, type) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [pipelineId, v.name, v.position, v.probability, v.type],
    );
    return rows[0].id;
  }

  /**
   * Adds an open (or `type`) stage named `name` at the end of a pipeline, unless a current stage has
   * that name (a parallel writer may just have added it); answers the stage either way.
   */
  async addStageIfMissing(pipelineId: number, name: string, type: StageType, tx: Tx): Promise<PipelineStage> {
    await tx.query(
      `INSERT INTO pipeline_stages (pipeline_id, name, position, probability, type)
       SELECT $1, $2, COALESCE((SELECT max(position) + 1 FROM pipeline_stages WHERE pipeline_id = $1), 0), $4, $3
       ON CONFLICT (pipeline_id, name) WHERE removed_at IS NULL DO NOTHING`,
      [pipelineId, name, type, type === 'won' ? 100 : 0],
    );
    const stage = await this.stageRepo(tx)
      .createQueryBuilder('s')
      .where('s.pipeline_id = :pipelineId AND s.name = :name AND s.removed_at IS NULL', { pipelineId, name })
      .getOne();
    if (!stage) throw new Error(`stage ${name} of pipeline ${pipelineId} neither added nor found`);
    return stage;
  }

  async updateStage(id: number, v: Partial<StageValues>, tx: Tx): Promise<void> {
    await this.stageRepo(tx).update({ id }, v);
  }

  /** Marks a stage removed (it stays for the ledger's history). */
  async markStageRemoved(id: number, at: Date, tx: Tx): Promise<void> {
    await tx.query(`UPDATE pipeline_stages SET removed_at = $2 WHERE id = $1`, [id, at]);
  }

  /** Writes positions 0, 1, 2... in the order of `stageIds`. */
  async renumber(stageIds: number[], tx: Tx): Promise<void> {
    if (!stageIds.length) return;
    await tx.query(`UPDATE pipeline_stages s SET position = o.n - 1 FROM unnest($1::int[]) WITH ORDINALITY AS o(id, n) WHERE s.id = o.id`, [stageIds]);
  }
}
