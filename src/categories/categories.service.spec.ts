import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Transactions } from '../database/transactions.js';
import { CategoriesRepository } from './categories.repository.js';
import { CategoriesService } from './categories.service.js';

describe('CategoriesService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let categories: CategoriesService;

  beforeAll(async () => {
    categories = spec.ctx.get(CategoriesService);
  });

  it('creates with a generated alias unique per bundle, normalises the colour', async () => {
    const a = await categories.create({ title: 'Événements & News', bundle: 'campaign', color: 'ABCDEF' }, spec.who);
    expect(a).toMatchObject({ alias: 'evenements-news', color: '#abcdef', description: null, createdBy: spec.who.userId });
    const b = await categories.create({ title: 'evenements news', bundle: 'campaign' }, spec.who);
    const c = await categories.create({ title: 'Evenements News', bundle: 'sms' }, spec.who);
    expect([b.alias, c.alias]).toEqual(['evenements-news-2', 'evenements-news']);
    expect((await categories.create({ title: '!!!', bundle: 'global' }, spec.who)).alias).toBe('category');
    expect(await categories.get(a.id)).toEqual(a);
  });

  it('a given alias that is taken in the bundle is a 409 naming the existing category', async () => {
    const a = await categories.create({ title: 'Taken', alias: 'taken-one', bundle: 'asset' }, spec.who);
    const e = await spec.ctx.failure(categories.create({ title: 'Other', alias: 'taken-one', bundle: 'asset' }, spec.who));
    expect(e.status).toBe(409);
    expect(e.details?.[0]).toMatchObject({ field: 'alias', existingId: a.id });
    expect((await categories.create({ title: 'Other', alias: 'taken-one', bundle: 'report' }, spec.who)).alias).toBe('taken-one');
  });

  it('refuses null title or bundle, an empty title and a bad colour, all at once', async () => {
    const e = await spec.ctx.failure(categories.create({ title: ' ', bundle: null, color: 'blue' } as never, spec.who));
    expect(e.details?.map((d) => d.field).sort()).toEqual(['bundle', 'color', 'title']);
  });

  it('PATCH changes only the given properties; the alias stays unless given', async () => {
    const c = await categories.create({ title: 'Patch me', bundle: 'contact', description: 'keep', color: '#000000' }, spec.who);
    const p = await categories.patch(c.id, { title: 'Patched' }, spec.who);
    expect(p).toMatchObject({ title: 'Patched', alias: 'patch-me', description: 'keep', color: '#000000', modifiedBy: spec.who.userId });
    expect((await categories.patch(c.id, { color: null, alias: 'new-alias' }, spec.who)).color).toBeNull();
    expect((await categories.get(c.id)).alias).toBe('new-alias');
    await expect(categories.patch(987654, { title: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (optional properties reset, alias kept when omitted) or creates with a new id', async () => {
    const c = await categories.create({ title: 'Put me', bundle: 'point', description: 'gone', color: '#111111' }, spec.who);
    const r = await categories.put(c.id, { title: 'Put again', bundle: 'point' }, spec.who);
    expect(r).toMatchObject({ created: false, category: { id: c.id, alias: 'put-me', description: null, color: null, title: 'Put again' } });
    const n = await categories.put(987654, { title: 'Put me', bundle: 'point' }, spec.who);
    expect(n.created).toBe(true);
    expect(n.category.alias).toBe('put-me-2');
  });

  it('generated aliases never collide under parallel creates, also inside a transaction', async () => {
    const made = await Promise.all(Array.from({ length: 12 }, () => categories.create({ title: 'Rush', bundle: 'global' }, spec.who)));
    expect(new Set(made.map((c) => c.alias)).size).toBe(12);
    // Inside a caller's transaction each try is a savepoint: a candidate taken by a concurrent,
    // not yet committed insert (invisible to the hint) fails, and the caller's transaction goes on.
    const tx = spec.ctx.get(Transactions);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const blocker = tx.run(async (b) => {
      await b.query(`INSERT INTO categories (title, alias, bundle) VALUES ('x', 'late', 'global')`);
      await held;
    });
    await new Promise((r) => setTimeout(r, 100));
    const inTx = tx.run(async (t) => {
      const created = await categories.create({ title: 'Late', bundle: 'global' }, spec.who, t);
      const after = await t.query(`SELECT count(*)::int AS n FROM categories WHERE alias LIKE 'late%'`);
      return { created, after: after[0].n as number };
    });
    await new Promise((r) => setTimeout(r, 200));
    release();
    await blocker;
    const done = await inTx;
    expect(done.created.alias).toBe('late-2');
    expect(done.after).toBe(2);
  });

  it('lists with search, the bundle filter and ordering', async () => {
    const tag = `cat${Date.now()}`;
    await categories.create({ title: `${tag} b`, bundle: 'sms' }, spec.who);
    await categories.create({ title: `${tag} a`, bundle: 'sms' }, spec.who);
    await categories.create({ title: `${tag} c`, bundle: 'report' }, spec.who);
    const sms = await categories.list({ search: tag, bundle: 'sms', orderBy: 'title' });
    expect([sms.total, sms.categories.map((c) => c.title)]).toEqual([2, [`${tag} a`, `${tag} b`]]);
    await expect(categories.list({ bundle: 'nope' })).rejects.toMatchObject({ status: 400 });
  });

  it('DELETE answers the category as it was, exactly once under parallel calls', async () => {
    const c = await categories.create({ title: 'Doomed', bundle: 'global' }, spec.who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => categories.remove(c.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
    await expect(categories.get(c.id)).rejects.toMatchObject({ status: 404 });
  });

  it('parallel PATCHes of different properties all land', async () => {
    const c = await categories.create({ title: 'Busy', bundle: 'global' }, spec.who);
    await Promise.all([
      categories.patch(c.id, { title: 'Busy 2' }, spec.who),
      categories.patch(c.id, { description: 'd' }, spec.who),
      categories.patch(c.id, { color: '#123456' }, spec.who),
      categories.patch(c.id, { alias: `busy-${Date.now()}` }, spec.who),
    ]);
    expect(await categories.get(c.id)).toMatchObject({ title: 'Busy 2', description: 'd', color: '#123456', alias: expect.stringMatching(/^busy-\d+$/) });
  });

  it('the repository reads categories by id for other features (duplicates and unknown ids ignored)', async () => {
    const a = await categories.create({ title: 'By id A', bundle: 'asset' }, spec.who);
    const b = await categories.create({ title: 'By id B', bundle: 'asset' }, spec.who);
    const repo = spec.ctx.get(CategoriesRepository);
    const found = await repo.findByIds([b.id, a.id, a.id, 987654]);
    expect(found.map((c) => c.id).sort((x, y) => x - y)).toEqual([a.id, b.id]);
    expect(await repo.findByIds([])).toEqual([]);
    expect(await repo.exists(a.id)).toBe(true);
  });
});
