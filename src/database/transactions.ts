import { AsyncLocalStorage } from 'node:async_hooks';
import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { pgPoolOf } from '../patches/typeorm.js';

/**
 * A handle a repository runs its SQL on: the pool (DataSource) or a transaction (EntityManager).
 * Repositories take it from {@link Transactions.db} / {@link Transactions.handle}: the transaction of
 * the unit of work they run in (given or current), else the pool.
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
 * it (get by id: planned in ~0.5 ms, executed in ~0.1 ms; bench/RESULTS.md). Only for statements whose best
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
 * The transaction of the unit of work the code runs in, carried by the async context: a repository
 * call that was not handed the transaction still runs inside it, instead of on another pooled
 * connection (which would escape the rollback and, in embedded mode where the pool is one session,
 * wait for the transaction that waits for it).
 */
const current = new AsyncLocalStorage<Tx>();

/**
 * Units of work open in this process. On Node 20 a live AsyncLocalStorage hooks every promise the
 * process creates (about twice the cost of a bare await, measured), so the storage is switched off
 * whenever no unit of work is open: reads on the pool outside a transaction (bench rows "get contact
 * by id", "list contacts") pay one `enabled` check per handle pick and nothing per promise. Switching
 * it off also forgets every stored transaction, which by then has ended.
 */
let open = 0;

async function counted<T>(unit: () => Promise<T>): Promise<T> {
  open++;
  try {
    return await unit();
  } finally {
    if (--open === 0) current.disable();
  }
}

/**
 * The current transaction while it is open. A transaction's context outlives it in whatever was
 * started inside and goes on after (a timer, a queued job, a promise left running): once the
 * transaction has ended, that work is outside any unit of work and runs on the pool.
 */
function active(): Tx | undefined {
  const tx = current.getStore();
  return tx && !tx.queryRunner?.isReleased ? tx : undefined;
}

/**
 * Runs `work` outside the current unit of work: what it starts that goes on after the transaction
 * (a timer, a queued job, a loop woken from inside a transaction) starts with no transaction in its
 * async context, so its statements take a connection of their own.
 */
export function outsideTransaction<T>(work: () => T): T {
  return current.exit(work);
}

/**
 * Runs a service's unit of work in one transaction. A service method that changes several tables
 * (or one table and the outbox) calls `run`; every repository called inside runs in it, handed the
 * transaction or not (the handle is carried by the async context). Nested calls join the current
 * transaction (a savepoint, not a second connection).
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

  /**
   * Where a statement runs: the current unit of work's transaction, else the pool (for reads and
   * single-statement writes outside a transaction). One AsyncLocalStorage lookup per call.
   */
  get db(): Db {
    return active() ?? poolOf(this.dataSource);
  }

  /** The transaction given, else {@link db}. */
  handle(tx?: Tx): Db {
    return tx ?? active() ?? poolOf(this.dataSource);
  }

  /** The entity manager for TypeORM's repositories: the transaction given or current, else the data source's. */
  manager(tx?: Tx): EntityManager {
    return tx ?? active() ?? this.dataSource.manager;
  }

  /**
   * Runs `work` in a transaction, carried to every repository call inside it. With `tx` given, or
   * inside another unit of work, it joins that transaction as a savepoint: a failure inside rolls
   * back to it and leaves the outer transaction usable.
   */
  run<T>(work: (tx: Tx) => Promise<T>, tx?: Tx): Promise<T> {
    const outer = tx ?? active();
    const inContext = (t: Tx) => current.run(t, () => work(t));
    return counted(() => (outer ? outer.transaction(inContext) : this.dataSource.transaction(inContext)));
  }

  /**
   * Runs `work` in a transaction of its own on its own connection, even inside another unit of work:
   * for work that must commit whatever becomes of the caller's (the event sequencer's numbering).
   */
  runAlone<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    return current.exit(() => counted(() => this.dataSource.transaction((t) => current.run(t, () => work(t)))));
  }
}
