import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { type ListQuery, type ListSpec, paginate } from '../common/list.js';
import type { Tx } from '../database/transactions.js';
import { Deal } from './deal.entity.js';
import { DEAL_STATUSES } from './deal.rules.js';

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

/** Every query of the deals table. */
@Injectable()
export class DealsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  private repo(tx?: Tx) {
    return (tx ?? this.dataSource.manager).getRepository(Deal);
  }

  /** A new, unsaved deal. */
  create(): Deal {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<{ total: number; items: Deal[] }> {
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

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }
}
