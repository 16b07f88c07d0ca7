import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { pgPoolOf } from '../patches/typeorm.js';

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

/** SQL text → statement name, for the statements declared with {@link prepared}. */
const PREPARED = new Map<string, string>();

/**
 * Declares a statement whose text never changes (a module constant, its values all parameters): run
 * on the pool it is a named statement, which each connection parses and plans once and then only
 * binds and executes (PostgreSQL keeps a generic plan once it costs no more than the custom ones).
 * Planning a three-table read or a CTE with the outbox insert costs PostgreSQL more than executing
 * it (issue 18: get by id planned in ~0.5 ms, executed in ~0.1 ms). Only for statements whose best
 * plan does not depend on the values (lookups by key, inserts), never for text built per request:
 * each distinct statement stays prepared on every pooled connection. Answers the text itself, so a
 * transaction (TypeORM's query) runs it as before. DATABASE_PREPARED_STATEMENTS=false turns the
 * names off (a pooler in transaction mode that cannot carry them).
 */
export function prepared(text: string): string {
  if (!PREPARED.has(text)) PREPARED.set(text, `sf_${PREPARED.size + 1}`);
  return text;
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
      const name = namedStatements ? PREPARED.get(sql) : undefined;
      const r = name === undefined ? await this.pool.query(sql, params) : await this.pool.query({ name, text: sql, values: params });
      return (r.command === 'UPDATE' || r.command === 'DELETE' ? [r.rows, r.rowCount] : r.rows) as T;
    } catch (e) {
      throw e instanceof pg.DatabaseError ? new QueryFailedError(sql, params, e) : e;
    }
  }
}

/** Whether statements declared with {@link prepared} run as named statements (DATABASE_PREPARED_STATEMENTS). */
let namedStatements = true;
const pools = new WeakMap<DataSource, PoolDb>();

/** The pool of an initialised data source, for reads and single-statement writes outside a transaction. */
export function poolOf(dataSource: DataSource): Db {
  let db = pools.get(dataSource);
  if (!db) {
    db = new PoolDb(pgPoolOf(dataSource));
    pools.set(dataSource, db);
  }
  return db;
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
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    // The embedded PostgreSQL serves every pooled connection from one session, where a name one
    // connection prepared already exists for the next: plain statements there.
    namedStatements = config.databasePreparedStatements && config.databaseUrl !== null;
  }

  /** The pool, for reads and single-statement writes outside a transaction. */
  get db(): Db {
    return poolOf(this.dataSource);
  }

  /** Runs `work` in a transaction; with `tx` given, inside that one (as a savepoint). */
  run<T>(work: (tx: Tx) => Promise<T>, tx?: Tx): Promise<T> {
    return tx ? tx.transaction(work) : this.dataSource.transaction(work);
  }
}
