import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';

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

/**
 * The pool's query without TypeORM's per-query QueryRunner, logger and event broadcaster (bench rows
 * "get contact by id", "create contact", "add contact to campaign": one statement each, on the pool).
 * It answers exactly what DataSource.query does (`[rows, affected]` for UPDATE and DELETE, the rows
 * otherwise) and raises a database error as TypeORM's QueryFailedError, which the constraint registry
 * and the exception filter read; connection errors pass unchanged, as they do from TypeORM.
 */
class PoolDb {
  constructor(private readonly pool: pg.Pool) {}

  async query<T = unknown>(sql: string, params?: unknown[]): Promise<T> {
    try {
      const r = await this.pool.query(sql, params);
      return (r.command === 'UPDATE' || r.command === 'DELETE' ? [r.rows, r.rowCount] : r.rows) as T;
    } catch (e) {
      throw e instanceof pg.DatabaseError ? new QueryFailedError(sql, params, e) : e;
    }
  }
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
  private pool?: PoolDb;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The pool, for reads and single-statement writes outside a transaction. */
  get db(): Db {
    // TypeORM's PostgreSQL driver keeps its pg Pool as `master` once the data source is initialised.
    this.pool ??= new PoolDb((this.dataSource.driver as unknown as { master: pg.Pool }).master);
    return this.pool;
  }

  /** Runs `work` in a transaction; with `tx` given, inside that one (as a savepoint). */
  run<T>(work: (tx: Tx) => Promise<T>, tx?: Tx): Promise<T> {
    return tx ? tx.transaction(work) : this.dataSource.transaction(work);
  }
}
