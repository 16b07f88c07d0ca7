import { Injectable } from '@nestjs/common';
import { In } from 'typeorm';
import { returning, Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { Deal } from './deal.entity.js';
import { DEAL_STATUSES } from './deal.rules.js';

export const DEAL_LIST_SPEC = defineList({
  name: 'deals',
  // Same expression as the deals_search_trgm index.
  searchExpression: 'sf_text(d.title, d.stage, d.product)',
  filters: {
    status: { type: 'string', column: 'd.status', values: DEAL_STATUSES },
    contact_id: { type: 'int', column: 'd.contact_id' },
    owner_id: { type: 'int', column: 'd.owner_id' },
    company_id: { type: 'int', column: 'd.company_id' },
  },
  fields: {
    id: { type: 'id', sql: 'd.id' },
    title: { type: 'string', sql: 'd.title' },
    value: { type: 'number', sql: 'd.value' },
    contact_id: { type: 'id', sql: 'd.contact_id' },
    expected_close_date: { type: 'date', sql: 'd.expected_close_date' },
    stage: { type: 'string', sql: 'd.stage' },
    probability: { type: 'int', sql: 'd.probability' },
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

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }
}
