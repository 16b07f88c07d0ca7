import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor, ISO } from './support/fixtures.js';

describe('categories', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let none: string;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'categories:read', { user: 'reader@example.com', plan: 'enterprise' });
    none = await tokenFor(app, 'fields:read', { user: 'other@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const create = (body: object, path = '/api/categories/new') => app.http.post(path).set('Authorization', auth).send(body);

  it('creates with 201 and the full record; color normalized to #rrggbb lower case', async () => {
    const res = await create({ title: 'Spring Promo', description: 'Season', bundle: 'asset', color: '4E5D9D' });
    expect(res.status).toBe(201);
    expect(res.body.category).toEqual({
      id: expect.any(Number),
      title: 'Spring Promo',
      alias: 'spring-promo',
      description: 'Season',
      color: '#4e5d9d',
      bundle: 'asset',
      createdAt: expect.stringMatching(ISO),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      createdBy: expect.any(Number),
      createdByUser: expect.any(String),
      modifiedBy: expect.any(Number),
      modifiedByUser: expect.any(String),
    });
    const hash = await create({ title: 'Hash', bundle: 'global', color: '#ABCDEF' });
    expect(hash.body.category.color).toBe('#abcdef');
    const noColor = await create({ title: 'No colour', bundle: 'global' }, '/api/categories');
    expect(noColor.status).toBe(201);
    expect(noColor.body.category.color).toBeNull();
  });

  it('generates aliases unique per bundle; a taken given alias is 409', async () => {
    const a = await create({ title: 'News', bundle: 'campaign' });
    const b = await create({ title: 'news', bundle: 'campaign' });
    const c = await create({ title: 'News', bundle: 'sms' });
    expect([a.body.category.alias, b.body.category.alias, c.body.category.alias]).toEqual(['news', 'news-2', 'news']);
    const err = expectError(await create({ title: 'Other', alias: 'news', bundle: 'campaign' }), 409, 'conflict');
    expect(err.details?.[0]).toMatchObject({ field: 'alias', existingId: a.body.category.id });
    expect((await create({ title: 'Other', alias: 'news', bundle: 'report' })).status).toBe(201);
    const given = await create({ title: 'Whatever', alias: 'my_alias-1', bundle: 'report' });
    expect(given.body.category.alias).toBe('my_alias-1');
  });

  it('refuses bad bodies with 400 and details', async () => {
    const cases: [object, string][] = [
      [{ bundle: 'asset' }, 'title'],
      [{ title: 'x' }, 'bundle'],
      [{ title: 'x', bundle: 'unknown' }, 'bundle'],
      [{ title: 'x', bundle: 'asset', color: 'red' }, 'color'],
      [{ title: 'x', bundle: 'asset', color: '#fff' }, 'color'],
      [{ title: 'x', bundle: 'asset', color: '#1234567' }, 'color'],
      [{ title: 'x', bundle: 'asset', alias: 'Not Valid' }, 'alias'],
      [{ title: '   ', bundle: 'asset' }, 'title'],
      [{ title: 'x', bundle: 'asset', extra: true }, 'extra'],
      [{ title: 5, bundle: 'asset' }, 'title'],
    ];
    for (const [body, field] of cases) {
      const err = expectError(await create(body), 400, 'validation_failed');
      expect(err.details?.map((d) => d.field)).toContain(field);
    }
  });

  it('gets, patches, puts and deletes in both path styles', async () => {
    const cat = (await create({ title: 'Edit Me', bundle: 'contact', description: 'keep', color: '#000000' })).body.category;
    const got = await app.http.get(`/api/categories/${cat.id}`).set('Authorization', auth);
    expect(got.status).toBe(200);
    expect(got.body.category).toEqual(cat);

    const patched = await app.http.patch(`/api/categories/${cat.id}/edit`).set('Authorization', auth).send({ color: 'FFFFFF' });
    expect(patched.status).toBe(200);
    expect(patched.body.category).toMatchObject({ title: 'Edit Me', description: 'keep', color: '#ffffff', alias: 'edit-me' });
    expect(patched.body.category.modifiedAt).toMatch(ISO);
    const patched2 = await app.http.patch(`/api/categories/${cat.id}`).set('Authorization', auth).send({ description: null });
    expect(patched2.body.category.description).toBeNull();
    expectError(await app.http.patch(`/api/categories/${cat.id}`).set('Authorization', auth).send({ color: 'nope' }), 400, 'validation_failed');
    expectError(await app.http.patch(`/api/categories/${cat.id}`).set('Authorization', auth).send({ bundle: 'nope' }), 400, 'validation_failed');
    expectError(await app.http.patch('/api/categories/777777/edit').set('Authorization', auth).send({ title: 'x' }), 404, 'not_found');

    const put = await app.http.put(`/api/categories/${cat.id}/edit`).set('Authorization', auth).send({ title: 'Replaced', bundle: 'point' });
    expect(put.status).toBe(200);
    expect(put.body.category).toMatchObject({ id: cat.id, title: 'Replaced', bundle: 'point', alias: 'edit-me', description: null, color: null });
    const putNew = await app.http.put('/api/categories/777777').set('Authorization', auth).send({ title: 'Fresh', bundle: 'point' });
    expect(putNew.status).toBe(201);
    expect(putNew.body.category.id).not.toBe(777777);

    const del = await app.http.delete(`/api/categories/${cat.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.category).toMatchObject({ id: cat.id, title: 'Replaced' });
    expectError(await app.http.get(`/api/categories/${cat.id}`).set('Authorization', auth), 404, 'not_found');
    const del2 = await app.http.delete(`/api/categories/${putNew.body.category.id}`).set('Authorization', auth);
    expect(del2.status).toBe(200);
    expectError(await app.http.delete(`/api/categories/${cat.id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get('/api/categories/abc').set('Authorization', auth), 404, 'not_found');
  });

  it('lists with the bundle filter, search, paging and ordering', async () => {
    for (const t of ['Zeta report', 'Alpha report', 'Mid report']) await create({ title: t, bundle: 'report', description: 'quarterly-list' });
    await create({ title: 'Quarterly-list sms', bundle: 'sms' });
    const res = await app.http.get('/api/categories').query({ search: 'QUARTERLY-LIST', bundle: 'report', orderBy: 'title' }).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(3);
    expect(res.body.categories.map((c: { title: string }) => c.title)).toEqual(['Alpha report', 'Mid report', 'Zeta report']);
    const page = await app.http
      .get('/api/categories')
      .query({ search: 'quarterly-list', limit: 2, page: 2, orderBy: 'title', orderByDir: 'desc' })
      .set('Authorization', auth);
    expect(page.body.total).toBe(4);
    expect(page.body.categories.map((c: { title: string }) => c.title)).toEqual(['Mid report', 'Alpha report']);
    const all = await app.http.get('/api/categories').query({ bundle: 'sms' }).set('Authorization', auth);
    expect(all.body.categories.every((c: { bundle: string }) => c.bundle === 'sms')).toBe(true);
    for (const q of [{ bundle: 'nope' }, { orderBy: 'password' }, { page: '0' }, { isPublished: 'true' }]) {
      expectError(await app.http.get('/api/categories').query(q).set('Authorization', auth), 400, 'validation_failed');
    }
  });

  it('checks permissions: categories:read reads only; other tokens get 403', async () => {
    expect((await app.http.get('/api/categories').set('Authorization', readOnly)).status).toBe(200);
    expectError(await app.http.post('/api/categories/new').set('Authorization', readOnly).send({ title: 'x', bundle: 'asset' }), 403, 'forbidden');
    expectError(await app.http.patch('/api/categories/1/edit').set('Authorization', readOnly).send({ title: 'x' }), 403, 'forbidden');
    expectError(await app.http.put('/api/categories/1').set('Authorization', readOnly).send({ title: 'x', bundle: 'asset' }), 403, 'forbidden');
    expectError(await app.http.delete('/api/categories/1/delete').set('Authorization', readOnly), 403, 'forbidden');
    expectError(await app.http.get('/api/categories').set('Authorization', none), 403, 'forbidden');
    expectError(await app.http.get('/api/categories'), 401, 'unauthorized');
  });

  it('GET /api/endpoints lists the category routes; the delete operation documents what happens to assets', async () => {
    const list = (await app.http.get('/api/endpoints').set('Authorization', auth)).body.endpoints as object[];
    for (const e of [
      { method: 'GET', path: '/api/categories', permission: 'categories:read' },
      { method: 'POST', path: '/api/categories/new', permission: 'categories:write' },
      { method: 'POST', path: '/api/categories', permission: 'categories:write' },
      { method: 'GET', path: '/api/categories/:id', permission: 'categories:read' },
      { method: 'PATCH', path: '/api/categories/:id/edit', permission: 'categories:write' },
      { method: 'PUT', path: '/api/categories/:id', permission: 'categories:write' },
      { method: 'DELETE', path: '/api/categories/:id/delete', permission: 'categories:delete' },
      { method: 'DELETE', path: '/api/categories/:id', permission: 'categories:delete' },
    ]) {
      expect(list).toContainEqual(e);
    }
    const doc = (await app.http.get('/api/docs-json')).body;
    expect(doc.paths['/api/categories/{id}/delete'].delete.description).toMatch(/category: null/);
  });
});
