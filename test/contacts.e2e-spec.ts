import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';

describe('contacts', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'contacts:read', { user: 'reader@example.com' });
  });
  afterAll(async () => app?.stop());

  const create = (body: object) => app.http.post('/api/contacts/new').set('Authorization', auth).send(body);

  it('creates a contact with 201 and the full record', async () => {
    const res = await create({ name: 'Ada Lovelace', email: 'ada@example.com', phone: '+44 20 7946 0958', company: 'Analytical Engines', title: 'Countess' });
    expect(res.status).toBe(201);
    expect(res.body.contact).toMatchObject({
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      phone: '+442079460958',
      company: 'Analytical Engines',
      title: 'Countess',
      owner: null,
      createdBy: expect.any(Number),
      createdByUser: expect.any(String),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
    });
    expect(res.body.contact.id).toEqual(expect.any(Number));
    expect(res.body.contact.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    expect(res.body.contact.modifiedAt).toBe(res.body.contact.createdAt);
    expect(res.body.contact.modifiedBy).toBe(res.body.contact.createdBy);
  });

  it('answers 409 with the existing id for a duplicate email, case-insensitively', async () => {
    const first = await create({ name: 'Dup', email: 'dup@example.com' });
    const res = await create({ name: 'Dup 2', email: 'DUP@Example.com' });
    const err = expectError(res, 409, 'conflict');
    expect(err.details?.[0]).toMatchObject({ field: 'email', existingId: first.body.contact.id });
  });

  it('refuses missing required fields, bad email and unknown properties with details', async () => {
    const err = expectError(await create({ email: 'not-an-email', bogus: true }), 400, 'validation_failed');
    const fields = err.details!.map((d) => d.field).sort();
    expect(fields).toEqual(['bogus', 'email', 'name']);
  });

  it('gets, patches, puts and deletes', async () => {
    const id = (await create({ name: 'Grace Hopper', email: 'grace@example.com', company: 'Navy' })).body.contact.id;
    const got = await app.http.get(`/api/contacts/${id}`).set('Authorization', auth);
    expect(got.status).toBe(200);
    expect(got.body.contact.email).toBe('grace@example.com');

    const patched = await app.http.patch(`/api/contacts/${id}/edit`).set('Authorization', auth).send({ title: 'Rear Admiral' });
    expect(patched.status).toBe(200);
    expect(patched.body.contact).toMatchObject({ title: 'Rear Admiral', company: 'Navy', modifiedByUser: expect.any(String) });
    expect(patched.body.contact.modifiedAt).not.toBeNull();

    const put = await app.http.put(`/api/contacts/${id}/edit`).set('Authorization', auth).send({ name: 'Grace B. Hopper', email: 'grace@example.com' });
    expect(put.status).toBe(200);
    expect(put.body.contact).toMatchObject({ name: 'Grace B. Hopper', company: null, title: null });

    const putNew = await app.http.put(`/api/contacts/999999`).set('Authorization', auth).send({ name: 'New', email: 'new-by-put@example.com' });
    expect(putNew.status).toBe(201);
    expect(putNew.body.contact.id).not.toBe(999999);

    const del = await app.http.delete(`/api/contacts/${id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.contact.id).toBe(id);
    expectError(await app.http.get(`/api/contacts/${id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.delete(`/api/contacts/${id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('null on a required property is a 400, never a 500', async () => {
    const id = (await create({ name: 'Nully', email: 'nully@example.com' })).body.contact.id;
    for (const body of [{ name: null }, { email: null }, { name: '' }]) {
      expectError(await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send(body), 400, 'validation_failed');
    }
    const cleared = await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ company: 'Acme' });
    expect(cleared.body.contact.company).toBe('Acme');
    expect((await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ company: null })).body.contact.company).toBeNull();
  });

  it('50 parallel creates of the same email: one 201, the rest 409', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => create({ name: `Racer ${i}`, email: 'race@example.com' })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 201)) expectError(r, 409, 'conflict');
  });

  it('the unfiltered total stays exact through parallel creates and deletes', async () => {
    const created = await Promise.all(Array.from({ length: 20 }, (_, i) => create({ name: `Counted ${i}`, email: `counted${i}@count.test` })));
    await Promise.all(created.slice(0, 7).map((r) => app.http.delete(`/api/contacts/${r.body.contact.id}`).set('Authorization', auth)));
    const listed = await app.http.get('/api/contacts').query({ limit: 1 }).set('Authorization', auth);
    const [{ n }] = await app.sql<{ n: string }>('SELECT count(*)::text AS n FROM contacts');
    expect(listed.body.total).toBe(Number(n));
  });

  it('PATCH on a missing id is 404; non-numeric ids are 404', async () => {
    expectError(await app.http.patch('/api/contacts/424242/edit').set('Authorization', auth).send({ name: 'x' }), 404, 'not_found');
    expectError(await app.http.get('/api/contacts/abc').set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get('/api/contacts/99999999999').set('Authorization', auth), 404, 'not_found');
  });

  it('lists with search, paging and ordering', async () => {
    for (let i = 0; i < 5; i++) await create({ name: `Pager ${i}`, email: `pager${i}@paging.test`, company: 'PagingCorp' });
    const page1 = await app.http.get('/api/contacts').query({ search: 'pagingcorp', limit: 2, orderBy: 'name', orderByDir: 'DESC' }).set('Authorization', auth);
    expect(page1.status).toBe(200);
    expect(page1.body.total).toBe(5);
    expect(page1.body.contacts.map((c: { name: string }) => c.name)).toEqual(['Pager 4', 'Pager 3']);
    const page3 = await app.http
      .get('/api/contacts')
      .query({ search: 'PAGING.TEST', limit: 2, page: 3, orderBy: 'name', orderByDir: 'desc' })
      .set('Authorization', auth);
    expect(page3.body.contacts.map((c: { name: string }) => c.name)).toEqual(['Pager 0']);
    const wildcard = await app.http.get('/api/contacts').query({ search: '%' }).set('Authorization', auth);
    expect(wildcard.body.total).toBe(0);
  });

  it('refuses bad list parameters with 400', async () => {
    for (const q of [{ limit: '0' }, { limit: '201' }, { page: '0' }, { page: 'x' }, { orderBy: 'password' }, { orderByDir: 'up' }, { unknown: '1' }]) {
      expectError(await app.http.get('/api/contacts').query(q).set('Authorization', auth), 400, 'validation_failed');
    }
  });

  it('needs contacts:write to create and contacts:read to list', async () => {
    expect((await app.http.get('/api/contacts').set('Authorization', readOnly)).status).toBe(200);
    expectError(await app.http.post('/api/contacts').set('Authorization', readOnly).send({ name: 'x', email: 'x@example.com' }), 403, 'forbidden');
    expectError(await app.http.get('/api/contacts'), 401, 'unauthorized');
  });

  it('assigns an owner and notifies them', async () => {
    const users = await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'reader@example.com'`);
    const ownerId = users[0].id;
    const res = await create({ name: 'Owned Lead', email: 'owned@example.com', ownerId });
    expect(res.status).toBe(201);
    expect(res.body.contact.owner).toEqual({ id: ownerId, name: expect.any(String) });
    const notes = await app.sql<{ type: string; details: { leadId: number; leadName: string } }>(`SELECT type, details FROM notifications WHERE user_id = $1`, [
      ownerId,
    ]);
    expect(notes).toEqual([{ type: 'lead_assigned', details: { leadId: res.body.contact.id, leadName: 'Owned Lead' } }]);
    expectError(await create({ name: 'Ghost owner', email: 'ghost@example.com', ownerId: 987654 }), 400, 'validation_failed');
  });
});
