/**
 * The TypeORM internal src/patches/typeorm.ts relies on, on the machine's PostgreSQL. A failure here
 * after an upgrade means reads and single-statement writes (src/database/transactions.ts poolOf)
 * must find TypeORM's pg Pool another way.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { ADMIN_DB_URL } from '../../test/support/app.js';
import { pgPoolOf } from './typeorm.js';

describe('TypeORM PostgreSQL driver (src/patches/typeorm.ts)', () => {
  const dataSource = new DataSource({ type: 'postgres', url: ADMIN_DB_URL, poolSize: 2 });
  beforeAll(() => dataSource.initialize());
  afterAll(() => dataSource.destroy());

  it("keeps the pg Pool it queries through as driver.master once initialised, the same pool TypeORM's own queries use", async () => {
    const pool = pgPoolOf(dataSource);
    expect(pool).toBeInstanceOf(pg.Pool);
    expect(pool).toBe((dataSource.driver as unknown as { master: unknown }).master);
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
    expect(rows).toEqual([{ one: 1 }]);
    const before = pool.totalCount;
    await dataSource.query('SELECT 1');
    expect(pool.totalCount).toBeGreaterThanOrEqual(Math.max(1, before));
  });

  it('names the broken assumption when the pool is not there', () => {
    expect(() => pgPoolOf({ driver: {} } as unknown as DataSource)).toThrow(/`master` is not a pg Pool/);
  });
});
