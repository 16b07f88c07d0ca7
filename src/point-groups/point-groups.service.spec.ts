import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { PointGroupsService } from './point-groups.service.js';

describe('PointGroupsService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let groups: PointGroupsService;

  beforeAll(async () => {
    groups = spec.ctx.get(PointGroupsService);
  });

  it('creates published by default, normalises the colour, and reads it back', async () => {
    const g = await groups.create({ name: ' Warm ', minimumPoints: 1, maximumPoints: 5, color: 'FF8800' }, spec.who);
    expect(g).toMatchObject({
      name: 'Warm',
      isPublished: true,
      color: '#ff8800',
      description: null,
      minimumPoints: 1,
      maximumPoints: 5,
      createdBy: spec.who.userId,
    });
    expect(await groups.get(g.id)).toEqual(g);
    await expect(groups.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a bad range, a bad colour, nulls and an empty name', async () => {
    expect((await spec.ctx.failure(groups.create({ name: 'x', minimumPoints: 6, maximumPoints: 5 }, spec.who))).details?.[0].field).toBe('maximumPoints');
    expect((await spec.ctx.failure(groups.create({ name: 'x', minimumPoints: 0, maximumPoints: 5, color: 'blue' }, spec.who))).details?.[0].field).toBe(
      'color',
    );
    const e = await spec.ctx.failure(groups.create({ name: ' ', minimumPoints: null, maximumPoints: 5, isPublished: null } as never, spec.who));
    expect(e.details?.map((d) => d.field).sort()).toEqual(['isPublished', 'minimumPoints', 'name']);
  });

  it('PATCH keeps what is not given and checks the range against the stored bound', async () => {
    const g = await groups.create({ name: 'P', description: 'keep', minimumPoints: 10, maximumPoints: 20, isPublished: false }, spec.who);
    expect(await groups.patch(g.id, { maximumPoints: 15 }, spec.who)).toMatchObject({
      description: 'keep',
      isPublished: false,
      minimumPoints: 10,
      maximumPoints: 15,
    });
    expect((await spec.ctx.failure(groups.patch(g.id, { minimumPoints: 16 }, spec.who))).details?.[0].field).toBe('minimumPoints');
    expect((await spec.ctx.failure(groups.patch(g.id, { maximumPoints: 9 }, spec.who))).details?.[0].field).toBe('maximumPoints');
    expect(await groups.patch(g.id, { color: '#00ff00', description: null }, spec.who)).toMatchObject({
      color: '#00ff00',
      description: null,
      modifiedBy: spec.who.userId,
    });
    await expect(groups.patch(987654, { name: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (optional properties reset) or creates with a new id', async () => {
    const g = await groups.create({ name: 'R', description: 'gone', minimumPoints: 0, maximumPoints: 1, isPublished: false, color: '#000000' }, spec.who);
    const r = await groups.put(g.id, { name: 'R2', minimumPoints: 2, maximumPoints: 3 }, spec.who);
    expect(r).toMatchObject({ created: false, pointGroup: { id: g.id, name: 'R2', description: null, isPublished: true, color: null, minimumPoints: 2 } });
    const n = await groups.put(987654, { name: 'New', minimumPoints: 0, maximumPoints: 0 }, spec.who);
    expect(n.created).toBe(true);
    expect(n.pointGroup.id).not.toBe(987654);
  });

  it('lists with search and the isPublished filter', async () => {
    const tag = `pg${Date.now()}`;
    await groups.create({ name: `${tag} on`, minimumPoints: 0, maximumPoints: 1 }, spec.who);
    await groups.create({ name: `${tag} off`, minimumPoints: 0, maximumPoints: 1, isPublished: false }, spec.who);
    expect((await groups.list({ search: tag })).total).toBe(2);
    expect((await groups.list({ search: tag, isPublished: '0' })).pointGroups.map((g) => g.name)).toEqual([`${tag} off`]);
    await expect(groups.list({ isPublished: 'maybe' })).rejects.toMatchObject({ status: 400 });
  });

  it('DELETE answers the point group as it was, exactly once under parallel calls', async () => {
    const g = await groups.create({ name: 'Doomed', minimumPoints: 0, maximumPoints: 1 }, spec.who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => groups.remove(g.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
  });

  it('parallel PATCHes of different properties all land, and the range holds', async () => {
    const g = await groups.create({ name: 'Busy', minimumPoints: 0, maximumPoints: 100 }, spec.who);
    await Promise.all([
      groups.patch(g.id, { name: 'Busy 2' }, spec.who),
      groups.patch(g.id, { description: 'd' }, spec.who),
      groups.patch(g.id, { isPublished: false }, spec.who),
      groups.patch(g.id, { minimumPoints: 5 }, spec.who),
      groups.patch(g.id, { maximumPoints: 50 }, spec.who),
    ]);
    expect(await groups.get(g.id)).toMatchObject({ name: 'Busy 2', description: 'd', isPublished: false, minimumPoints: 5, maximumPoints: 50 });
  });
});
