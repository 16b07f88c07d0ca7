import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor, ISO } from './support/fixtures.js';

describe('fields', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noFields: string;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'fields:read', { user: 'reader@example.com', plan: 'enterprise' });
    noFields = await tokenFor(app, 'contacts:read,contacts:write', { user: 'other@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const post = (object: string, body: object) => app.http.post(`/api/fields/${object}/new`).set('Authorization', auth).send(body);

  it('creates a field with 201 and the full record (dateAdded/dateModified, audit, [] properties)', async () => {
    const res = await post('contact', { label: 'Favourite Colour', type: 'text', description: 'What they like', group: 'personal', order: 3 });
    expect(res.status).toBe(201);
    const f = res.body.field;
    expect(f).toEqual({
      id: expect.any(Number),
      isPublished: true,
      publishUp: null,
      publishDown: null,
      dateAdded: expect.stringMatching(ISO),
      createdBy: expect.any(Number),
      createdByUser: expect.any(String),
      dateModified: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      modifiedBy: expect.any(Number),
      modifiedByUser: expect.any(String),
      label: 'Favourite Colour',
      alias: 'favourite_colour',
      description: 'What they like',
      type: 'text',
      group: 'personal',
      order: 3,
      object: 'contact',
      defaultValue: null,
      isRequired: false,
      isPubliclyUpdatable: false,
      isUniqueIdentifier: false,
      properties: [],
    });
    expect(f.createdAt).toBeUndefined();
  });

  it('generates unique aliases per object and refuses a taken client-given alias with 409', async () => {
    const a = await post('contact', { label: 'Shoe Size', type: 'number' });
    const b = await post('contact', { label: 'shoe size!', type: 'number' });
    const c = await post('company', { label: 'Shoe Size', type: 'number' });
    expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
    expect(a.body.field.alias).toBe('shoe_size');
    expect(b.body.field.alias).toBe('shoe_size_2');
    expect(c.body.field.alias).toBe('shoe_size');
    const err = expectError(await post('contact', { label: 'Other', alias: 'shoe_size', type: 'text' }), 409, 'conflict');
    expect(err.details?.[0]).toMatchObject({ field: 'alias', existingId: a.body.field.id });
    expectError(await post('contact', { label: 'Other', alias: 'Bad Alias', type: 'text' }), 400, 'validation_failed');
  });

  it('generates distinct aliases for concurrent creates with the same label', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => post('company', { label: 'Race Label' })));
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    const aliases = results.map((r) => r.body.field.alias).sort();
    expect(new Set(aliases).size).toBe(5);
    expect(aliases).toContain('race_label');
  });

  it('creates select and multiselect fields with properties.list and refuses bad properties', async () => {
    const list = [
      { label: 'Gold', value: 'gold' },
      { label: 'Silver', value: 'silver' },
    ];
    const ms = await post('contact', { label: 'Interests', type: 'multiselect', properties: { list } });
    expect(ms.status).toBe(201);
    expect(ms.body.field.properties).toEqual({ list });
    const empty = await post('contact', { label: 'Empty obj', type: 'number', properties: {} });
    expect(empty.body.field.properties).toEqual([]);

    const cases: [object, string][] = [
      [{ label: 'S1', type: 'select' }, 'properties.list'],
      [{ label: 'S2', type: 'select', properties: { list: [] } }, 'properties.list'],
      [{ label: 'S3', type: 'select', properties: { list: [{ label: 'A', value: 1 }] } }, 'properties.list[0].value'],
      [{ label: 'S4', type: 'text', properties: { list } }, 'properties'],
      [{ label: 'S5', type: 'radio' }, 'type'],
      [{ label: 'S6', type: 'select', properties: { list }, defaultValue: 'bronze' }, 'defaultValue'],
      [{ label: 'S7', type: 'number', defaultValue: 'ten' }, 'defaultValue'],
      [{ type: 'text' }, 'label'],
      [{ label: 'S8', bogus: 1 }, 'bogus'],
      [{ label: 'S9', isUniqueIdentifier: 0 }, 'isUniqueIdentifier'],
      [{ label: 'S10', publishUp: '2026-01-02T00:00:00Z', publishDown: '2026-01-01T00:00:00Z' }, 'publishDown'],
      [{ label: 'S11', publishUp: '2026-01-02T00:00:00' }, 'publishUp'],
    ];
    for (const [body, field] of cases) {
      const err = expectError(await post('contact', body), 400, 'validation_failed');
      expect(err.details?.map((d) => d.field)).toContain(field);
    }
  });

  it('refuses an object in the body that does not match the path, and unknown objects with 404', async () => {
    const err = expectError(await post('contact', { label: 'Mismatch', object: 'company' }), 400, 'validation_failed');
    expect(err.details?.[0].field).toBe('object');
    expect((await post('contact', { label: 'Match', object: 'contact' })).status).toBe(201);
    expectError(await post('lead', { label: 'X' }), 404, 'not_found');
    expectError(await app.http.get('/api/fields/lead').set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get('/api/fields/lead/1').set('Authorization', auth), 404, 'not_found');
  });

  it('gets one field by object and id; 404 for the other object or a missing id', async () => {
    const f = (await post('company', { label: 'Employees', type: 'number' })).body.field;
    const got = await app.http.get(`/api/fields/company/${f.id}`).set('Authorization', auth);
    expect(got.status).toBe(200);
    expect(got.body.field).toEqual(f);
    expectError(await app.http.get(`/api/fields/contact/${f.id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get(`/api/fields/company/999999`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get(`/api/fields/company/abc`).set('Authorization', auth), 404, 'not_found');
    const collection = await app.http.get(`/api/fields/${f.id}`).set('Authorization', auth);
    expect(collection.status).toBe(200);
    expect(collection.body.field).toEqual(f);
  });

  it('PATCH changes only the supplied values; 404 on a missing id', async () => {
    const f = (await post('contact', { label: 'Nickname', type: 'text', description: 'd', group: 'personal', isRequired: false })).body.field;
    const res = await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ description: 'changed', isPublished: false });
    expect(res.status).toBe(200);
    expect(res.body.field).toMatchObject({ label: 'Nickname', alias: 'nickname', group: 'personal', description: 'changed', isPublished: false });
    expect(res.body.field.dateModified).toMatch(ISO);
    expect(res.body.field.modifiedByUser).toEqual(expect.any(String));
    expectError(await app.http.patch(`/api/fields/contact/987654/edit`).set('Authorization', auth).send({ label: 'x' }), 404, 'not_found');
    expectError(await app.http.patch(`/api/fields/company/${f.id}/edit`).set('Authorization', auth).send({ label: 'x' }), 404, 'not_found');
    expectError(await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ object: 'company' }), 400, 'validation_failed');
    expectError(await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ label: null }), 400, 'validation_failed');
    // changing to select needs a list
    const err = expectError(
      await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ type: 'select' }),
      400,
      'validation_failed',
    );
    expect(err.details?.[0].field).toBe('properties.list');
  });

  it('PUT replaces (200, omitted optional properties reset, alias kept) or creates (201, new id)', async () => {
    const f = (await post('contact', { label: 'Region', type: 'text', description: 'd', group: 'g', order: 7, isRequired: true })).body.field;
    const put = await app.http.put(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ label: 'Sales Region' });
    expect(put.status).toBe(200);
    expect(put.body.field).toMatchObject({
      id: f.id,
      label: 'Sales Region',
      alias: 'region',
      description: null,
      group: null,
      order: 0,
      isRequired: false,
      type: 'text',
    });
    const created = await app.http.put(`/api/fields/company/888888/edit`).set('Authorization', auth).send({ label: 'Made by PUT', type: 'boolean' });
    expect(created.status).toBe(201);
    expect(created.body.field.id).not.toBe(888888);
    expect(created.body.field).toMatchObject({ object: 'company', alias: 'made_by_put', type: 'boolean' });
    expectError(await app.http.put(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({}), 400, 'validation_failed');
  });

  it('DELETE answers the field as it was, then it is gone', async () => {
    const f = (await post('company', { label: 'Temp' })).body.field;
    const del = await app.http.delete(`/api/fields/company/${f.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.field).toEqual(f);
    expectError(await app.http.get(`/api/fields/company/${f.id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.delete(`/api/fields/company/${f.id}/delete`).set('Authorization', auth), 404, 'not_found');
  });

  it('lists per object with total, filters, search, paging and ordering', async () => {
    for (let i = 0; i < 3; i++) await post('company', { label: `Listed ${i}`, type: i === 1 ? 'url' : 'textarea', isPublished: i !== 2 });
    const all = await app.http.get('/api/fields/company').query({ search: 'listed', orderBy: 'label', orderByDir: 'desc' }).set('Authorization', auth);
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(3);
    expect(all.body.fields.map((f: { label: string }) => f.label)).toEqual(['Listed 2', 'Listed 1', 'Listed 0']);
    expect(all.body.fields.every((f: { object: string }) => f.object === 'company')).toBe(true);

    const published = await app.http.get('/api/fields/company').query({ search: 'listed', isPublished: 'false' }).set('Authorization', auth);
    expect(published.body.fields.map((f: { label: string }) => f.label)).toEqual(['Listed 2']);
    const byType = await app.http.get('/api/fields/company').query({ search: 'listed', type: 'url' }).set('Authorization', auth);
    expect(byType.body.fields.map((f: { label: string }) => f.label)).toEqual(['Listed 1']);
    const page = await app.http.get('/api/fields/company').query({ search: 'LISTED', limit: 1, page: 2, orderBy: 'label' }).set('Authorization', auth);
    expect(page.body.total).toBe(3);
    expect(page.body.fields.map((f: { label: string }) => f.label)).toEqual(['Listed 1']);

    for (const q of [{ type: 'radio' }, { isPublished: 'maybe' }, { object: 'contact' }, { orderBy: 'secret' }, { limit: '500' }]) {
      expectError(await app.http.get('/api/fields/company').query(q).set('Authorization', auth), 400, 'validation_failed');
    }
  });

  it('collection style: list both objects with an object filter, POST with object in the body, GET/PATCH/PUT/DELETE by id', async () => {
    const both = await app.http.get('/api/fields').query({ limit: 200 }).set('Authorization', auth);
    expect(both.status).toBe(200);
    const objects = new Set(both.body.fields.map((f: { object: string }) => f.object));
    expect(objects).toEqual(new Set(['contact', 'company']));
    expect(both.body.total).toBe(both.body.fields.length);
    const onlyContact = await app.http.get('/api/fields').query({ object: 'contact', limit: 200 }).set('Authorization', auth);
    expect(onlyContact.body.fields.every((f: { object: string }) => f.object === 'contact')).toBe(true);
    expect(onlyContact.body.total).toBeLessThan(both.body.total);
    expectError(await app.http.get('/api/fields').query({ object: 'lead' }).set('Authorization', auth), 400, 'validation_failed');

    const missingObject = expectError(await app.http.post('/api/fields').set('Authorization', auth).send({ label: 'No object' }), 400, 'validation_failed');
    expect(missingObject.details?.map((d) => d.field)).toContain('object');
    const created = await app.http.post('/api/fields').set('Authorization', auth).send({ label: 'Collection Field', object: 'company' });
    expect(created.status).toBe(201);
    const id = created.body.field.id;
    expect(created.body.field.object).toBe('company');

    const patched = await app.http.patch(`/api/fields/${id}`).set('Authorization', auth).send({ order: 9 });
    expect(patched.status).toBe(200);
    expect(patched.body.field.order).toBe(9);
    expectError(await app.http.patch(`/api/fields/${id}`).set('Authorization', auth).send({ object: 'contact' }), 400, 'validation_failed');
    expectError(await app.http.patch(`/api/fields/765432`).set('Authorization', auth).send({ order: 1 }), 404, 'not_found');

    const put = await app.http.put(`/api/fields/${id}`).set('Authorization', auth).send({ label: 'Collection Field 2', object: 'company' });
    expect(put.status).toBe(200);
    expect(put.body.field.order).toBe(0);
    expectError(await app.http.put(`/api/fields/${id}`).set('Authorization', auth).send({ label: 'No object' }), 400, 'validation_failed');
    const putNew = await app.http.put(`/api/fields/765432`).set('Authorization', auth).send({ label: 'Put New', object: 'contact' });
    expect(putNew.status).toBe(201);

    const del = await app.http.delete(`/api/fields/${id}`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.field.label).toBe('Collection Field 2');
    expectError(await app.http.get(`/api/fields/${id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('needs fields:read to read and fields:write / fields:delete to change', async () => {
    expect((await app.http.get('/api/fields/contact').set('Authorization', readOnly)).status).toBe(200);
    expect((await app.http.get('/api/fields').set('Authorization', readOnly)).status).toBe(200);
    expectError(await app.http.post('/api/fields/contact/new').set('Authorization', readOnly).send({ label: 'x' }), 403, 'forbidden');
    expectError(await app.http.post('/api/fields').set('Authorization', readOnly).send({ label: 'x', object: 'contact' }), 403, 'forbidden');
    expectError(await app.http.patch('/api/fields/contact/1/edit').set('Authorization', readOnly).send({ label: 'x' }), 403, 'forbidden');
    expectError(await app.http.put('/api/fields/1').set('Authorization', readOnly).send({ label: 'x', object: 'contact' }), 403, 'forbidden');
    expectError(await app.http.delete('/api/fields/contact/1/delete').set('Authorization', readOnly), 403, 'forbidden');
    expectError(await app.http.delete('/api/fields/1').set('Authorization', readOnly), 403, 'forbidden');
    expectError(await app.http.get('/api/fields/contact').set('Authorization', noFields), 403, 'forbidden');
    expectError(await app.http.get('/api/fields/contact/1').set('Authorization', noFields), 403, 'forbidden');
    expectError(await app.http.get('/api/fields/contact'), 401, 'unauthorized');
  });

  it('GET /api/endpoints lists the field routes with their permissions', async () => {
    const res = await app.http.get('/api/endpoints').set('Authorization', auth);
    expect(res.status).toBe(200);
    const list = res.body.endpoints as { method: string; path: string; permission: string }[];
    const expected = [
      ['GET', '/api/fields', 'fields:read'],
      ['POST', '/api/fields', 'fields:write'],
      ['GET', '/api/fields/:segment', 'fields:read'],
      ['PATCH', '/api/fields/:id', 'fields:write'],
      ['PUT', '/api/fields/:id', 'fields:write'],
      ['DELETE', '/api/fields/:id', 'fields:delete'],
      ['GET', '/api/fields/:object/:id', 'fields:read'],
      ['POST', '/api/fields/:object/new', 'fields:write'],
      ['PATCH', '/api/fields/:object/:id/edit', 'fields:write'],
      ['PUT', '/api/fields/:object/:id/edit', 'fields:write'],
      ['DELETE', '/api/fields/:object/:id/delete', 'fields:delete'],
    ];
    for (const [method, path, permission] of expected) expect(list).toContainEqual({ method, path, permission });
  });

  it('documents the field routes in the OpenAPI document with the record schema', async () => {
    const res = await app.http.get('/api/docs-json');
    expect(res.status).toBe(200);
    const paths = res.body.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>;
    expect(paths['/api/fields/{object}/new'].post.responses['201']).toBeDefined();
    expect(paths['/api/fields/{object}/{id}/edit'].put.responses['201']).toBeDefined();
    expect(res.body.components.schemas.FieldRecordDto.properties.dateAdded).toBeDefined();
  });
});
