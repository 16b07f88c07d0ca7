import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { PointGroup } from './point-group.entity.js';

export const POINT_GROUP_LIST_SPEC = defineList({
  name: 'point groups',
  sortable: ['id', 'name', 'isPublished', 'minimumPoints', 'maximumPoints', 'color', 'createdAt', 'modifiedAt'],
  searchExpression: 'sf_text(g.name, g.description)',
  filters: { isPublished: { type: 'boolean', column: 'g.is_published' } },
  fields: {
    id: { type: 'id', sql: 'g.id' },
    name: { type: 'string', sql: 'g.name' },
    description: { type: 'string', sql: 'g.description' },
    isPublished: { type: 'boolean', sql: 'g.is_published' },
    minimumPoints: { type: 'int', sql: 'g.minimum_points' },
    maximumPoints: { type: 'int', sql: 'g.maximum_points' },
    color: { type: 'string', sql: 'g.color' },
    ...auditFields('g'),
  },
});

/** Every query of the point_groups table. */
@Injectable()
export class PointGroupsRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(PointGroup);
  }

  /** A new, unsaved point group. */
  create(): PointGroup {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<PointGroup>> {
    return paginate(this.repo().createQueryBuilder('g'), q, POINT_GROUP_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<PointGroup | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until `tx` ends; null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<PointGroup | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /** Inserts a new point group or writes the changed columns of a loaded one; answers its id. */
  async save(g: PointGroup, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(g)).id;
  }

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** The published groups' ranges in id order (the tiers a contact's points are compared with). */
  publishedRanges(tx?: Tx): Promise<{ id: number; name: string; minimumPoints: number; maximumPoints: number; color: string | null }[]> {
    return this.transactions
      .handle(tx)
      .query(`SELECT id, name, minimum_points AS "minimumPoints", maximum_points AS "maximumPoints", color FROM point_groups WHERE is_published ORDER BY id`);
  }
}
