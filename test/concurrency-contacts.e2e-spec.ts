import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';

/**
 * Parallel edits, parallel deletes and generated aliases for contacts, fields and notifications: concurrent requests on one record.
 * Each round fires its requests at the same moment (Promise.all over supertest requests that are
 * sent together), and checks the end state, not only the statuses.
 */
describe('concurrency: contacts, fields, notifications', () => {
  let app: TestApp;
  let auth: string;
  let ownerId: number;
  const CUSTOM = 12;
  const ROUNDS = 4;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    await app.token('contacts:read', { user: 'owner@conc.test', plan: 'enterprise' });
    ownerId = (await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'owner@conc.test'`))[0].id;
    for (let i = 1; i <= CUSTOM; i++) {
      const res = await app.http
        .post('/api/fields/contact/new')
        .set('Authorization', auth)
        .send({ label: `Conc ${i}`, alias: `conc_${i}`, type: 'text' });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => app?.stop());

  it(`parallel PATCHes of different properties and custom values of one contact all survive (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const created = await app.http
        .post('/api/contacts')
        .set('Authorization', auth)
        .send({ name: `Conc ${round}`, email: `conc${round}@conc.test` });
      expect(created.status).toBe(201);
      const id = created.body.contact.id as number;
      const patches: object[] = [
        { title: `Title ${round}` },
        { company: `Company ${round}` },
        { phone: '+14155550100' },
        { ownerId },
        ...Array.from({ length: CUSTOM }, (_, i) => ({ fields: { [`conc_${i + 1}`]: `v${round}-${i + 1}` } })),
      ];
      const results = await Promise.all(patches.map((body) => app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send(body)));
      expect(results.map((r) => r.status)).toEqual(patches.map(() => 200));
      const got = await app.http.get(`/api/contacts/${id}`).set('Authorization', auth);
      expect(got.body.contact).toMatchObject({ title: `Title ${round}`, company: `Company ${round}`, phone: '+14155550100', ownerId });
      expect(got.body.contact.fields).toEqual(Object.fromEntries(Array.from({ length: CUSTOM }, (_, i) => [`conc_${i + 1}`, `v${round}-${i + 1}`])));
    }
  });

  it('a PUT racing PATCHes of custom values is applied whole, before or after each PATCH, never half', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const id = (
        await app.http
          .post('/api/contacts')
          .set('Authorization', auth)
          .send({ name: `Put ${round}`, email: `put${round}@conc.test` })
      ).body.contact.id as number;
      const patches = Array.from({ length: 8 }, (_, i) => ({ fields: { [`conc_${i + 1}`]: `p${i + 1}` } }));
      const put = { name: `Put ${round} replaced`, email: `put${round}@conc.test`, title: 'Replaced' };
      const results = await Promise.all([
        ...patches.map((body) => app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send(body)),
        app.http.put(`/api/contacts/${id}`).set('Authorization', auth).send(put),
      ]);
      expect(results.map((r) => r.status)).toEqual([...patches.map(() => 200), 200]);
      const after = (await app.http.get(`/api/contacts/${id}`).set('Authorization', auth)).body.contact;
      expect(after).toMatchObject({ name: `Put ${round} replaced`, title: 'Replaced' });
      // The PUT cleared the values written before it and kept none of its own: every value left is a
      // whole PATCH applied after the PUT, and it is the value that PATCH sent.
      for (const [alias, value] of Object.entries(after.fields as Record<string, string>)) expect(value).toBe(`p${alias.slice('conc_'.length)}`);
    }
  });

  it('parallel PATCHes of different properties of one field all survive', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const created = await app.http
        .post('/api/fields/company/new')
        .set('Authorization', auth)
        .send({ label: `Field round ${round}`, type: 'text' });
      expect(created.status).toBe(201);
      const id = created.body.field.id as number;
      const patches: [object, object][] = [
        [{ label: `Renamed ${round}` }, { label: `Renamed ${round}` }],
        [{ description: `Described ${round}` }, { description: `Described ${round}` }],
        [{ group: 'professional' }, { group: 'professional' }],
        [{ order: 40 + round }, { order: 40 + round }],
        [{ defaultValue: 'dflt' }, { defaultValue: 'dflt' }],
        [{ isPubliclyUpdatable: true }, { isPubliclyUpdatable: true }],
        [{ isUniqueIdentifier: true }, { isUniqueIdentifier: true }],
        [{ publishUp: '2020-01-01T00:00:00+00:00' }, { publishUp: '2020-01-01T00:00:00+00:00' }],
        [{ alias: `renamed_alias_${round}` }, { alias: `renamed_alias_${round}` }],
      ];
      const results = await Promise.all(patches.map(([body]) => app.http.patch(`/api/fields/${id}`).set('Authorization', auth).send(body)));
      expect(results.map((r) => r.status)).toEqual(patches.map(() => 200));
      const got = await app.http.get(`/api/fields/${id}`).set('Authorization', auth);
      for (const [, expected] of patches) expect(got.body.field).toMatchObject(expected);
    }
  });

  it('parallel PATCHes of a contact field rename its values and change its properties together', async () => {
    const field = (await app.http.post('/api/fields/contact/new').set('Authorization', auth).send({ label: 'Renamed Later', type: 'text' })).body.field;
    const contact = (
      await app.http
        .post('/api/contacts')
        .set('Authorization', auth)
        .send({ name: 'Holder', email: 'holder@conc.test', fields: { [field.alias]: 'kept' } })
    ).body.contact;
    const results = await Promise.all([
      app.http.patch(`/api/fields/contact/${field.id}/edit`).set('Authorization', auth).send({ alias: 'renamed_now' }),
      app.http.patch(`/api/fields/contact/${field.id}/edit`).set('Authorization', auth).send({ description: 'described' }),
      app.http.patch(`/api/fields/contact/${field.id}/edit`).set('Authorization', auth).send({ isUniqueIdentifier: true }),
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const got = (await app.http.get(`/api/fields/${field.id}`).set('Authorization', auth)).body.field;
    expect(got).toMatchObject({ alias: 'renamed_now', description: 'described', isUniqueIdentifier: true });
    const c = (await app.http.get(`/api/contacts/${contact.id}`).set('Authorization', auth)).body.contact;
    expect(c.fields).toMatchObject({ renamed_now: 'kept' });
    expect(c.fields).not.toHaveProperty(field.alias);
  });

  it('parallel DELETEs of one contact, one field and one notification: exactly one 200 each, the others 404', async () => {
    const N = 20;
    const contactId = (await app.http.post('/api/contacts').set('Authorization', auth).send({ name: 'Doomed', email: 'doomed@conc.test', ownerId })).body
      .contact.id;
    const fieldId = (await app.http.post('/api/fields/contact/new').set('Authorization', auth).send({ label: 'Doomed Field' })).body.field.id;
    const companyFieldId = (await app.http.post('/api/fields/company/new').set('Authorization', auth).send({ label: 'Doomed Company Field' })).body.field.id;
    const ownerToken = await tokenFor(app, '*', { user: 'owner@conc.test', plan: 'enterprise' });
    const notificationId = (await app.sql<{ id: number }>(`SELECT id FROM notifications WHERE user_id = $1 ORDER BY id DESC LIMIT 1`, [ownerId]))[0].id;

    const statuses = async (path: string, token = auth) =>
      (await Promise.all(Array.from({ length: N }, () => app.http.delete(path).set('Authorization', token)))).map((r) => r.status).sort();
    const oneWinner = [200, ...Array.from({ length: N - 1 }, () => 404)];
    expect(await statuses(`/api/contacts/${contactId}`)).toEqual(oneWinner);
    expect(await statuses(`/api/fields/${fieldId}`)).toEqual(oneWinner);
    expect(await statuses(`/api/fields/company/${companyFieldId}/delete`)).toEqual(oneWinner);
    expect(await statuses(`/api/notifications/${notificationId}`, ownerToken)).toEqual(oneWinner);
  });

  it('parallel mark-read of one notification: all 200, read once (modifiedAt set by the first)', async () => {
    const contact = await app.http.post('/api/contacts').set('Authorization', auth).send({ name: 'Assigned', email: 'assigned@conc.test', ownerId });
    expect(contact.status).toBe(201);
    const ownerToken = await tokenFor(app, '*', { user: 'owner@conc.test', plan: 'enterprise' });
    const id = (await app.sql<{ id: number }>(`SELECT id FROM notifications WHERE user_id = $1 ORDER BY id DESC LIMIT 1`, [ownerId]))[0].id;
    const results = await Promise.all(Array.from({ length: 10 }, () => app.http.post(`/api/notifications/${id}/read`).set('Authorization', ownerToken)));
    expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    for (const r of results) expect(r.body.notification.isRead).toBe(true);
    expect(new Set(results.map((r) => r.body.notification.modifiedAt)).size).toBe(1);
  });

  it('30 parallel creates of fields with one label and no alias: all 201 with distinct aliases', async () => {
    const results = await Promise.all(
      Array.from({ length: 30 }, () => app.http.post('/api/fields/contact/new').set('Authorization', auth).send({ label: 'Race Twin', type: 'text' })),
    );
    expect(results.map((r) => r.status)).toEqual(results.map(() => 201));
    const aliases = results.map((r) => r.body.field.alias as string);
    expect(new Set(aliases).size).toBe(30);
    expect(aliases).toContain('race_twin');
    for (const a of aliases) expect(a).toMatch(/^race_twin(_\d+)?$/);
  });
});
