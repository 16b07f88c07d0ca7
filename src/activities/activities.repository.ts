import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { Activity } from './activity.entity.js';
import { ACTIVITY_TYPES } from './activity.rules.js';

export const ACTIVITY_LIST_SPEC = defineList({
  name: 'activities',
  // Same expression as the activities_search_trgm index.
  searchExpression: 'sf_text(a.subject, a.notes, a.outcome)',
  filters: {
    type: { type: 'string', column: 'a.type', values: ACTIVITY_TYPES },
    contact_id: { type: 'int', column: 'a.contact_id' },
  },
  fields: {
    id: { type: 'id', sql: 'a.id' },
    type: { type: 'enum', sql: 'a.type', values: ACTIVITY_TYPES },
    subject: { type: 'string', sql: 'a.subject' },
    contact_id: { type: 'id', sql: 'a.contact_id' },
    due_date: { type: 'datetime', sql: 'a.due_date' },
    notes: { type: 'string', sql: 'a.notes' },
    outcome: { type: 'string', sql: 'a.outcome' },
    ...auditFields('a'),
  },
});

/** Every query of the activities table. */
@Injectable()
export class ActivitiesRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Activity);
  }

  /** A new, unsaved activity. */
  create(): Activity {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Activity>> {
    return paginate(this.repo().createQueryBuilder('a'), q, ACTIVITY_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Activity | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until `tx` ends; null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<Activity | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /**
   * Inserts a new activity or writes the changed columns of a loaded one; answers its id. A contact
   * that does not exist fails with the foreign key (registered beside the entity: a 400 naming contact_id).
   */
  async save(x: Activity, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(x)).id;
  }

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }
}
