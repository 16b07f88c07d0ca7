/**
 * TypeORM internals the API relies on: its PostgreSQL driver's pg Pool, which reads and
 * single-statement writes use directly (prepared statements, no QueryRunner: src/server/README.md).
 * typeorm.spec.ts fails with a clear message when an upgrade moves it.
 */
import pg from 'pg';
import type { DataSource } from 'typeorm';

/** The pg Pool of an initialised PostgreSQL data source: TypeORM's driver keeps it as `master`. */
export function pgPoolOf(dataSource: DataSource): pg.Pool {
  const pool = (dataSource.driver as unknown as { master?: unknown }).master;
  if (!(pool instanceof pg.Pool)) throw new Error("TypeORM: the PostgreSQL driver's `master` is not a pg Pool (see src/patches/typeorm.spec.ts)");
  return pool;
}
