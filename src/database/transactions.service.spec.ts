import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { prepared, Transactions } from './transactions.js';

describe('Transactions (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  beforeAll(async () => {
    ctx = await startServiceContext();
  });
  afterAll(async () => {
    await ctx.close();
  });

  it('commits every statement of a unit together', async () => {
    const tx = ctx.get(Transactions);
    await tx.run(async (t) => {
      await t.query(`INSERT INTO categories (title, alias, bundle) VALUES ('A', 'tx-a', 'global')`);
      await t.query(`INSERT INTO categories (title, alias, bundle) VALUES ('B', 'tx-b', 'global')`);
    });
    const rows = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM categories WHERE alias IN ('tx-a', 'tx-b')`);
    expect(rows[0].n).toBe('2');
  });

  it('rolls back every statement when one fails', async () => {
    const tx = ctx.get(Transactions);
    await expect(
      tx.run(async (t) => {
        await t.query(`INSERT INTO categories (title, alias, bundle) VALUES ('C', 'tx-c', 'global')`);
        await t.query(`INSERT INTO categories (title, alias, bundle) VALUES ('C2', 'tx-c', 'global')`);
      }),
    ).rejects.toThrow();
    const rows = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM categories WHERE alias = 'tx-c'`);
    expect(rows[0].n).toBe('0');
  });

  it('a nested unit is a savepoint: its failure leaves the outer unit usable', async () => {
    const tx = ctx.get(Transactions);
    await tx.run(async (outer) => {
      await outer.query(`INSERT INTO categories (title, alias, bundle) VALUES ('D', 'tx-d', 'global')`);
      await expect(tx.run((inner) => inner.query(`INSERT INTO categories (title, alias, bundle) VALUES ('D2', 'tx-d', 'global')`), outer)).rejects.toThrow();
      await outer.query(`INSERT INTO categories (title, alias, bundle) VALUES ('E', 'tx-e', 'global')`);
    });
    const rows = await ctx.query<{ alias: string }>(`SELECT alias FROM categories WHERE alias LIKE 'tx-_' AND alias IN ('tx-d','tx-e') ORDER BY alias`);
    expect(rows.map((r) => r.alias)).toEqual(['tx-d', 'tx-e']);
  });
});

/** A statement only this suite declares, to find among the connection's prepared statements. */
const PROBE = prepared(`SELECT $1::int + 1 AS n /* transactions.service.spec probe */`);
const preparedProbes = (ctx: ServiceContext) =>
  ctx.query<{ name: string }>(
    `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%transactions.service.spec probe%' AND statement NOT LIKE '%pg_prepared_statements%'`,
  );

describe.each([
  ['on', {}, 1],
  ['off (DATABASE_PREPARED_STATEMENTS=false)', { DATABASE_PREPARED_STATEMENTS: 'false' }, 0],
])('prepared statements %s, one pooled connection', (_label, env, expected) => {
  let ctx: ServiceContext;
  beforeAll(async () => {
    ctx = await startServiceContext({ DATABASE_POOL_SIZE: '1', ...env });
  });
  afterAll(async () => {
    await ctx.close();
  });

  it('a declared statement answers the same; on the pool it is prepared once per connection, in a transaction it is plain text', async () => {
    for (let i = 0; i < 3; i++) expect(await ctx.query(PROBE, [i])).toEqual([{ n: i + 1 }]);
    const names = await preparedProbes(ctx);
    expect(names).toHaveLength(expected);
    if (expected) expect(names[0].name).toMatch(/^sf_\d+$/);
    const inTx = await ctx.get(Transactions).run((t) => t.query(PROBE, [41]));
    expect(inTx).toEqual([{ n: 42 }]);
    expect(await preparedProbes(ctx)).toHaveLength(expected);
  });
});
