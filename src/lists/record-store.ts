import type { EntityTarget, FindOptionsWhere, Repository } from 'typeorm';
import type { Transactions, Tx } from '../database/transactions.js';
import type { ListQuery, ListSpec } from './list-spec.js';
import { type ListPage, paginate } from './list-sql.js';

/**
 * The queries every resource with a numeric id and a TypeORM entity shares: a new entity, its list
 * under the shared list helper, a read, a read that locks the row, a save and a delete, each in the
 * given transaction (or the current unit of work). A feature's repository extends it with its entity,
 * the alias its list spec's SQL names and that spec, and adds what only it needs.
 */
export abstract class RecordStore<E extends { id: number }> {
  protected constructor(
    protected readonly transactions: Transactions,
    private readonly entity: EntityTarget<E>,
    private readonly alias: string,
    private readonly listSpec: ListSpec,
  ) {}

  protected repo(tx?: Tx): Repository<E> {
    return this.transactions.manager(tx).getRepository(this.entity);
  }

  create(): E {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<E>> {
    return paginate(this.repo().createQueryBuilder(this.alias), q, this.listSpec);
  }

  findRecord(id: number, tx?: Tx): Promise<E | null> {
    return this.repo(tx).findOne({ where: { id } as FindOptionsWhere<E> });
  }

  /** The row, locked until `tx` ends; null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<E | null> {
    return this.repo(tx).findOne({ where: { id } as FindOptionsWhere<E>, lock: { mode: 'pessimistic_write' } });
  }

  /** Inserts or updates the entity; answers its id. */
  async save(e: E, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(e)).id;
  }

  /** Deletes the row; false when there was none (another caller deleted it first). */
  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id } as FindOptionsWhere<E>)).affected ?? 0) > 0;
  }
}
