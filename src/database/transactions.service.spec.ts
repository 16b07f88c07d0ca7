import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { UsersRepository } from '../auth/user.repository.js';
import { JobQueue } from '../jobs/job-queue.js';
import { NotificationsRepository } from '../notifications/notifications.repository.js';
import { outsideTransaction, poolOf, prepared, Transactions } from './transactions.js';

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

describe('a repository call that is not handed the transaction (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let transactions: Transactions;
  let dataSource: DataSource;
  /** Reads on a pooled connection of its own, whatever unit of work the caller is in. */
  let other: (sql: string, params: unknown[]) => Promise<{ n: number }[]>;
  beforeAll(async () => {
    ctx = await startServiceContext();
    transactions = ctx.get(Transactions);
    dataSource = ctx.get(DataSource);
    other = (sql, params) => poolOf(dataSource).query(sql, params);
  });
  afterAll(async () => {
    await ctx.close();
  });

  const notificationsNamed = (message: string) => other(`SELECT count(*)::int AS n FROM notifications WHERE message = $1`, [message]);
  const usersNamed = (email: string) => other(`SELECT count(*)::int AS n FROM users WHERE email = $1`, [email]);

  it('runs inside the unit of work: unseen by another connection before the commit, rolled back with the unit', async () => {
    const owner = await ctx.principal();
    const email = `forgotten-tx-${Date.now()}@example.test`;
    await expect(
      transactions.run(async () => {
        // Raw SQL on the repository's handle, and TypeORM's repository (save): neither is given the transaction.
        await ctx.get(NotificationsRepository).insert({ userId: owner.userId, type: 'report_ready', message: 'forgotten tx', details: {} });
        await ctx.get(UsersRepository).insert({ name: 'Forgotten', email, plan: 'basic', team: null });
        expect(await notificationsNamed('forgotten tx')).toEqual([{ n: 0 }]);
        expect(await usersNamed(email)).toEqual([{ n: 0 }]);
        throw new Error('the unit of work failed');
      }),
    ).rejects.toThrow('the unit of work failed');
    expect(await notificationsNamed('forgotten tx')).toEqual([{ n: 0 }]);
    expect(await usersNamed(email)).toEqual([{ n: 0 }]);
  });

  it('commits with the unit of work', async () => {
    const owner = await ctx.principal();
    await transactions.run(async () => {
      await ctx.get(NotificationsRepository).insert({ userId: owner.userId, type: 'report_ready', message: 'kept with the unit', details: {} });
      expect(await notificationsNamed('kept with the unit')).toEqual([{ n: 0 }]);
    });
    expect(await notificationsNamed('kept with the unit')).toEqual([{ n: 1 }]);
  });

  it('outside any unit of work the accessors answer the pool; inside one, its transaction', async () => {
    const pool = poolOf(dataSource);
    expect(transactions.db).toBe(pool);
    expect(transactions.handle()).toBe(pool);
    expect(transactions.manager()).toBe(dataSource.manager);
    await transactions.run(async (t) => {
      expect(transactions.db).toBe(t);
      expect(transactions.handle()).toBe(t);
      expect(transactions.manager()).toBe(t);
      expect(outsideTransaction(() => transactions.db)).toBe(pool);
    });
    expect(transactions.db).toBe(pool);
  });

  it('a nested unit without a handle joins the current one as a savepoint', async () => {
    await transactions.run(async (outer) => {
      await outer.query(`INSERT INTO categories (title, alias, bundle) VALUES ('F', 'tx-f', 'global')`);
      await expect(
        transactions.run(async (inner) => {
          expect(inner).toBe(outer);
          await inner.query(`INSERT INTO categories (title, alias, bundle) VALUES ('G', 'tx-g', 'global')`);
          throw new Error('inner failed');
        }),
      ).rejects.toThrow('inner failed');
      expect(await other(`SELECT count(*)::int AS n FROM categories WHERE alias = 'tx-f'`, [])).toEqual([{ n: 0 }]);
    });
    const rows = await other(`SELECT count(*)::int AS n FROM categories WHERE alias IN ('tx-f', 'tx-g')`, []);
    expect(rows).toEqual([{ n: 1 }]);
  });

  it('work started inside a unit of work that goes on after it runs on the pool, not on the transaction', async () => {
    const pool = poolOf(dataSource);
    let later: Promise<unknown> = Promise.resolve();
    await transactions.run(async (t) => {
      // A timer started outside the unit (as queued jobs and woken loops are) fires while the transaction is open.
      const timed = await new Promise((r) => outsideTransaction(() => setTimeout(() => r(transactions.db), 0)));
      expect(timed).toBe(pool);
      expect(transactions.db).toBe(t);
      // A promise left running past the commit finds the transaction ended.
      later = new Promise((r) => setTimeout(r, 20)).then(() => transactions.db);
    });
    expect(await later).toBe(pool);
  });

  it('a job enqueued inside a unit of work runs outside it, on the pool, even while the unit is open', async () => {
    const jobs = ctx.app.get<JobQueue>(JobQueue);
    let seen: unknown = null;
    const ran = new Promise<void>((r) =>
      jobs.handle('reports.run', async () => {
        seen = transactions.db;
        r();
      }),
    );
    await transactions.run(async (t) => {
      await jobs.enqueue('reports.run', { reportId: -1, trigger: 'manual' });
      await ran;
      expect(transactions.db).toBe(t);
    });
    expect(seen).toBe(poolOf(dataSource));
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
