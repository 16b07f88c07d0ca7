import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor, ISO } from './support/fixtures.js';

describe('point groups', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'pointGroups:read', { user: 'reader@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const create = (body: object, path = '/api/point-groups/new') => app.http.post(path).set('Authorization', auth).send(body);

  it('creates with 201 and the full record under both spellings', async () => {
    const res = await create({ name: 'Warm', description: 'Warm leads', isPublished: true, minimumPoints: 10, maximumPoints: 50, color: 'FF8800' });
    expect(res.status).toBe(201);
    expect(res.body.pointGroup).toEqual({
      id: expect.any(Number),
      name: 'Warm',
      description: 'Warm leads',
      isPublished: true,
      minimumPoints: 10,
      maximumPoints: 50,
      color: '#ff8800',
      createdAt: expect.stringMatching(ISO),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      createdBy: expect.any(Number),
      createdByUser: expect.any(String),
      modifiedBy: expect.any(Number),
      modifiedByUser: expect.any(String),
    });
    for (const path of ['/api/point_groups/new', '/api/point_groups', '/api/point-groups']) {
      const r = await create({ name: `Via ${path}`, minimumPoints: 0, maximumPoints: 0 }, path);
      expect(r.status).toBe(201);
      expect(r.body.pointGroup).toMatchObject({ isPublished: true, color: null, description: null });
    }
  });

  it('refuses bad ranges, colours and bodies with 400', async () => {
    const cases: [object, string][] = [
      [{ name: 'x', minimumPoints: 10, maximumPoints: 5 }, 'maximumPoints'],
      [{ name: 'x', minimumPoints: -1, maximumPoints: 5 }, 'minimumPoints'],
      [{ name: 'x', minimumPoints: 0, maximumPoints: -5 }, 'maximumPoints'],
      [{ name: 'x', minimumPoints: 1.5, maximumPoints: 5 }, 'minimumPoints'],
      [{ name: 'x', minimumPoints: '1', maximumPoints: 5 }, 'minimumPoints'],
      [{ name: 'x', maximumPoints: 5 }, 'minimumPoints'],
      [{ minimumPoints: 0, maximumPoints: 5 }, 'name'],
      [{ name: 'x', minimumPoints: 0, maximumPoints: 5, color: 'blue' }, 'color'],
      [{ name: 'x', minimumPoints: 0, maximumPoints: 5, isPublished: 'yes' }, 'isPublished'],
      [{ name: 'x', minimumPoints: 0, maximumPoints: 5, points: 3 }, 'points'],
    ];
    for (const [body, field] of cases) {
      const err = expectError(await create(body), 400, 'validation_failed');
      expect(err.details?.map((d) => d.field)).toContain(field);
    }
  });

  it('gets, patches (range checked against stored values), puts and deletes under both spellings', async () => {
    const g = (await create({ name: 'Hot', minimumPoints: 50, maximumPoints: 100, color: '#123abc' })).body.pointGroup;
    for (const base of ['/api/point-groups', '/api/point_groups']) {
      const got = await app.http.get(`${base}/${g.id}`).set('Authorization', auth);
      expect(got.status).toBe(200);
      expect(got.body.pointGroup.id).toBe(g.id);
    }
    const patched = await app.http.patch(`/api/point-groups/${g.id}/edit`).set('Authorization', auth).send({ maximumPoints: 80, isPublished: false });
    expect(patched.status).toBe(200);
    expect(patched.body.pointGroup).toMatchObject({ name: 'Hot', minimumPoints: 50, maximumPoints: 80, isPublished: false, color: '#123abc' });
    expect(patched.body.pointGroup.modifiedAt).toMatch(ISO);
    const err = expectError(await app.http.patch(`/api/point_groups/${g.id}`).set('Authorization', auth).send({ maximumPoints: 10 }), 400, 'validation_failed');
    expect(err.details?.[0].field).toBe('maximumPoints');
    expectError(await app.http.patch(`/api/point_groups/${g.id}`).set('Authorization', auth).send({ minimumPoints: 81 }), 400, 'validation_failed');
    expectError(await app.http.patch('/api/point-groups/999999/edit').set('Authorization', auth).send({ name: 'x' }), 404, 'not_found');

    const put = await app.http.put(`/api/point_groups/${g.id}`).set('Authorization', auth).send({ name: 'Hot 2', minimumPoints: 1, maximumPoints: 2 });
    expect(put.status).toBe(200);
    expect(put.body.pointGroup).toMatchObject({ id: g.id, name: 'Hot 2', isPublished: true, color: null, description: null });
    const putNew = await app.http.put('/api/point-groups/999999/edit').set('Authorization', auth).send({ name: 'New', minimumPoints: 1, maximumPoints: 2 });
    expect(putNew.status).toBe(201);
    expect(putNew.body.pointGroup.id).not.toBe(999999);

    const del = await app.http.delete(`/api/point-groups/${g.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.pointGroup.name).toBe('Hot 2');
    expectError(await app.http.get(`/api/point-groups/${g.id}`).set('Authorization', auth), 404, 'not_found');
    expect((await app.http.delete(`/api/point_groups/${putNew.body.pointGroup.id}`).set('Authorization', auth)).status).toBe(200);
    expectError(await app.http.delete(`/api/point_groups/${g.id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('lists with the isPublished filter, search, paging and ordering, under both spellings', async () => {
    await create({ name: 'Tier Gamma', description: 'listing-tier', minimumPoints: 30, maximumPoints: 40, isPublished: false });
    await create({ name: 'Tier Alpha', description: 'listing-tier', minimumPoints: 10, maximumPoints: 20 });
    await create({ name: 'Tier Beta', description: 'listing-tier', minimumPoints: 20, maximumPoints: 30 });
    const res = await app.http
      .get('/api/point-groups')
      .query({ search: 'listing-tier', orderBy: 'minimumPoints', orderByDir: 'desc' })
      .set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(3);
    expect(res.body.pointGroups.map((g: { name: string }) => g.name)).toEqual(['Tier Gamma', 'Tier Beta', 'Tier Alpha']);
    for (const [value, names] of [
      ['false', ['Tier Gamma']],
      ['0', ['Tier Gamma']],
      ['true', ['Tier Alpha', 'Tier Beta']],
    ] as const) {
      const r = await app.http.get('/api/point_groups').query({ search: 'listing-tier', isPublished: value, orderBy: 'name' }).set('Authorization', auth);
      expect(r.body.pointGroups.map((g: { name: string }) => g.name)).toEqual(names);
    }
    const page = await app.http.get('/api/point_groups').query({ search: 'listing-tier', limit: 1, page: 3, orderBy: 'name' }).set('Authorization', auth);
    expect(page.body.pointGroups.map((g: { name: string }) => g.name)).toEqual(['Tier Gamma']);
    for (const q of [{ isPublished: 'yes' }, { orderBy: 'nope' }, { limit: '0' }, { bundle: 'x' }]) {
      expectError(await app.http.get('/api/point-groups').query(q).set('Authorization', auth), 400, 'validation_failed');
    }
  });

  it('checks permissions under both spellings', async () => {
    expect((await app.http.get('/api/point-groups').set('Authorization', readOnly)).status).toBe(200);
    expect((await app.http.get('/api/point_groups').set('Authorization', readOnly)).status).toBe(200);
    expectError(
      await app.http.post('/api/point-groups/new').set('Authorization', readOnly).send({ name: 'x', minimumPoints: 0, maximumPoints: 1 }),
      403,
      'forbidden',
    );
    expectError(
      await app.http.post('/api/point_groups').set('Authorization', readOnly).send({ name: 'x', minimumPoints: 0, maximumPoints: 1 }),
      403,
      'forbidden',
    );
    expectError(await app.http.patch('/api/point_groups/1').set('Authorization', readOnly).send({ name: 'x' }), 403, 'forbidden');
    expectError(await app.http.delete('/api/point-groups/1/delete').set('Authorization', readOnly), 403, 'forbidden');
    const other = await tokenFor(app, 'categories:read', { user: 'c@example.com', plan: 'enterprise' });
    expectError(await app.http.get('/api/point-groups').set('Authorization', other), 403, 'forbidden');
  });

  it('GET /api/endpoints lists both spellings', async () => {
    const list = (await app.http.get('/api/endpoints').set('Authorization', auth)).body.endpoints as object[];
    for (const base of ['/api/point-groups', '/api/point_groups']) {
      for (const e of [
        { method: 'GET', path: base, permission: 'pointGroups:read' },
        { method: 'POST', path: `${base}/new`, permission: 'pointGroups:write' },
        { method: 'POST', path: base, permission: 'pointGroups:write' },
        { method: 'GET', path: `${base}/:id`, permission: 'pointGroups:read' },
        { method: 'PATCH', path: `${base}/:id/edit`, permission: 'pointGroups:write' },
        { method: 'PUT', path: `${base}/:id`, permission: 'pointGroups:write' },
        { method: 'DELETE', path: `${base}/:id/delete`, permission: 'pointGroups:delete' },
      ]) {
        expect(list).toContainEqual(e);
      }
    }
  });
});
