import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/**
 * A handle a repository runs its SQL on: the pool (DataSource) or a transaction (EntityManager).
 * Every repository write takes an optional `tx?: Tx`; without one it runs on the pool.
 */
export type Db = Pick<DataSource | EntityManager, 'query'>;

/**
 * Rows of an UPDATE/DELETE ... RETURNING: TypeORM's query() answers `[rows, affected]` for those
 * statements (and plain rows for the others), so `rows.length` of the raw answer is always 2.
 */
export async function returning<T>(db: Db, sql: string, params: unknown[]): Promise<T[]> {
  const r: unknown = await db.query(sql, params);
  return (Array.isArray(r) && r.length === 2 && Array.isArray(r[0]) && typeof r[1] === 'number' ? r[0] : r) as T[];
}

/** A transaction handle, as given to the callback of {@link Transactions.run}. */
export type Tx = EntityManager;

/**
 * Runs a service's unit of work in one transaction. A service method that changes several tables
 * (or one table and the outbox) calls `run`, and passes the handle to every repository it calls.
 * Nested calls with a handle reuse it (a savepoint, not a second connection).
 */
@Injectable()
export class Transactions {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The pool, for reads and single-statement writes outside a transaction. */
  get db(): Db {
    return this.dataSource;
  }

  /** Runs `work` in a transaction; with `tx` given, inside that one (as a savepoint). */
  run<T>(work: (tx: Tx) => Promise<T>, tx?: Tx): Promise<T> {
    return tx ? tx.transaction(work) : this.dataSource.transaction(work);
  }
}
