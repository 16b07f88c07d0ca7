import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { createContact, createDeal, uniqueEmail, userId, ISO, expectDeletedInBothStyles, expectRoutes, resourceTokens } from './support/fixtures.js';

describe('deals', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noDeals: string;
  let readWrite: string;
  let adminId: number;
  let otherUserId: number;
  let contactId: number;

  beforeAll(async () => {
    app = await startApp();
    ({ auth, readOnly, none: noDeals, readWrite } = await resourceTokens(app, 'deals', 'contacts:read,activities:read,activities:write'));
    adminId = await userId(app);
    otherUserId = await userId(app, 'reader@example.com');
    contactId = await newContact('Deal Contact');
  });
  afterAll(async () => app?.stop());

  const newContact = (name: string) => createContact(app, auth, { name, email: uniqueEmail('deals.test', 'deal') });
  const create = (body: object, path = '/api/deals') => app.http.post(path).set('Authorization', auth).send(body);
  const newDeal = (body: object = {}) => createDeal(app, auth, contactId, body as Record<string, unknown>);
  const secondsAgo = (iso: string) => (Date.now() - Date.parse(iso)) / 1000;

  describe('create', () => {
    it('creates through POST /api/deals with 201, snake_case record and defaults', async () => {
      const res = await create({ title: 'Big sale', value: 1234.5, contact_id: contactId });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        deal: {
          id: expect.any(Number),
          title: 'Big sale',
          value: 1234.5,
          contact_id: contactId,
          expected_close_date: null,
          // The default pipeline's first stage, at its probability (the deal has none of its own).
          pipeline_id: expect.any(Number),
          stage_id: expect.any(Number),
          stage: 'New',
          entered_stage_at: expect.stringMatching(ISO),
          probability: 10,
          status: 'open',
          product: null,
          quantity: 1,
          closed_at: null,
          owner_id: adminId,
          company_id: null,
          createdAt: expect.stringMatching(ISO),
          modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
          createdBy: adminId,
          createdByUser: expect.any(String),
          modifiedBy: expect.any(Number),
          modifiedByUser: expect.any(String),
        },
      });
    });

    it('creates through /api/deals/new with every property', async () => {
      const res = await create(
        {
          title: 'Full deal',
          value: 0,
          contact_id: contactId,
          expected_close_date: '2026-12-31',
          stage: 'proposal',
          probability: 75,
          status: 'won',
          product: 'Widget Pro',
          quantity: 0,
          closed_at: '2026-11-20T12:30:00+01:00',
          owner_id: otherUserId,
        },
        '/api/deals/new',
      );
      expect(res.status).toBe(201);
      expect(res.body.deal).toMatchObject({
        title: 'Full deal',
        value: 0,
        expected_close_date: '2026-12-31',
        stage: 'proposal',
        probability: 75,
        status: 'won',
        product: 'Widget Pro',
        quantity: 0,
        closed_at: '2026-11-20T11:30:00+00:00',
        owner_id: otherUserId,
      });
      expect(typeof res.body.deal.value).toBe('number');
    });

    it('returns large and fractional values as JSON numbers', async () => {
      const big = await newDeal({ value: 999999999999.99 });
      expect(big.value).toBe(999999999999.99);
      const cents = await newDeal({ value: 0.1 });
      expect(cents.value).toBe(0.1);
    });

    it('refuses bad bodies with 400 and details naming the field', async () => {
      const base = { title: 'x', value: 1, contact_id: contactId };
      const cases: [object, string][] = [
        [{ value: 1, contact_id: contactId }, 'title'],
        [{ ...base, title: '' }, 'title'],
        [{ title: 'x', contact_id: contactId }, 'value'],
        [{ ...base, value: '100' }, 'value'],
        [{ ...base, value: -0.01 }, 'value'],
        [{ ...base, value: 1.005 }, 'value'],
        [{ ...base, value: 1e13 }, 'value'],
        [{ ...base, value: null }, 'value'],
        [{ title: 'x', value: 1 }, 'contact_id'],
        [{ ...base, contact_id: '1' }, 'contact_id'],
        [{ ...base, contact_id: 0 }, 'contact_id'],
        [{ ...base, contact_id: 987654 }, 'contact_id'],
        [{ ...base, contactId: contactId }, 'contactId'],
        [{ ...base, expected_close_date: '2026-02-30' }, 'expected_close_date'],
        [{ ...base, expected_close_date: '2026-11-21T00:00:00Z' }, 'expected_close_date'],
        [{ ...base, expected_close_date: '21/11/2026' }, 'expected_close_date'],
        [{ ...base, probability: 101 }, 'probability'],
        [{ ...base, probability: -1 }, 'probability'],
        [{ ...base, probability: 50.5 }, 'probability'],
        [{ ...base, status: 'pending' }, 'status'],
        [{ ...base, quantity: -1 }, 'quantity'],
        [{ ...base, quantity: 1.5 }, 'quantity'],
        [{ ...base, closed_at: '2026-11-21T10:00:00' }, 'closed_at'],
        [{ ...base, closed_at: '2026-11-21T10:00:00Z' }, 'closed_at'],
        [{ ...base, status: 'open', closed_at: '2026-11-21T10:00:00Z' }, 'closed_at'],
        [{ ...base, owner_id: 987654 }, 'owner_id'],
        [{ ...base, owner_id: 'me' }, 'owner_id'],
        [{ ...base, stage: 7 }, 'stage'],
        [{ ...base, id: 4 }, 'id'],
      ];
      for (const [body, field] of cases) {
        const err = expectError(await create(body), 400, 'validation_failed');
        expect({ body, fields: err.details?.map((d) => d.field) }).toEqual({ body, fields: expect.arrayContaining([field]) });
      }
    });

    it('unassigns with owner_id null', async () => {
      expect((await newDeal({ owner_id: null })).owner_id).toBeNull();
    });
  });

  describe('closed_at rule', () => {
    it('stamps closed_at with now when a deal is won or lost without one, keeps it while closed, clears it when reopened', async () => {
      const won = await newDeal({ status: 'won' });
      expect(won.closed_at).toMatch(ISO);
      expect(secondsAgo(won.closed_at as string)).toBeLessThan(30);

      const open = await newDeal();
      const closed = await app.http.patch(`/api/deals/${open.id}/edit`).set('Authorization', auth).send({ status: 'lost' });
      expect(closed.status).toBe(200);
      expect(closed.body.deal.closed_at).toMatch(ISO);
      const stamped = closed.body.deal.closed_at;

      const stage = await app.http.patch(`/api/deals/${open.id}`).set('Authorization', auth).send({ stage: 'post-mortem', status: 'won' });
      expect(stage.body.deal).toMatchObject({ status: 'won', closed_at: stamped });

      const explicit = await app.http.patch(`/api/deals/${open.id}`).set('Authorization', auth).send({ closed_at: '2026-01-15T08:00:00Z' });
      expect(explicit.body.deal.closed_at).toBe('2026-01-15T08:00:00+00:00');

      const reopened = await app.http.patch(`/api/deals/${open.id}`).set('Authorization', auth).send({ status: 'open' });
      expect(reopened.body.deal).toMatchObject({ status: 'open', closed_at: null });

      const refused = await app.http.patch(`/api/deals/${open.id}`).set('Authorization', auth).send({ closed_at: '2026-01-15T08:00:00Z' });
      expect(expectError(refused, 400, 'validation_failed').details?.[0].field).toBe('closed_at');
    });
  });

  describe('read, edit, delete', () => {
    it('gets one; 404 for a missing or malformed id', async () => {
      const d = await newDeal({ title: 'Readable', expected_close_date: '2027-01-02' });
      const res = await app.http.get(`/api/deals/${d.id}`).set('Authorization', auth);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deal: d });
      expect(res.body.deal.expected_close_date).toBe('2027-01-02');
      expectError(await app.http.get('/api/deals/987654').set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get('/api/deals/abc').set('Authorization', auth), 404, 'not_found');
    });

    it('PATCH changes only the supplied properties, in both path styles', async () => {
      const d = await newDeal({ title: 'Patchable', stage: 'lead', product: 'Gadget', quantity: 3 });
      const a = await app.http.patch(`/api/deals/${d.id}/edit`).set('Authorization', auth).send({ value: 250.75, probability: 40 });
      expect(a.status).toBe(200);
      expect(a.body.deal).toMatchObject({ title: 'Patchable', value: 250.75, probability: 40, stage: 'lead', product: 'Gadget', quantity: 3 });
      expect(a.body.deal.modifiedAt).toMatch(ISO);
      expect(a.body.deal.modifiedBy).toBe(adminId);
      const other = await newContact('Other Deal Contact');
      const b = await app.http
        .patch(`/api/deals/${d.id}`)
        .set('Authorization', auth)
        .send({ contact_id: other, stage: null, quantity: null, owner_id: otherUserId });
      expect(b.status).toBe(200);
      // stage null: back to the pipeline's first stage of the deal's status.
      expect(b.body.deal).toMatchObject({ contact_id: other, stage: 'New', quantity: 1, owner_id: otherUserId, title: 'Patchable' });
      for (const body of [
        { title: null },
        { value: null },
        { contact_id: null },
        { contact_id: 987654 },
        { owner_id: 987654 },
        { title: '  ' },
        { unknown: 1 },
      ]) {
        expectError(await app.http.patch(`/api/deals/${d.id}`).set('Authorization', auth).send(body), 400, 'validation_failed');
      }
      expectError(await app.http.patch('/api/deals/424242/edit').set('Authorization', auth).send({ title: 'x' }), 404, 'not_found');
    });

    it('PUT replaces (200, omitted properties reset to defaults) or creates with a new id (201)', async () => {
      const d = await newDeal({
        title: 'Replaceable',
        stage: 'lead',
        probability: 10,
        product: 'Gizmo',
        quantity: 5,
        status: 'won',
        owner_id: otherUserId,
        expected_close_date: '2026-06-01',
      });
      const put = await app.http.put(`/api/deals/${d.id}/edit`).set('Authorization', auth).send({ title: 'Replaced', value: 5, contact_id: contactId });
      expect(put.status).toBe(200);
      expect(put.body.deal).toMatchObject({
        id: d.id,
        title: 'Replaced',
        value: 5,
        stage: 'New',
        probability: 10,
        product: null,
        quantity: 1,
        status: 'open',
        closed_at: null,
        owner_id: adminId,
        expected_close_date: null,
      });
      const won = await app.http.put(`/api/deals/${d.id}`).set('Authorization', auth).send({ title: 'Won', value: 5, contact_id: contactId, status: 'won' });
      expect(won.status).toBe(200);
      expect(won.body.deal.closed_at).toMatch(ISO);
      const created = await app.http.put('/api/deals/999999').set('Authorization', auth).send({ title: 'By PUT', value: 1, contact_id: contactId });
      expect(created.status).toBe(201);
      expect(created.body.deal.id).not.toBe(999999);
      expect(created.body.deal).toMatchObject({ title: 'By PUT', status: 'open', owner_id: adminId });
      expectError(
        await app.http.put(`/api/deals/${d.id}`).set('Authorization', auth).send({ title: 'No value', contact_id: contactId }),
        400,
        'validation_failed',
      );
    });

    it('DELETE answers the deal as it was, in both path styles', async () => {
      const a = await newDeal({ title: 'Deletable A' });
      const b = await newDeal({ title: 'Deletable B' });
      await expectDeletedInBothStyles(app, auth, '/api/deals', 'deal', a, b, `/api/deals/${b.id}/delete`);
      expect((await app.http.get(`/api/contacts/${contactId}`).set('Authorization', auth)).status).toBe(200);
    });
  });

  describe('list', () => {
    const tag = `lst${Date.now()}`;
    let listContact: number;
    beforeAll(async () => {
      listContact = await newContact('List contact');
      await newDeal({ title: `${tag} one`, value: 300, status: 'open', stage: 'Negotiation', contact_id: listContact });
      await newDeal({ title: `${tag} two`, value: 100, status: 'won', product: 'Quantum Widget' });
      await newDeal({ title: `${tag} three`, value: 200, status: 'lost', contact_id: listContact });
      await newDeal({ title: `${tag} four`, value: 400, status: 'won', owner_id: otherUserId });
    });
    const list = (query: Record<string, string | number>) => app.http.get('/api/deals').query(query).set('Authorization', auth);

    it('answers { total, deals } with search over title, stage and product', async () => {
      const all = await list({ search: tag });
      expect(all.status).toBe(200);
      expect(Object.keys(all.body).sort()).toEqual(['deals', 'total']);
      expect(all.body.total).toBe(4);
      expect((await list({ search: 'negotiation' })).body.deals.map((d: { title: string }) => d.title)).toEqual([`${tag} one`]);
      expect((await list({ search: 'QUANTUM widget' })).body.deals.map((d: { title: string }) => d.title)).toEqual([`${tag} two`]);
      expect((await list({ search: '%' })).body.total).toBe(0);
    });

    it('filters by status, contact_id and owner_id', async () => {
      const won = await list({ search: tag, status: 'won', orderBy: 'value' });
      expect(won.body.deals.map((d: { title: string }) => d.title)).toEqual([`${tag} two`, `${tag} four`]);
      expect((await list({ search: tag, status: 'lost' })).body.total).toBe(1);
      expect((await list({ search: tag, status: 'open' })).body.total).toBe(1);
      const byContact = await list({ contact_id: listContact, orderBy: 'title' });
      expect(byContact.body.deals.map((d: { title: string }) => d.title)).toEqual([`${tag} one`, `${tag} three`]);
      expect((await list({ search: tag, owner_id: otherUserId })).body.deals.map((d: { title: string }) => d.title)).toEqual([`${tag} four`]);
    });

    it('pages and orders (value desc), with page and limit', async () => {
      const p1 = await list({ search: tag, orderBy: 'value', orderByDir: 'desc', limit: 3, page: 1 });
      const p2 = await list({ search: tag, orderBy: 'value', orderByDir: 'DESC', limit: 3, page: 2 });
      expect(p1.body.total).toBe(4);
      expect(p1.body.deals.map((d: { value: number }) => d.value)).toEqual([400, 300, 200]);
      expect(p2.body.deals.map((d: { value: number }) => d.value)).toEqual([100]);
    });

    it('refuses bad list parameters with 400', async () => {
      for (const q of <Record<string, string>[]>[
        { status: 'closed' },
        { contact_id: 'x' },
        { limit: '0' },
        { limit: '201' },
        { page: '0' },
        { page: '-1' },
        { orderBy: 'contactId' },
        { orderByDir: 'up' },
        { type: 'call' },
      ]) {
        expectError(await list(q), 400, 'validation_failed');
      }
    });
  });

  describe('contact deletion', () => {
    it('deletes the contact’s deals, activities and campaign memberships', async () => {
      const doomed = await newContact('Doomed');
      const survivor = await newContact('Survivor');
      const d1 = await newDeal({ contact_id: doomed });
      const d2 = await newDeal({ contact_id: doomed, status: 'won' });
      const kept = await newDeal({ contact_id: survivor });
      const act = await app.http.post('/api/activities').set('Authorization', auth).send({ type: 'call', subject: 'Call the doomed', contact_id: doomed });
      expect(act.status).toBe(201);
      const campaign = await app.http.post('/api/campaigns').set('Authorization', auth).send({ name: 'Cascade campaign' });
      for (const c of [doomed, survivor]) {
        expect((await app.http.post(`/api/campaigns/${campaign.body.campaign.id}/contact/${c}/add`).set('Authorization', auth)).status).toBe(200);
      }

      const del = await app.http.delete(`/api/contacts/${doomed}/delete`).set('Authorization', auth);
      expect(del.status).toBe(200);
      for (const d of [d1, d2]) expectError(await app.http.get(`/api/deals/${d.id}`).set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get(`/api/activities/${act.body.activity.id}`).set('Authorization', auth), 404, 'not_found');
      expect((await app.http.get(`/api/deals/${kept.id}`).set('Authorization', auth)).status).toBe(200);
      expect((await app.http.get('/api/deals').query({ contact_id: doomed }).set('Authorization', auth)).body.total).toBe(0);
      const members = await app.http.get(`/api/campaigns/${campaign.body.campaign.id}/contacts`).set('Authorization', auth);
      expect(members.body.contacts.map((c: { id: number }) => c.id)).toEqual([survivor]);
    });

    it('documents the cascade on the contact delete operation', async () => {
      const doc = (await app.http.get('/api/docs-json')).body as { paths: Record<string, Record<string, { summary?: string; description?: string }>> };
      const op = doc.paths['/api/contacts/{id}/delete'].delete;
      expect(`${op.summary} ${op.description}`).toMatch(/deals, activities and campaign memberships/);
      expect(JSON.stringify(doc.paths['/api/deals'].get)).toContain('DealRecordDto');
      const schema = (doc as unknown as { components: { schemas: Record<string, { properties: Record<string, unknown> }> } }).components.schemas.DealRecordDto;
      expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['contact_id', 'expected_close_date', 'closed_at', 'owner_id', 'createdAt']));
    });
  });

  describe('permissions and route table', () => {
    it('answers 403 without the deals permission the route needs', async () => {
      const d = await newDeal({ title: 'Guarded' });
      expectError(await app.http.get('/api/deals').set('Authorization', noDeals), 403, 'forbidden');
      expectError(await app.http.get(`/api/deals/${d.id}`).set('Authorization', noDeals), 403, 'forbidden');
      expect((await app.http.get(`/api/deals/${d.id}`).set('Authorization', readOnly)).status).toBe(200);
      expectError(await app.http.post('/api/deals').set('Authorization', readOnly).send({ title: 'x', value: 1, contact_id: contactId }), 403, 'forbidden');
      expectError(await app.http.patch(`/api/deals/${d.id}/edit`).set('Authorization', readOnly).send({ title: 'x' }), 403, 'forbidden');
      expectError(
        await app.http.put(`/api/deals/${d.id}`).set('Authorization', readOnly).send({ title: 'x', value: 1, contact_id: contactId }),
        403,
        'forbidden',
      );
      expectError(await app.http.delete(`/api/deals/${d.id}`).set('Authorization', readWrite), 403, 'forbidden');
      const byWriter = await app.http.post('/api/deals/new').set('Authorization', readWrite).send({ title: 'Writer deal', value: 1, contact_id: contactId });
      expect(byWriter.status).toBe(201);
      const writerId = (await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'writer@example.com'`))[0].id;
      expect(byWriter.body.deal).toMatchObject({ owner_id: writerId, createdBy: writerId });
      expectError(await app.http.get('/api/deals'), 401, 'unauthorized');
    });

    it('GET /api/endpoints lists every deals route with its permission', async () => {
      await expectRoutes(app, auth, '/api/deals', [
        ['GET', '/api/deals', 'deals:read'],
        ['POST', '/api/deals/search', 'deals:read'],
        ['POST', '/api/deals', 'deals:write'],
        ['POST', '/api/deals/new', 'deals:write'],
        ['POST', '/api/deals/batch', 'deals:write'],
        ['GET', '/api/deals/:id', 'deals:read'],
        ['PATCH', '/api/deals/:id', 'deals:write'],
        ['PATCH', '/api/deals/:id/edit', 'deals:write'],
        ['PUT', '/api/deals/:id', 'deals:write'],
        ['PUT', '/api/deals/:id/edit', 'deals:write'],
        ['GET', '/api/deals/:id/stages', 'deals:read'],
        ['DELETE', '/api/deals/:id', 'deals:delete'],
        ['DELETE', '/api/deals/:id/delete', 'deals:delete'],
      ]);
    });
  });
});
