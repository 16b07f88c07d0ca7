import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createCampaign, createContact, tokenFor, uniqueEmail, ISO, expectRoutes, contactReading } from './support/fixtures.js';

describe('campaigns', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noCampaigns: string;
  let readWrite: string;

  beforeAll(async () => {
    // A short period so that the completion job can be observed.
    app = await startApp({ env: { CAMPAIGN_COMPLETION_INTERVAL_MS: '300' } });
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'campaigns:read', { user: 'reader@example.com', plan: 'enterprise' });
    noCampaigns = await tokenFor(app, 'contacts:read,contacts:write,contacts:delete', { user: 'other@example.com', plan: 'enterprise' });
    readWrite = await tokenFor(app, 'campaigns:read,campaigns:write', { user: 'writer@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const create = (body: object, path = '/api/campaigns/new') => app.http.post(path).set('Authorization', auth).send(body);
  const newCampaign = (body: object = {}) => createCampaign(app, auth, body as Record<string, unknown>);
  const newContact = (name = 'Member') => createContact(app, auth, { name, email: uniqueEmail('campaigns.test', 'member') }, '/api/contacts');
  const add = (campaignId: number | string, contactId: number | string, token = auth) =>
    app.http.post(`/api/campaigns/${campaignId}/contact/${contactId}/add`).set('Authorization', token);
  const remove = (campaignId: number | string, contactId: number | string, token = auth) =>
    app.http.post(`/api/campaigns/${campaignId}/contact/${contactId}/remove`).set('Authorization', token);
  const members = (campaignId: number, query: Record<string, string | number> = {}) =>
    app.http.get(`/api/campaigns/${campaignId}/contacts`).query(query).set('Authorization', auth);

  describe('create', () => {
    it('creates with 201 and the full record, status active by default', async () => {
      const res = await create({
        name: 'Spring launch',
        description: 'Launch mailing',
        type: 'email',
        startDate: '2026-03-01T09:00:00+02:00',
        endDate: '2026-04-01T00:00:00Z',
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        campaign: {
          id: expect.any(Number),
          name: 'Spring launch',
          description: 'Launch mailing',
          type: 'email',
          status: 'active',
          startDate: '2026-03-01T07:00:00+00:00',
          endDate: '2026-04-01T00:00:00+00:00',
          segmentId: null,
          createdAt: expect.stringMatching(ISO),
          modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
          createdBy: expect.any(Number),
          createdByUser: expect.any(String),
          modifiedBy: expect.any(Number),
          modifiedByUser: expect.any(String),
        },
      });
    });

    it('creates through the collection-style POST, with status inactive and no dates', async () => {
      const res = await create({ name: 'Dormant', status: 'inactive' }, '/api/campaigns');
      expect(res.status).toBe(201);
      expect(res.body.campaign).toMatchObject({ name: 'Dormant', status: 'inactive', startDate: null, endDate: null, description: null, type: null });
    });

    it('refuses bad bodies with 400 and details naming the field', async () => {
      const cases: [object, string][] = [
        [{}, 'name'],
        [{ name: '' }, 'name'],
        [{ name: null }, 'name'],
        [{ name: 42 }, 'name'],
        [{ name: 'x', status: 'completed' }, 'status'],
        [{ name: 'x', status: 'paused' }, 'status'],
        [{ name: 'x', startDate: '2026-03-01T09:00:00' }, 'startDate'],
        [{ name: 'x', endDate: '2026-03-01' }, 'endDate'],
        [{ name: 'x', endDate: 'tomorrow' }, 'endDate'],
        [{ name: 'x', startDate: '2026-03-02T00:00:00Z', endDate: '2026-03-01T23:59:59Z' }, 'endDate'],
        [{ name: 'x', bogus: 1 }, 'bogus'],
        [{ name: 'x', id: 5 }, 'id'],
        [{ name: 'x', createdAt: '2026-03-01T00:00:00Z' }, 'createdAt'],
      ];
      for (const [body, field] of cases) {
        const err = expectError(await create(body), 400, 'validation_failed');
        expect(err.details?.map((d) => d.field)).toContain(field);
      }
    });

    it('accepts an endDate equal to the startDate', async () => {
      const res = await create({ name: 'One instant', startDate: '2026-03-01T00:00:00Z', endDate: '2026-03-01T02:00:00+02:00' });
      expect(res.status).toBe(201);
    });
  });

  describe('read, edit, delete', () => {
    it('gets one; 404 for a missing or malformed id', async () => {
      const c = await newCampaign({ name: 'Readable' });
      const res = await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', auth);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ campaign: c });
      expectError(await app.http.get('/api/campaigns/987654').set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get('/api/campaigns/abc').set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get('/api/campaigns/0').set('Authorization', auth), 404, 'not_found');
    });

    it('PATCH changes only the supplied properties, in both path styles, and accepts completed', async () => {
      const c = await newCampaign({ name: 'Patchable', description: 'keep me', type: 'sms' });
      const a = await app.http.patch(`/api/campaigns/${c.id}/edit`).set('Authorization', auth).send({ name: 'Patched' });
      expect(a.status).toBe(200);
      expect(a.body.campaign).toMatchObject({ name: 'Patched', description: 'keep me', type: 'sms', status: 'active' });
      expect(a.body.campaign.modifiedAt).toMatch(ISO);
      expect(a.body.campaign.modifiedBy).toEqual(expect.any(Number));
      expect(a.body.campaign.modifiedByUser).toEqual(expect.any(String));
      const b = await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ status: 'completed', description: null });
      expect(b.status).toBe(200);
      expect(b.body.campaign).toMatchObject({ name: 'Patched', description: null, status: 'completed' });
      expectError(await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ status: 'archived' }), 400, 'validation_failed');
      expectError(await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ name: null }), 400, 'validation_failed');
      expectError(await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ name: '   ' }), 400, 'validation_failed');
    });

    it('PATCH of only one date is checked against the stored other date', async () => {
      const c = await newCampaign({ startDate: '2026-05-10T00:00:00Z', endDate: '2026-05-20T00:00:00Z' });
      const early = await app.http.patch(`/api/campaigns/${c.id}/edit`).set('Authorization', auth).send({ endDate: '2026-05-09T23:00:00Z' });
      expect(expectError(early, 400, 'validation_failed').details?.[0].field).toBe('endDate');
      const late = await app.http.patch(`/api/campaigns/${c.id}/edit`).set('Authorization', auth).send({ startDate: '2026-05-21T00:00:00Z' });
      expect(expectError(late, 400, 'validation_failed').details?.[0].field).toBe('endDate');
      const unchanged = await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', auth);
      expect(unchanged.body.campaign).toMatchObject({ startDate: '2026-05-10T00:00:00+00:00', endDate: '2026-05-20T00:00:00+00:00' });
      // Clearing the start removes the constraint.
      const ok = await app.http.patch(`/api/campaigns/${c.id}/edit`).set('Authorization', auth).send({ startDate: null, endDate: '2026-05-01T00:00:00Z' });
      expect(ok.status).toBe(200);
      expect(ok.body.campaign).toMatchObject({ startDate: null, endDate: '2026-05-01T00:00:00+00:00' });
    });

    it('PATCH on a missing id is 404', async () => {
      expectError(await app.http.patch('/api/campaigns/424242/edit').set('Authorization', auth).send({ name: 'x' }), 404, 'not_found');
    });

    it('PUT replaces (200, omitted properties reset) or creates with a new id (201)', async () => {
      const c = await newCampaign({ name: 'Replaceable', description: 'old', type: 'email', status: 'inactive', startDate: '2026-01-01T00:00:00Z' });
      const put = await app.http.put(`/api/campaigns/${c.id}/edit`).set('Authorization', auth).send({ name: 'Replaced' });
      expect(put.status).toBe(200);
      expect(put.body.campaign).toMatchObject({ id: c.id, name: 'Replaced', description: null, type: null, status: 'active', startDate: null, endDate: null });
      const completed = await app.http.put(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ name: 'Done', status: 'completed' });
      expect(completed.status).toBe(200);
      expect(completed.body.campaign.status).toBe('completed');
      expectError(
        await app.http
          .put(`/api/campaigns/${c.id}`)
          .set('Authorization', auth)
          .send({ name: 'x', startDate: '2026-02-01T00:00:00Z', endDate: '2026-01-01T00:00:00Z' }),
        400,
        'validation_failed',
      );

      const created = await app.http.put('/api/campaigns/999999').set('Authorization', auth).send({ name: 'Created by PUT' });
      expect(created.status).toBe(201);
      expect(created.body.campaign.id).not.toBe(999999);
      expect(created.body.campaign).toMatchObject({ name: 'Created by PUT', status: 'active' });
      const refused = await app.http.put('/api/campaigns/999998/edit').set('Authorization', auth).send({ name: 'x', status: 'completed' });
      expect(expectError(refused, 400, 'validation_failed').details?.[0].field).toBe('status');
      expectError(await app.http.put(`/api/campaigns/${c.id}`).set('Authorization', auth).send({}), 400, 'validation_failed');
    });

    it('DELETE answers the campaign as it was, in both path styles, and removes its memberships', async () => {
      const a = await newCampaign({ name: 'Deletable A' });
      const b = await newCampaign({ name: 'Deletable B' });
      const contact = await newContact();
      expect((await add(a.id, contact)).status).toBe(200);
      expect((await add(b.id, contact)).status).toBe(200);

      const delA = await app.http.delete(`/api/campaigns/${a.id}/delete`).set('Authorization', auth);
      expect(delA.status).toBe(200);
      expect(delA.body).toEqual({ campaign: a });
      expect(await app.sql('SELECT 1 FROM campaign_members WHERE campaign_id = $1', [a.id])).toHaveLength(0);
      // The contact and its other membership stay.
      expect((await app.http.get(`/api/contacts/${contact}`).set('Authorization', auth)).status).toBe(200);
      expect((await members(b.id)).body.total).toBe(1);

      const delB = await app.http.delete(`/api/campaigns/${b.id}`).set('Authorization', auth);
      expect(delB.status).toBe(200);
      expect(delB.body.campaign.id).toBe(b.id);
      expectError(await app.http.get(`/api/campaigns/${a.id}`).set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.delete(`/api/campaigns/${b.id}`).set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get(`/api/campaigns/${b.id}/contacts`).set('Authorization', auth), 404, 'not_found');
    });
  });

  describe('list', () => {
    const tag = `lst${Date.now()}`;
    beforeAll(async () => {
      await newCampaign({ name: `${tag} alpha`, type: 'email', status: 'active' });
      await newCampaign({ name: `${tag} beta`, type: 'sms', status: 'inactive' });
      await newCampaign({ name: `${tag} gamma`, description: 'Holiday SALE', status: 'inactive' });
      const done = await newCampaign({ name: `${tag} delta` });
      await app.http.patch(`/api/campaigns/${done.id}`).set('Authorization', auth).send({ status: 'completed' });
    });
    const list = (query: Record<string, string | number>) => app.http.get('/api/campaigns').query(query).set('Authorization', auth);

    it('answers { total, campaigns } with search over name, description and type', async () => {
      const all = await list({ search: tag });
      expect(all.status).toBe(200);
      expect(all.body.total).toBe(4);
      expect(all.body.campaigns).toHaveLength(4);
      const byDescription = await list({ search: 'holiday sale' });
      expect(byDescription.body.campaigns.map((c: { name: string }) => c.name)).toEqual([`${tag} gamma`]);
      const byType = await list({ search: tag, orderBy: 'name' });
      expect(byType.body.campaigns.map((c: { name: string }) => c.name)).toEqual([`${tag} alpha`, `${tag} beta`, `${tag} delta`, `${tag} gamma`]);
      expect((await list({ search: 'SMS' })).body.campaigns.map((c: { name: string }) => c.name)).toContain(`${tag} beta`);
      expect((await list({ search: '_' })).body.total).toBe(0);
    });

    it('filters by status (active, inactive, completed)', async () => {
      const inactive = await list({ search: tag, status: 'inactive', orderBy: 'name', orderByDir: 'DESC' });
      expect(inactive.body.total).toBe(2);
      expect(inactive.body.campaigns.map((c: { name: string }) => c.name)).toEqual([`${tag} gamma`, `${tag} beta`]);
      const completed = await list({ search: tag, status: 'completed' });
      expect(completed.body.campaigns.map((c: { name: string }) => c.name)).toEqual([`${tag} delta`]);
      const active = await list({ search: tag, status: 'active' });
      expect(active.body.campaigns.map((c: { name: string }) => c.name)).toEqual([`${tag} alpha`]);
    });

    it('pages without overlap and counts every match', async () => {
      const p1 = await list({ search: tag, limit: 3, page: 1, orderBy: 'createdAt' });
      const p2 = await list({ search: tag, limit: 3, page: 2, orderBy: 'createdAt' });
      expect(p1.body.total).toBe(4);
      expect(p2.body.total).toBe(4);
      expect(p1.body.campaigns).toHaveLength(3);
      expect(p2.body.campaigns).toHaveLength(1);
      const ids = [...p1.body.campaigns, ...p2.body.campaigns].map((c: { id: number }) => c.id);
      expect(new Set(ids).size).toBe(4);
      expect((await list({ search: tag, page: 3, limit: 3 })).body).toEqual({ total: 4, campaigns: [] });
    });

    it('refuses bad list parameters with 400', async () => {
      for (const q of <Record<string, string>[]>[
        { status: 'archived' },
        { status: 'ACTIVE' },
        { limit: '0' },
        { limit: '201' },
        { page: '0' },
        { orderBy: 'secret' },
        { orderByDir: 'sideways' },
        { foo: 'bar' },
      ]) {
        expectError(await list(q), 400, 'validation_failed');
      }
    });
  });

  describe('membership', () => {
    it('adds (200 { success: true }), is idempotent, lists members and removes them', async () => {
      const c = await newCampaign({ name: 'Members' });
      const ann = await newContact('Ann Member');
      const bob = await newContact('Bob Member');
      const first = await add(c.id, ann);
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ success: true });
      const again = await add(c.id, ann);
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ success: true });
      expect((await add(c.id, bob)).status).toBe(200);

      const listed = await members(c.id, { orderBy: 'name' });
      expect(listed.status).toBe(200);
      expect(Object.keys(listed.body).sort()).toEqual(['contacts', 'total']);
      expect(listed.body.total).toBe(2);
      expect(listed.body.contacts.map((x: { id: number }) => x.id)).toEqual([ann, bob]);
      expect(listed.body.contacts[0]).toMatchObject({ id: ann, name: 'Ann Member', email: expect.any(String), fields: {} });

      const removed = await remove(c.id, ann);
      expect(removed.status).toBe(200);
      expect(removed.body).toEqual({ success: true });
      expectError(await remove(c.id, ann), 404, 'not_found');
      expect((await members(c.id)).body.contacts.map((x: { id: number }) => x.id)).toEqual([bob]);
    });

    it('answers 404 for an unknown campaign or contact', async () => {
      const c = await newCampaign({ name: 'Lonely' });
      const contact = await newContact();
      expectError(await add(987654, contact), 404, 'not_found');
      expectError(await add(c.id, 987654), 404, 'not_found');
      expectError(await add('x', contact), 404, 'not_found');
      expectError(await add(c.id, 'y'), 404, 'not_found');
      expectError(await remove(987654, contact), 404, 'not_found');
      expectError(await remove(c.id, 987654), 404, 'not_found');
      expectError(await members(987654), 404, 'not_found');
      expect(await app.sql('SELECT 1 FROM campaign_members WHERE campaign_id = $1', [c.id])).toHaveLength(0);
    });

    it('leaves exactly one membership row for 20 parallel adds of the same contact', async () => {
      const c = await newCampaign({ name: 'Racy' });
      const contact = await newContact();
      const results = await Promise.all(Array.from({ length: 20 }, () => add(c.id, contact)));
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(results.every((r) => r.body.success === true)).toBe(true);
      const rows = await app.sql('SELECT contact_id FROM campaign_members WHERE campaign_id = $1', [c.id]);
      expect(rows).toEqual([{ contact_id: contact }]);
      expect((await members(c.id)).body.total).toBe(1);
    });

    it('lists members with the contacts list parameters: search, paging, ordering, and refuses bad ones', async () => {
      const c = await newCampaign({ name: 'Paged members' });
      const ids: number[] = [];
      for (const n of ['Carol', 'Dave', 'Erin', 'Frank']) {
        const id = await newContact(`${n} Paged`);
        ids.push(id);
        await add(c.id, id);
      }
      const outsider = await newContact('Carol Outsider');
      const p = await members(c.id, { limit: 2, page: 2, orderBy: 'name', orderByDir: 'desc' });
      expect(p.body.total).toBe(4);
      expect(p.body.contacts.map((x: { name: string }) => x.name)).toEqual(['Dave Paged', 'Carol Paged']);
      const found = await members(c.id, { search: 'carol' });
      expect(found.body.total).toBe(1);
      expect(found.body.contacts[0].id).toBe(ids[0]);
      expect(found.body.contacts[0].id).not.toBe(outsider);
      for (const q of <Record<string, string>[]>[{ limit: '500' }, { orderBy: 'password' }, { status: 'active' }]) {
        expectError(await members(c.id, q), 400, 'validation_failed');
      }
    });

    it('a deleted contact leaves the member lists', async () => {
      const c1 = await newCampaign({ name: 'Shrinks 1' });
      const c2 = await newCampaign({ name: 'Shrinks 2' });
      const stays = await newContact('Stays');
      const goes = await newContact('Goes');
      for (const c of [c1, c2]) for (const x of [stays, goes]) expect((await add(c.id, x)).status).toBe(200);
      expect((await members(c1.id)).body.total).toBe(2);
      expect((await app.http.delete(`/api/contacts/${goes}`).set('Authorization', auth)).status).toBe(200);
      for (const c of [c1, c2]) {
        const res = await members(c.id);
        expect(res.body.total).toBe(1);
        expect(res.body.contacts.map((x: { id: number }) => x.id)).toEqual([stays]);
      }
      expect(await app.sql('SELECT 1 FROM campaign_members WHERE contact_id = $1', [goes])).toHaveLength(0);
    });
  });

  describe('completion job', () => {
    it('marks campaigns whose endDate has passed as completed, and only those', async () => {
      const past = new Date(Date.now() - 60_000).toISOString();
      const soon = new Date(Date.now() + 1_500).toISOString();
      const future = new Date(Date.now() + 3_600_000).toISOString();
      const expired = await newCampaign({ name: 'Expired', endDate: past });
      const expiredInactive = await newCampaign({ name: 'Expired inactive', status: 'inactive', endDate: past });
      const endsSoon = await newCampaign({ name: 'Ends soon', endDate: soon });
      const running = await newCampaign({ name: 'Running', endDate: future });
      const openEnded = await newCampaign({ name: 'Open ended' });

      const statusOf = async (id: number) => (await app.http.get(`/api/campaigns/${id}`).set('Authorization', auth)).body.campaign;
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        if ((await statusOf(endsSoon.id)).status === 'completed') break;
        await new Promise((r) => setTimeout(r, 200));
      }
      for (const c of [expired, expiredInactive, endsSoon]) {
        const rec = await statusOf(c.id);
        expect(rec.status).toBe('completed');
        expect(rec.modifiedAt).toMatch(ISO);
        expect(rec.modifiedByUser).toBe('system');
        expect(rec.modifiedBy).toBeNull();
      }
      expect((await statusOf(running.id)).status).toBe('active');
      expect((await statusOf(openEnded.id)).status).toBe('active');
      const done = await app.http.get('/api/campaigns').query({ status: 'completed', search: 'expired' }).set('Authorization', auth);
      expect(done.body.total).toBe(2);
    });

    it('completes a campaign again when it is reactivated after its end', async () => {
      const c = await newCampaign({ name: 'Reactivated', endDate: new Date(Date.now() - 1000).toISOString() });
      const deadline = Date.now() + 15_000;
      let status = '';
      while (Date.now() < deadline) {
        status = (await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', auth)).body.campaign.status;
        if (status === 'completed') break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe('completed');
      const reactivated = await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', auth).send({ status: 'active' });
      expect(reactivated.body.campaign.status).toBe('active');
      while (Date.now() < deadline + 5000) {
        status = (await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', auth)).body.campaign.status;
        if (status === 'completed') break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe('completed');
    });
  });

  describe('permissions and route table', () => {
    it('answers 403 without the campaigns permission the route needs, 401 without a token', async () => {
      const c = await newCampaign({ name: 'Guarded' });
      const contact = await newContact();
      expectError(await app.http.get('/api/campaigns').set('Authorization', noCampaigns), 403, 'forbidden');
      expectError(await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', noCampaigns), 403, 'forbidden');
      expectError(await app.http.get(`/api/campaigns/${c.id}/contacts`).set('Authorization', noCampaigns), 403, 'forbidden');
      // The members are contact records: campaigns:read alone is a 403 naming contacts:read.
      const refused = expectError(await app.http.get(`/api/campaigns/${c.id}/contacts`).set('Authorization', readOnly), 403, 'forbidden');
      expect(refused.message).toContain('contacts:read');
      expectError(await app.http.post(`/api/campaigns/${c.id}/contacts/search`).set('Authorization', readOnly).send({}), 403, 'forbidden');
      const withContacts = await tokenFor(app, 'campaigns:read,contacts:read', { user: 'reader@example.com', plan: 'enterprise' });
      expect((await app.http.get(`/api/campaigns/${c.id}/contacts`).set('Authorization', withContacts)).status).toBe(200);
      expect((await app.http.get('/api/campaigns').set('Authorization', readOnly)).status).toBe(200);
      expectError(await app.http.post('/api/campaigns/new').set('Authorization', readOnly).send({ name: 'x' }), 403, 'forbidden');
      expectError(await app.http.patch(`/api/campaigns/${c.id}`).set('Authorization', readOnly).send({ name: 'x' }), 403, 'forbidden');
      expectError(await app.http.put(`/api/campaigns/${c.id}`).set('Authorization', readOnly).send({ name: 'x' }), 403, 'forbidden');
      expectError(await add(c.id, contact, readOnly), 403, 'forbidden');
      expectError(await remove(c.id, contact, readOnly), 403, 'forbidden');
      expectError(await app.http.delete(`/api/campaigns/${c.id}`).set('Authorization', readWrite), 403, 'forbidden');
      expect((await add(c.id, contact, readWrite)).status).toBe(200);
      expect((await remove(c.id, contact, readWrite)).status).toBe(200);
      expectError(await app.http.get('/api/campaigns'), 401, 'unauthorized');
      expect((await app.http.get(`/api/campaigns/${c.id}`).set('Authorization', auth)).body.campaign.name).toBe('Guarded');
    });

    it('GET /api/endpoints lists every campaigns route with its permission', async () => {
      await expectRoutes(
        app,
        auth,
        '/api/campaigns',
        [
          ['GET', '/api/campaigns', 'campaigns:read'],
          ['POST', '/api/campaigns/search', 'campaigns:read'],
          ['POST', '/api/campaigns', 'campaigns:write'],
          ['POST', '/api/campaigns/new', 'campaigns:write'],
          ['GET', '/api/campaigns/:id', 'campaigns:read'],
          ['PATCH', '/api/campaigns/:id', 'campaigns:write'],
          ['PATCH', '/api/campaigns/:id/edit', 'campaigns:write'],
          ['PUT', '/api/campaigns/:id', 'campaigns:write'],
          ['PUT', '/api/campaigns/:id/edit', 'campaigns:write'],
          ['DELETE', '/api/campaigns/:id', 'campaigns:delete'],
          ['DELETE', '/api/campaigns/:id/delete', 'campaigns:delete'],
          ['GET', '/api/campaigns/:id/contacts', 'campaigns:read'],
          ['POST', '/api/campaigns/:id/contacts/search', 'campaigns:read'],
          ['POST', '/api/campaigns/:campaignId/contact/:contactId/add', 'campaigns:write'],
          ['POST', '/api/campaigns/:campaignId/contact/:contactId/remove', 'campaigns:write'],
          ['POST', '/api/campaigns/:id/contacts/batch', 'campaigns:write'],
        ],
        contactReading,
      );
    });

    it('documents the delete cascade and the envelopes in the OpenAPI document', async () => {
      const doc = (await app.http.get('/api/docs-json')).body as {
        paths: Record<string, Record<string, { summary?: string; description?: string; responses: Record<string, unknown> }>>;
      };
      const del = doc.paths['/api/campaigns/{id}/delete'].delete;
      expect(`${del.summary} ${del.description}`).toMatch(/membership/i);
      expect(JSON.stringify(doc.paths['/api/campaigns'].get.responses['200'])).toContain('CampaignRecordDto');
      expect(JSON.stringify(doc.paths['/api/campaigns/{id}/contacts'].get.responses['200'])).toContain('ContactRecordDto');
    });
  });
});
