import { Injectable } from '@nestjs/common';
import { isUniqueViolation } from '../database/constraints.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { CATEGORY_BUNDLES } from './category.dto.js';
import { Category } from './category.entity.js';

export const CATEGORY_LIST_SPEC = defineList({
  name: 'categories',
  sortable: ['id', 'title', 'alias', 'bundle', 'color', 'createdAt', 'modifiedAt'],
  searchExpression: 'sf_text(c.title, c.alias, c.description)',
  filters: { bundle: { type: 'string', column: 'c.bundle', values: CATEGORY_BUNDLES } },
  fields: {
    id: { type: 'id', sql: 'c.id' },
    title: { type: 'string', sql: 'c.title' },
    alias: { type: 'string', sql: 'c.alias' },
    description: { type: 'string', sql: 'c.description' },
    color: { type: 'string', sql: 'c.color' },
    bundle: { type: 'enum', sql: 'c.bundle', values: CATEGORY_BUNDLES },
    ...auditFields('c'),
  },
});

/** Every query of the categories table. */
@Injectable()
export class CategoriesRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Category);
  }

  /** A new, unsaved category. */
  create(): Category {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Category>> {
    return paginate(this.repo().createQueryBuilder('c'), q, CATEGORY_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Category | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** Categories by id, for another feature's records (e.g. an asset's category). */
  findByIds(ids: readonly number[], tx?: Tx): Promise<Category[]> {
    if (!ids.length) return Promise.resolve([]);
    return this.repo(tx)
      .createQueryBuilder('c')
      .where('c.id = ANY(:ids)', { ids: [...new Set(ids)] })
      .getMany();
  }

  async exists(id: number, tx?: Tx): Promise<boolean> {
    return (await this.repo(tx).count({ where: { id } })) > 0;
  }

  /** The row, locked until `tx` ends; null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<Category | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /** Aliases in the bundle that a generated alias from `base` could collide with (`base`, `base-2`, ...). */
  async aliasesLike(bundle: string, base: string, tx?: Tx): Promise<Set<string>> {
    const rows: { alias: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT alias FROM categories WHERE bundle = $1 AND (alias = $2 OR alias LIKE $3)`, [bundle, base, `${base.replace(/[_%\\]/g, '\\$&')}-%`]);
    return new Set(rows.map((r) => r.alias));
  }

  /** Inserts a new category or writes the changed columns of a loaded one; answers its id. */
  async save(c: Category, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(c)).id;
  }

  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** True for the error of an alias already taken in its bundle. */
  isAliasTaken(e: unknown): boolean {
    return isUniqueViolation(e, 'categories_bundle_alias_uq');
  }
}
