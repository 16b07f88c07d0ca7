import { Injectable } from '@nestjs/common';
import type { Principal } from '../common/request.js';
import { In } from 'typeorm';
import { returning, Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { Deal } from './deal.entity.js';
import { DEAL_STATUSES } from './deal.rules.js';

/** One row of the stage ledger (deal_stage_changes). */
export interface StageChange {
  dealId: number;
  pipelineId: number;
  fromStageId: number | null;
  toStageId: number;
  at: Date;
  by: number | null;
  value: number;
  probability: number;
}

/** A ledger row as the stage history reads it. */
export interface StageChangeRow {
  id: string;
  pipeline_id: number;
  from_stage_id: number | null;
  to_stage_id: number;
  at: Date;
  by: number | null;
  value: string;
  probability: number;
}

export const DEAL_LIST_SPEC = defineList({
  name: 'deals',
  // Same expression as the deals_search_trgm index.
  searchExpression: 'sf_text(d.title, d.stage, d.product)',
  filters: {
    status: { type: 'string', column: 'd.status', values: DEAL_STATUSES },
    contact_id: { type: 'int', column: 'd.contact_id' },
    owner_id: { type: 'int', column: 'd.owner_id' },
    company_id: { type: 'int', column: 'd.company_id' },
    pipeline_id: { type: 'int', column: 'd.pipeline_id' },
    stage_id: { type: 'int', column: 'd.stage_id' },
  },
  fields: {
    id: { type: 'id', sql: 'd.id' },
    title: { type: 'string', sql: 'd.title' },
    value: { type: 'number', sql: 'd.value' },
    contact_id: { type: 'id', sql: 'd.contact_id' },
    expected_close_date: { type: 'date', sql: 'd.expected_close_date' },
    pipeline_id: { type: 'id', sql: 'd.pipeline_id' },
    'pipeline.id': { type: 'id', sql: 'd.pipeline_id' },
    stage_id: { type: 'id', sql: 'd.stage_id' },
    'stage.id': { type: 'id', sql: 'd.stage_id' },
    stage: { type: 'string', sql: 'd.stage' },
    entered_stage_at: { type: 'datetime', sql: 'd.entered_stage_at' },
    probability: { type: 'int', sql: 'd.probability', description: "the deal's own probability (null: it takes its stage's)" },
    status: { type: 'enum', sql: 'd.status', values: DEAL_STATUSES },
    product: { type: 'string', sql: 'd.product' },
    quantity: { type: 'int', sql: 'd.quantity' },
    closed_at: { type: 'datetime', sql: 'd.closed_at' },
    owner_id: { type: 'id', sql: 'd.owner_id' },
    'owner.id': { type: 'id', sql: 'd.owner_id' },
    company_id: { type: 'id', sql: 'd.company_id' },
    'company.id': { type: 'id', sql: 'd.company_id' },
    ...auditFields('d'),
  },
});

/**
 * The SET part of a set-based stage change, with status $2 (the stage's type) and closed_at for it
 * (null for open, kept for a deal already closed, else now, $3), and the audit stamp ($4 user id, $5 user name).
 */
const STATUS_AND_STAMP =
  `status = $2, closed_at = CASE WHEN $2 = 'open' THEN NULL WHEN status IN ('won', 'lost') AND closed_at IS NOT NULL THEN closed_at ELSE $3::timestamptz END, ` +
  `modified_at = now(), modified_by = $4, modified_by_user = $5`;

/** Every query of the deals table. */
@Injectable()
export class DealsRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Deal);
  }

  /** A new, unsaved deal. */
  create(): Deal {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Deal>> {
    return paginate(this.repo().createQueryBuilder('d'), q, DEAL_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Deal | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until `tx` ends; null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<Deal | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /**
   * Inserts a new deal or writes the changed columns of a loaded one; answers its id. A contact
   * or owner that does not exist fails with its foreign key (registered beside the entity: a 400
   * naming contact_id or owner_id).
   */
  async save(x: Deal, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(x)).id;
  }

  /** Locks a company against deletion until `tx` ends (FOR KEY SHARE, what the foreign key check takes); nothing when it does not exist. */
  async lockCompanyReference(companyId: number, tx: Tx): Promise<void> {
    await tx.query(`SELECT 1 FROM companies WHERE id = $1 FOR KEY SHARE`, [companyId]);
  }

  /**
   * Detaches every deal of a company being deleted in one statement (company_id null, modifiedAt
   * now); answers the deals as they are afterwards.
   */
  async detachCompany(companyId: number, who: { userId: number; userName: string }, tx: Tx): Promise<Deal[]> {
    const rows = await returning<{ id: number }>(
      tx,
      `UPDATE deals SET company_id = NULL, modified_at = now(), modified_by = $2, modified_by_user = $3 WHERE company_id = $1 RETURNING id`,
      [companyId, who.userId, who.userName],
    );
    if (!rows.length) return [];
    return this.repo(tx).find({ where: { id: In(rows.map((r) => r.id)) }, order: { id: 'ASC' } });
  }

  /** Appends ledger rows, in the given order (the transaction of the change). */
  async appendStageChanges(rows: readonly StageChange[], tx: Tx): Promise<void> {
    if (!rows.length) return;
    await tx.query(
      `INSERT INTO deal_stage_changes (deal_id, pipeline_id, from_stage_id, to_stage_id, at, by, value, probability)
       SELECT a, b, c, d, e, f, g, h
       FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::timestamptz[], $6::int[], $7::numeric[], $8::int[]) WITH ORDINALITY AS r(a, b, c, d, e, f, g, h, n)
       ORDER BY n`,
      [
        rows.map((r) => r.dealId),
        rows.map((r) => r.pipelineId),
        rows.map((r) => r.fromStageId),
        rows.map((r) => r.toStageId),
        rows.map((r) => r.at),
        rows.map((r) => r.by),
        rows.map((r) => r.value),
        rows.map((r) => r.probability),
      ],
    );
  }

  /** A deal's ledger rows, oldest first. */
  stageHistory(dealId: number, tx?: Tx): Promise<StageChangeRow[]> {
    return this.transactions
      .handle(tx)
      .query<StageChangeRow[]>(
        `SELECT id::text, pipeline_id, from_stage_id, to_stage_id, at, by, value::text, probability FROM deal_stage_changes WHERE deal_id = $1 ORDER BY at, id`,
        [dealId],
      );
  }

  /** Deals in a pipeline, or in one of its stages. */
  async countIn(pipelineId: number, stageId: number | null, tx: Tx): Promise<number> {
    const rows = await tx.query<{ n: number }[]>(
      stageId === null ? `SELECT count(*)::int AS n FROM deals WHERE pipeline_id = $1` : `SELECT count(*)::int AS n FROM deals WHERE stage_id = $1`,
      [stageId ?? pipelineId],
    );
    return rows[0].n;
  }

  /** The deals of a stage, locked until `tx` ends, in id order. */
  findInStageForUpdate(stageId: number, tx: Tx): Promise<Deal[]> {
    return this.repo(tx).find({ where: { stageId }, order: { id: 'ASC' }, lock: { mode: 'pessimistic_write' } });
  }

  /**
   * Puts the given deals in a stage in one statement: its pipeline, name and type (status), entered
   * now; closed_at cleared for an open stage, kept when already closed, else now. modifiedAt stamped.
   */
  async moveToStage(ids: number[], to: { id: number; pipelineId: number; name: string; type: string }, now: Date, who: Principal, tx: Tx): Promise<void> {
    if (!ids.length) return;
    await tx.query(`UPDATE deals SET pipeline_id = $6, stage_id = $7, stage = $8, entered_stage_at = $3, ${STATUS_AND_STAMP} WHERE id = ANY($1::int[])`, [
      ids,
      to.type,
      now,
      who.userId,
      who.userName,
      to.pipelineId,
      to.id,
      to.name,
    ]);
  }

  /** The deals of a stage take its (new) name and type as their stage and status; answers their ids. */
  async restamp(stage: { id: number; name: string; type: string }, now: Date, who: Principal, tx: Tx): Promise<number[]> {
    const rows = await returning<{ id: number }>(
      tx,
      `UPDATE deals SET stage = $6, ${STATUS_AND_STAMP}
       WHERE id IN (SELECT id FROM deals WHERE stage_id = $1 ORDER BY id FOR UPDATE) RETURNING id`,
      [stage.id, stage.type, now, who.userId, who.userName, stage.name],
    );
    return rows.map((r) => r.id).sort((a, b) => a - b);
  }

  async findMany(ids: number[], tx?: Tx): Promise<Deal[]> {
    return ids.length ? this.repo(tx).find({ where: { id: In(ids) }, order: { id: 'ASC' } }) : [];
  }

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }
}
