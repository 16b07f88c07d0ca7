import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken } from './support/fixtures.js';

describe('contact custom field values', () => {
  let app: TestApp;
  let auth: string;
  let seq = 0;

  const field = async (body: object) => {
    const res = await app.http.post('/api/fields/contact/new').set('Authorization', auth).send(body);
    if (res.status !== 201) throw new Error(`field create failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.field as { id: number; alias: string };
  };
  const contact = (body: object) =>
    app.http
      .post('/api/contacts/new')
      .set('Authorization', auth)
      .send({ name: `Person ${++seq}`, email: `person${seq}@cf.test`, ...body });

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    await field({ label: 'City', type: 'text' });
    await field({ label: 'Score', type: 'number' });
    await field({ label: 'Vip', type: 'boolean' });
    await field({ label: 'Birthday', type: 'date' });
    await field({ label: 'Last Seen', type: 'datetime' });
    await field({ label: 'Work Email', type: 'email' });
    await field({ label: 'Site', type: 'url' });
    await field({ label: 'Mobile', type: 'tel' });
    await field({
      label: 'Tier',
      type: 'select',
      properties: {
        list: [
          { label: 'Gold', value: 'gold' },
          { label: 'Silver', value: 'silver' },
        ],
      },
    });
    await field({
      label: 'Topics',
      type: 'multiselect',
      properties: {
        list: [
          { label: 'A', value: 'a' },
          { label: 'B', value: 'b' },
        ],
      },
    });
    await field({ label: 'Source', type: 'text', defaultValue: 'api' });
    await field({ label: 'Hidden', type: 'text', isPublished: false });
  });
  afterAll(async () => app?.stop());

  it('accepts typed values on create and returns them under fields (with defaults applied)', async () => {
    const res = await contact({
      fields: {
        city: 'Lyon',
        score: 12.5,
        vip: true,
        birthday: '1990-05-17',
        last_seen: '2026-11-21T11:15:00+01:00',
        work_email: 'ada@work.test',
        site: 'https://ada.test',
        mobile: '(415) 555-0100',
        tier: 'gold',
        topics: ['a', 'b'],
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.contact.fields).toEqual({
      city: 'Lyon',
      score: 12.5,
      vip: true,
      birthday: '1990-05-17',
      last_seen: '2026-11-21T10:15:00+00:00',
      work_email: 'ada@work.test',
      site: 'https://ada.test',
      mobile: '+14155550100',
      tier: 'gold',
      topics: ['a', 'b'],
      source: 'api',
    });
    const got = await app.http.get(`/api/contacts/${res.body.contact.id}`).set('Authorization', auth);
    expect(got.body.contact.fields.city).toBe('Lyon');
  });

  it('refuses unknown, unpublished and mistyped values with 400 naming fields.<alias>', async () => {
    const cases: [object, string][] = [
      [{ nope: 'x' }, 'fields.nope'],
      [{ hidden: 'x' }, 'fields.hidden'],
      [{ score: '12' }, 'fields.score'],
      [{ vip: 'true' }, 'fields.vip'],
      [{ birthday: '1990-13-01' }, 'fields.birthday'],
      [{ last_seen: '2026-11-21T10:15:00' }, 'fields.last_seen'],
      [{ work_email: 'nope' }, 'fields.work_email'],
      [{ site: 'not a url' }, 'fields.site'],
      [{ mobile: 'call me' }, 'fields.mobile'],
      [{ tier: 'bronze' }, 'fields.tier'],
      [{ topics: ['a', 'z'] }, 'fields.topics'],
      [{ topics: 'a' }, 'fields.topics'],
      [{ city: 42 }, 'fields.city'],
    ];
    for (const [fields, name] of cases) {
      const err = expectError(await contact({ fields }), 400, 'validation_failed');
      expect(err.details?.map((d) => d.field)).toEqual([name]);
    }
    expectError(await contact({ fields: ['city'] }), 400, 'validation_failed');
    expectError(await contact({ fields: 'city' }), 400, 'validation_failed');
  });

  it('PATCH merges values, null removes one; PUT replaces them', async () => {
    const id = (await contact({ fields: { city: 'Oslo', score: 1 } })).body.contact.id;
    const patched = await app.http
      .patch(`/api/contacts/${id}/edit`)
      .set('Authorization', auth)
      .send({ fields: { score: 2, tier: 'silver' } });
    expect(patched.status).toBe(200);
    expect(patched.body.contact.fields).toEqual({ city: 'Oslo', score: 2, tier: 'silver', source: 'api' });
    const removed = await app.http
      .patch(`/api/contacts/${id}`)
      .set('Authorization', auth)
      .send({ fields: { city: null } });
    expect(removed.body.contact.fields).toEqual({ score: 2, tier: 'silver', source: 'api' });
    const untouched = await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ title: 'CEO' });
    expect(untouched.body.contact.fields).toEqual({ score: 2, tier: 'silver', source: 'api' });
    const put = await app.http
      .put(`/api/contacts/${id}/edit`)
      .set('Authorization', auth)
      .send({ name: 'Replaced', email: `replaced${id}@cf.test`, fields: { vip: false } });
    expect(put.status).toBe(200);
    expect(put.body.contact.fields).toEqual({ vip: false, source: 'api' });
  });

  it('required fields must be present on create and PUT and cannot be cleared by PATCH', async () => {
    const keep = (await contact({ fields: { city: 'Before required' } })).body.contact.id;
    const req = await field({ label: 'Account Code', type: 'text', isRequired: true });
    const missing = expectError(await contact({}), 400, 'validation_failed');
    expect(missing.details).toEqual([{ field: `fields.${req.alias}`, message: 'is required' }]);
    const ok = await contact({ fields: { account_code: 'AC-1' } });
    expect(ok.status).toBe(201);
    const id = ok.body.contact.id;
    // an older contact without the value can still be patched on other properties
    expect((await app.http.patch(`/api/contacts/${keep}`).set('Authorization', auth).send({ title: 'x' })).status).toBe(200);
    const cleared = expectError(
      await app.http
        .patch(`/api/contacts/${id}`)
        .set('Authorization', auth)
        .send({ fields: { account_code: null } }),
      400,
      'validation_failed',
    );
    expect(cleared.details?.[0].field).toBe('fields.account_code');
    expectError(
      await app.http
        .put(`/api/contacts/${id}`)
        .set('Authorization', auth)
        .send({ name: 'P', email: `p${id}@cf.test` }),
      400,
      'validation_failed',
    );
    expect(
      (
        await app.http
          .put(`/api/contacts/${id}`)
          .set('Authorization', auth)
          .send({ name: 'P', email: `p${id}@cf.test`, fields: { account_code: 'AC-2' } })
      ).status,
    ).toBe(200);
    // no longer required once unpublished
    await app.http.patch(`/api/fields/contact/${req.id}/edit`).set('Authorization', auth).send({ isPublished: false }).expect(200);
    expect((await contact({})).status).toBe(201);
  });

  it('unique-identifier values are unique across contacts (409), also under concurrent requests', async () => {
    const uf = await field({ label: 'External Id', type: 'text', isUniqueIdentifier: true });
    expect(uf.alias).toBe('external_id');
    const first = await contact({ fields: { external_id: 'EXT-1' } });
    expect(first.status).toBe(201);
    const err = expectError(await contact({ fields: { external_id: 'EXT-1' } }), 409, 'conflict');
    expect(err.details?.[0]).toMatchObject({ field: 'fields.external_id', existingId: first.body.contact.id });
    // saving the same contact with its own value is fine
    expect(
      (
        await app.http
          .patch(`/api/contacts/${first.body.contact.id}`)
          .set('Authorization', auth)
          .send({ fields: { external_id: 'EXT-1' } })
      ).status,
    ).toBe(200);
    const other = (await contact({ fields: { external_id: 'EXT-2' } })).body.contact.id;
    expectError(
      await app.http
        .patch(`/api/contacts/${other}`)
        .set('Authorization', auth)
        .send({ fields: { external_id: 'EXT-1' } }),
      409,
      'conflict',
    );

    const racers = await Promise.all(Array.from({ length: 6 }, () => contact({ fields: { external_id: 'EXT-RACE' } })));
    expect(racers.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const rows = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE fields->>'external_id' = 'EXT-RACE'`);
    expect(Number(rows[0].n)).toBe(1);
  });

  it('refuses to make a field a unique identifier while contacts share a value (409)', async () => {
    const f = await field({ label: 'Team', type: 'text' });
    await contact({ fields: { team: 'red' } });
    await contact({ fields: { team: 'red' } });
    expectError(await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ isUniqueIdentifier: true }), 409, 'conflict');
  });

  it('refuses to change the type of a field that contacts hold values for (409)', async () => {
    const f = await field({ label: 'Level', type: 'text' });
    await contact({ fields: { level: 'high' } });
    expectError(await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ type: 'number' }), 409, 'conflict');
  });

  it('renaming a field alias renames the key in every contact', async () => {
    const f = await field({ label: 'Colour', type: 'text' });
    const id = (await contact({ fields: { colour: 'blue' } })).body.contact.id;
    await app.http.patch(`/api/fields/contact/${f.id}/edit`).set('Authorization', auth).send({ alias: 'color' }).expect(200);
    const got = await app.http.get(`/api/contacts/${id}`).set('Authorization', auth);
    expect(got.body.contact.fields.color).toBe('blue');
    expect(got.body.contact.fields.colour).toBeUndefined();
  });

  it('deleting a field removes its values from every contact', async () => {
    const f = await field({ label: 'Shoe', type: 'text' });
    const ids = [(await contact({ fields: { shoe: 'nike' } })).body.contact.id, (await contact({ fields: { shoe: 'puma' } })).body.contact.id];
    await app.http.delete(`/api/fields/contact/${f.id}/delete`).set('Authorization', auth).expect(200);
    for (const id of ids) {
      const got = await app.http.get(`/api/contacts/${id}`).set('Authorization', auth);
      expect(got.body.contact.fields.shoe).toBeUndefined();
    }
    const rows = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE fields ? 'shoe'`);
    expect(Number(rows[0].n)).toBe(0);
    // the alias is unknown again
    expectError(await contact({ fields: { shoe: 'x' } }), 400, 'validation_failed');
  });

  it('search matches text custom-field values (and stops matching once removed)', async () => {
    const id = (await contact({ fields: { city: 'Zanzibarville' } })).body.contact.id;
    const res = await app.http.get('/api/contacts').query({ search: 'zanzibar' }).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body.contacts.map((c: { id: number }) => c.id)).toEqual([id]);
    const multi = (await contact({ fields: { topics: ['b'], city: 'Quuxtown' } })).body.contact.id;
    const byCity = await app.http.get('/api/contacts').query({ search: 'QUUXTOWN' }).set('Authorization', auth);
    expect(byCity.body.contacts.map((c: { id: number }) => c.id)).toEqual([multi]);
    await app.http
      .patch(`/api/contacts/${id}`)
      .set('Authorization', auth)
      .send({ fields: { city: null } })
      .expect(200);
    const after = await app.http.get('/api/contacts').query({ search: 'zanzibar' }).set('Authorization', auth);
    expect(after.body.total).toBe(0);
  });
});
