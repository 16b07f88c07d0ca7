import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitUntil } from './support/wait.js';
import { expectError, startApp, type TestApp } from './support/app.js';
import { browse, Jar, setPassword, signIn } from './support/console.js';
import {
  adminToken,
  createContact,
  createDeal,
  tokenFor,
  uniqueEmail,
  userId,
  ISO,
  expectRoutes,
  contactReading,
  feedHead,
  feedSince,
} from './support/fixtures.js';

describe('companies', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noCompanies: string;
  let adminId: number;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    readOnly = await tokenFor(app, 'companies:read', { user: 'reader@example.com', plan: 'enterprise' });
    noCompanies = await tokenFor(app, 'contacts:read,contacts:write,deals:read', { user: 'other@example.com', plan: 'enterprise' });
    adminId = await userId(app);
  }, 120000);
  afterAll(async () => app?.stop());

  const post = (path: string, body: object, token = auth) => app.http.post(path).set('Authorization', token).send(body);
  const create = (body: object, path = '/api/companies/new') => post(path, body);
  const get = (path: string, token = auth) => app.http.get(path).set('Authorization', token);
  const newCompany = async (body: object = {}) => {
    const res = await create({ name: 'Company', ...body });
    expect(res.status).toBe(201);
    return res.body.company as { id: number; name: string; [k: string]: unknown };
  };
  const newContact = (body: Record<string, unknown> = {}) => createContact(app, auth, { email: uniqueEmail('companies.test'), ...body });
  const add = (companyId: number | string, contactId: number | string, token = auth) =>
    app.http.post(`/api/companies/${companyId}/contact/${contactId}/add`).set('Authorization', token);
  const remove = (companyId: number | string, contactId: number | string, token = auth) =>
    app.http.post(`/api/companies/${companyId}/contact/${contactId}/remove`).set('Authorization', token);

  const head = () => feedHead(app, auth);
  const eventsSince = (cursor: string, types: string) => feedSince(app, auth, cursor, types);

  describe('route forms', () => {
    it('creates (both paths), reads, edits (both paths), replaces or creates with PUT (both paths), deletes (both paths)', async () => {
      // Stored as given: the same in the request and in the record.
      const asGiven = {
        industry: 'Retail',
        size: 250,
        address1: '1 Main St',
        address2: 'Suite 2',
        city: 'Springfield',
        state: 'IL',
        zipcode: '62701',
        country: 'US',
        description: 'Everything',
      };
      const res = await create({
        name: ' Acme ',
        domain: 'https://www.Acme.com:8443/about',
        phone: '(415) 555-0100',
        website: 'acme.com',
        ...asGiven,
        ownerId: adminId,
      });
      expect(res.status).toBe(201);
      const acme = res.body.company;
      expect(acme).toEqual({
        id: expect.any(Number),
        name: 'Acme',
        domain: 'acme.com',
        phone: '+14155550100',
        website: 'https://acme.com',
        ...asGiven,
        ownerId: adminId,
        owner: { id: adminId, name: expect.any(String) },
        fields: {},
        createdAt: expect.stringMatching(ISO),
        modifiedAt: expect.stringMatching(ISO), // set on creation
        createdBy: adminId,
        createdByUser: expect.any(String),
        modifiedBy: adminId,
        modifiedByUser: expect.any(String),
      });
      const collection = await create({ name: 'Collection style' }, '/api/companies');
      expect(collection.status).toBe(201);

      expect((await get(`/api/companies/${acme.id}`, readOnly)).body).toEqual({ company: acme });

      const edit = await app.http.patch(`/api/companies/${acme.id}/edit`).set('Authorization', auth).send({ industry: 'Wholesale' });
      expect(edit.status).toBe(200);
      expect(edit.body.company).toMatchObject({ industry: 'Wholesale', city: 'Springfield', modifiedAt: expect.stringMatching(ISO), modifiedBy: adminId });
      const patch = await app.http.patch(`/api/companies/${acme.id}`).set('Authorization', auth).send({ size: 0 });
      expect(patch.body.company).toMatchObject({ size: 0, industry: 'Wholesale' });

      const replaced = await app.http.put(`/api/companies/${acme.id}/edit`).set('Authorization', auth).send({ name: 'Acme 2' });
      expect(replaced.status).toBe(200);
      expect(replaced.body.company).toMatchObject({ id: acme.id, name: 'Acme 2', domain: null, industry: null, ownerId: null, owner: null });
      const replaced2 = await app.http.put(`/api/companies/${acme.id}`).set('Authorization', auth).send({ name: 'Acme 3', domain: 'acme.com' });
      expect(replaced2.status).toBe(200);
      const made = await app.http.put('/api/companies/999999/edit').set('Authorization', auth).send({ name: 'Made by PUT' });
      expect(made.status).toBe(201);
      expect(made.body.company.id).not.toBe(999999);
      const made2 = await app.http.put('/api/companies/999998').set('Authorization', auth).send({ name: 'Made by PUT 2' });
      expect(made2.status).toBe(201);

      const del = await app.http.delete(`/api/companies/${acme.id}/delete`).set('Authorization', auth);
      expect(del.status).toBe(200);
      expect(del.body.company).toMatchObject({ id: acme.id, name: 'Acme 3' });
      expectError(await get(`/api/companies/${acme.id}`), 404, 'not_found');
      expect((await app.http.delete(`/api/companies/${made.body.company.id}`).set('Authorization', auth)).status).toBe(200);
      expectError(await app.http.delete(`/api/companies/${made.body.company.id}`).set('Authorization', auth), 404, 'not_found');
    });

    it('lists with search (name, domain, industry), paging, order and filters', async () => {
      await newCompany({ name: 'Zeta Search', domain: 'zeta-search.io', industry: 'Mining' });
      await newCompany({ name: 'Alpha Search', domain: 'alpha.example', industry: 'Mining' });
      await newCompany({ name: 'Other', domain: 'searchable-domain.example', industry: 'Farming', country: 'FR' });
      const byName = await get('/api/companies?search=SEARCH&orderBy=name&orderByDir=asc');
      expect(byName.status).toBe(200);
      expect(byName.body.companies.map((c: { name: string }) => c.name)).toEqual(['Alpha Search', 'Other', 'Zeta Search']);
      expect(byName.body.total).toBe(3);
      expect((await get('/api/companies?search=mining')).body.total).toBe(2);
      expect((await get('/api/companies?industry=Farming&country=FR')).body.companies.map((c: { name: string }) => c.name)).toEqual(['Other']);
      const page = await get('/api/companies?search=search&orderBy=name&limit=1&page=2');
      expect(page.body).toMatchObject({ total: 3, companies: [{ name: 'Other' }] });
      const all = await get('/api/companies?limit=1');
      const [{ n }] = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM companies`);
      expect(all.body.total).toBe(n);
      expectError(await get('/api/companies?orderBy=password'), 400, 'validation_failed');
      expectError(await get('/api/companies?bogus=1'), 400, 'validation_failed');
    });

    it('needs companies permissions: read-only tokens cannot write, other tokens cannot read', async () => {
      const c = await newCompany({ name: 'Guarded' });
      expectError(await app.http.get('/api/companies'), 401, 'unauthorized');
      expectError(await get(`/api/companies/${c.id}`, noCompanies), 403, 'forbidden');
      expectError(await post('/api/companies', { name: 'x' }, readOnly), 403, 'forbidden');
      expectError(await app.http.delete(`/api/companies/${c.id}`).set('Authorization', readOnly), 403, 'forbidden');
      expectError(await post('/api/companies/backfill', {}, readOnly), 403, 'forbidden');
      expect((await get(`/api/companies/${c.id}`, readOnly)).status).toBe(200);
      // The company's contacts are contact records: companies:read alone is a 403 naming contacts:read.
      expect(expectError(await get(`/api/companies/${c.id}/contacts`, readOnly), 403, 'forbidden').message).toContain('contacts:read');
      expectError(await post(`/api/companies/${c.id}/contacts/search`, {}, readOnly), 403, 'forbidden');
      const withContacts = await tokenFor(app, 'companies:read,contacts:read', { user: 'reader@example.com', plan: 'enterprise' });
      expect((await get(`/api/companies/${c.id}/contacts`, withContacts)).status).toBe(200);
    });

    it('GET /api/endpoints lists every companies route with its permission; the account console offers the permissions', async () => {
      await expectRoutes(
        app,
        auth,
        '/api/companies',
        [
          ['GET', '/api/companies', 'companies:read'],
          ['POST', '/api/companies/search', 'companies:read'],
          ['POST', '/api/companies', 'companies:write'],
          ['POST', '/api/companies/new', 'companies:write'],
          ['GET', '/api/companies/:id', 'companies:read'],
          ['PATCH', '/api/companies/:id', 'companies:write'],
          ['PATCH', '/api/companies/:id/edit', 'companies:write'],
          ['PUT', '/api/companies/:id', 'companies:write'],
          ['PUT', '/api/companies/:id/edit', 'companies:write'],
          ['DELETE', '/api/companies/:id', 'companies:delete'],
          ['DELETE', '/api/companies/:id/delete', 'companies:delete'],
          ['GET', '/api/companies/:id/contacts', 'companies:read'],
          ['POST', '/api/companies/:id/contacts/search', 'companies:read'],
          ['POST', '/api/companies/:companyId/contact/:contactId/add', 'companies:write'],
          ['POST', '/api/companies/:companyId/contact/:contactId/remove', 'companies:write'],
          ['POST', '/api/companies/backfill', 'companies:write'],
          ['GET', '/api/companies/backfill/:runId', 'companies:read'],
        ],
        contactReading,
      );
      // The account console's new-token form offers a Companies group with the three permissions.
      expect((await setPassword(app, 'admin@example.com', 'a long console password 1')).code).toBe(0);
      const jar = new Jar();
      expect((await signIn(app, jar, 'admin@example.com', 'a long console password 1')).status).toBe(303);
      const form = await browse(app, jar, '/account/tokens/new');
      expect(form.status).toBe(200);
      expect(form.html).toContain('<legend>Companies</legend>');
      for (const p of ['companies:read', 'companies:write', 'companies:delete']) expect(form.html).toContain(`value="${p}"`);
    });
  });

  describe('validation', () => {
    it('refuses bad bodies with 400 naming the field, and changes nothing', async () => {
      const before = (await get('/api/companies?limit=1')).body.total as number;
      const cases: [object, string][] = [
        [{}, 'name'],
        [{ name: '' }, 'name'],
        [{ name: '   ' }, 'name'],
        [{ name: 5 }, 'name'],
        [{ name: 'x', domain: 'not a domain' }, 'domain'],
        [{ name: 'x', domain: 'localhost' }, 'domain'],
        [{ name: 'x', domain: '10.0.0.1' }, 'domain'],
        [{ name: 'x', website: 'ftp://example.com' }, 'website'],
        [{ name: 'x', size: -1 }, 'size'],
        [{ name: 'x', size: 1.5 }, 'size'],
        [{ name: 'x', size: '12' }, 'size'],
        [{ name: 'x', ownerId: 987654 }, 'ownerId'],
        [{ name: 'x', ownerId: 0 }, 'ownerId'],
        [{ name: 'x', bogus: 1 }, 'bogus'],
        [{ name: 'x', fields: [] }, 'fields'],
        [{ name: 'x', fields: { nope: 1 } }, 'fields.nope'],
        [{ name: 'x\u0000' }, 'name'],
        [{ name: 'x', city: 'a'.repeat(256) }, 'city'],
      ];
      for (const [body, field] of cases) {
        const err = expectError(await create(body), 400, 'validation_failed');
        expect(err.details?.map((d) => d.field)).toContain(field);
      }
      const c = await newCompany({ name: 'Valid' });
      expectError(await app.http.patch(`/api/companies/${c.id}`).set('Authorization', auth).send({ name: null }), 400, 'validation_failed');
      expectError(await app.http.patch(`/api/companies/${c.id}`).set('Authorization', auth).send({ domain: 'x' }), 400, 'validation_failed');
      expectError(await app.http.patch('/api/companies/987654').set('Authorization', auth).send({ name: 'x' }), 404, 'not_found');
      expectError(await get('/api/companies/abc'), 404, 'not_found');
      expect((await get('/api/companies?limit=1')).body.total).toBe(before + 1);
    });
  });

  describe('domains', () => {
    it('normalises domains and dedupes them: 409 with the existing id, on create, PATCH and PUT', async () => {
      const cases: [string, string][] = [
        ['Example-One.COM', 'example-one.com'],
        ['http://www.example-two.com/path?q=1', 'example-two.com'],
        ['HTTPS://user@Example-Three.com:443/', 'example-three.com'],
        ['example-four.com.', 'example-four.com'],
        ['bücher-example.de', 'xn--bcher-example-wob.de'],
      ];
      for (const [input, stored] of cases) expect((await newCompany({ domain: input })).domain).toBe(stored);
      const holder = (await get('/api/companies?search=example-one.com')).body.companies[0] as { id: number };
      const dup = expectError(await create({ name: 'Dup', domain: 'https://www.EXAMPLE-ONE.com/' }), 409, 'conflict');
      expect(dup.details).toEqual([{ field: 'domain', message: 'is already taken', existingId: holder.id }]);
      const other = await newCompany({ name: 'Other', domain: 'other-domain.com' });
      expectError(await app.http.patch(`/api/companies/${other.id}`).set('Authorization', auth).send({ domain: 'example-one.com' }), 409, 'conflict');
      expectError(
        await app.http.put(`/api/companies/${other.id}`).set('Authorization', auth).send({ name: 'Other', domain: 'WWW.example-one.com' }),
        409,
        'conflict',
      );
      // Saving a company with its own domain again is not a conflict; blank clears it.
      expect((await app.http.patch(`/api/companies/${other.id}`).set('Authorization', auth).send({ domain: 'Other-Domain.com' })).status).toBe(200);
      expect((await app.http.patch(`/api/companies/${other.id}`).set('Authorization', auth).send({ domain: '' })).body.company.domain).toBeNull();
    });

    it('20 parallel creates of one domain (spelled differently): exactly one 201, the others 409 naming it', async () => {
      const spellings = ['race.example', 'RACE.example', 'https://race.example', 'www.race.example', 'http://www.race.example/x'];
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => create({ name: `Race ${i}`, domain: spellings[i % spellings.length] })));
      const created = results.filter((r) => r.status === 201);
      expect(created).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 201)) {
        expect(expectError(r, 409, 'conflict').details?.[0]).toMatchObject({ field: 'domain', existingId: created[0].body.company.id });
      }
      const [{ n }] = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM companies WHERE domain = 'race.example'`);
      expect(n).toBe(1);
    });
  });

  describe('custom values', () => {
    it('validates fields against the published company fields: select, unique identifier (409 with the holder), required', async () => {
      const field = (body: object) => post('/api/fields/company/new', body);
      expect(
        (
          await field({
            label: 'Plan',
            alias: 'plan',
            type: 'select',
            properties: {
              list: [
                { label: 'Pro', value: 'pro' },
                { label: 'Free', value: 'free' },
              ],
            },
          })
        ).status,
      ).toBe(201);
      expect((await field({ label: 'VAT', alias: 'vat', type: 'text', isUniqueIdentifier: true })).status).toBe(201);
      // A contact field with an alias the companies do not have is not a company field.
      expect((await post('/api/fields/contact/new', { label: 'Shoe', alias: 'shoe', type: 'number' })).status).toBe(201);

      const a = await newCompany({ name: 'Custom A', fields: { plan: 'pro', vat: 'FR-1' } });
      expect(a.fields).toEqual({ plan: 'pro', vat: 'FR-1' });
      const bad = expectError(await create({ name: 'Bad', fields: { plan: 'gold', shoe: 42 } }), 400, 'validation_failed');
      expect(bad.details).toEqual(
        expect.arrayContaining([
          { field: 'fields.plan', message: expect.stringContaining('pro, free') },
          { field: 'fields.shoe', message: 'is not a published company field' },
        ]),
      );
      const dup = expectError(await create({ name: 'Dup VAT', fields: { vat: 'FR-1' } }), 409, 'conflict');
      expect(dup.details).toEqual([{ field: 'fields.vat', message: 'is already taken', existingId: a.id }]);
      // Unique among companies: a contact may hold the same value in a contact field of that alias.
      expect((await post('/api/fields/contact/new', { label: 'VAT', alias: 'vat', type: 'text', isUniqueIdentifier: true })).status).toBe(201);
      expect(await newContact({ name: 'VAT holder', fields: { vat: 'FR-1' } })).toEqual(expect.any(Number));

      const b = await newCompany({ name: 'Custom B' });
      const patched = await app.http
        .patch(`/api/companies/${b.id}`)
        .set('Authorization', auth)
        .send({ fields: { plan: 'free' } });
      expect(patched.body.company.fields).toEqual({ plan: 'free' });
      expectError(
        await app.http
          .patch(`/api/companies/${b.id}`)
          .set('Authorization', auth)
          .send({ fields: { vat: 'FR-1' } }),
        409,
        'conflict',
      );
      // Parallel creates with one new unique value: exactly one wins.
      const race = await Promise.all(Array.from({ length: 6 }, (_, i) => create({ name: `VAT race ${i}`, fields: { vat: 'FR-race' } })));
      expect(race.filter((r) => r.status === 201)).toHaveLength(1);

      const required = await field({ label: 'Segment', alias: 'segment_code', type: 'text', isRequired: true });
      expect(required.status).toBe(201);
      expect(expectError(await create({ name: 'No segment' }), 400, 'validation_failed').details).toEqual([
        { field: 'fields.segment_code', message: 'is required' },
      ]);
      expect((await create({ name: 'With segment', fields: { segment_code: 'S1' } })).status).toBe(201);
      expectError(
        await app.http
          .patch(`/api/companies/${b.id}`)
          .set('Authorization', auth)
          .send({ fields: { segment_code: null } }),
        400,
        'validation_failed',
      );
      // Deleting the field removes its values from every company and lifts the requirement.
      expect((await app.http.delete(`/api/fields/company/${required.body.field.id}/delete`).set('Authorization', auth)).status).toBe(200);
      expect((await create({ name: 'No segment again' })).status).toBe(201);
      // Renaming a company field renames the key in the companies' values.
      const planField = (await get('/api/fields/company?search=plan')).body.fields[0] as { id: number };
      expect((await app.http.patch(`/api/fields/company/${planField.id}/edit`).set('Authorization', auth).send({ alias: 'tier' })).status).toBe(200);
      expect((await get(`/api/companies/${a.id}`)).body.company.fields).toEqual({ tier: 'pro', vat: 'FR-1' });
    });
  });

  describe('filter, cursors and sparse fields', () => {
    type Named = { id: number; name: string };
    const FQ = 'name[startsWith]:"FQ "';
    const co: Record<string, Named> = {};
    /** The names of the FQ companies a filter matches (GET with the query-string form, or POST /search with the JSON form). */
    async function matching(filter: string | object): Promise<string[]> {
      const res =
        typeof filter === 'string'
          ? await app.http
              .get('/api/companies')
              .query({ filter: `and(${FQ},${filter})`, limit: 200 })
              .set('Authorization', auth)
          : await post('/api/companies/search', { filter: { and: [{ field: 'name', op: 'startsWith', value: 'FQ ' }, filter] }, limit: 200 });
      if (res.status !== 200) throw new Error(`${JSON.stringify(filter)} → ${res.status} ${JSON.stringify(res.body)}`);
      return (res.body.companies as Named[]).map((c) => c.name).sort();
    }
    async function refused(filter: string) {
      const res = await app.http.get('/api/companies').query({ filter }).set('Authorization', auth);
      return expectError(res, 400, 'validation_failed');
    }

    beforeAll(async () => {
      const field = async (alias: string, type: string, properties: unknown = []) => {
        const res = await post('/api/fields/company/new', { label: alias, alias, type, properties });
        expect(res.status).toBe(201);
      };
      const list = (...v: string[]) => ({ list: v.map((x) => ({ label: x, value: x })) });
      await field('fq_seats', 'number');
      await field('fq_since', 'date');
      await field('fq_seen', 'datetime');
      await field('fq_partner', 'boolean');
      await field('fq_level', 'select', list('gold', 'silver'));
      await field('fq_regions', 'multiselect', list('emea', 'apac', 'amer'));
      await field('fq_note', 'text');
      const made: [string, Record<string, unknown>][] = [
        [
          'FQ Alpha',
          {
            domain: 'alpha-fq.example',
            phone: '+14155550101',
            website: 'alpha-fq.example',
            industry: 'Retail',
            size: 10,
            address1: '1 Rue de Rivoli',
            city: 'Paris',
            zipcode: '75001',
            country: 'FR',
            ownerId: adminId,
            fields: {
              fq_seats: 5,
              fq_since: '2025-01-15',
              fq_seen: '2026-01-01T10:00:00Z',
              fq_partner: true,
              fq_level: 'gold',
              fq_regions: ['emea'],
              fq_note: 'Big Fish',
            },
          },
        ],
        [
          'FQ Beta',
          {
            domain: 'beta-fq.example',
            industry: 'Retail',
            size: 250,
            city: 'Berlin',
            country: 'DE',
            fields: { fq_seats: 50, fq_since: '2026-06-01', fq_partner: false, fq_level: 'silver', fq_regions: ['emea', 'apac'] },
          },
        ],
        ['FQ Gamma', { industry: 'Mining', country: 'US', fields: { fq_regions: [] } }],
        ['FQ Delta', { size: 0, state: 'CA', address2: 'Floor 3', description: 'Has a description' }],
      ];
      for (const [name, body] of made) co[name.slice(3)] = await newCompany({ name, ...body });
    });

    it('string properties: exact eq/neq/in/nin, case-insensitive contains/startsWith/endsWith, emptiness', async () => {
      expect(await matching('name[eq]:"FQ Alpha"')).toEqual(['FQ Alpha']);
      expect(await matching('name[eq]:"fq alpha"')).toEqual([]);
      expect(await matching('domain[endsWith]:-FQ.EXAMPLE')).toEqual(['FQ Alpha', 'FQ Beta']);
      expect(await matching('domain[isEmpty]')).toEqual(['FQ Delta', 'FQ Gamma']);
      expect(await matching('phone[isNotEmpty]')).toEqual(['FQ Alpha']);
      expect(await matching('website[startsWith]:https://alpha')).toEqual(['FQ Alpha']);
      expect(await matching('industry[in]:[Retail,Mining]')).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Gamma']);
      expect(await matching('industry[neq]:Retail')).toEqual(['FQ Delta', 'FQ Gamma']);
      expect(await matching('industry[nin]:[Mining]')).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Delta']);
      expect(await matching('industry[isEmpty]')).toEqual(['FQ Delta']);
      expect(await matching('address1[contains]:RIVOLI')).toEqual(['FQ Alpha']);
      expect(await matching('address2[eq]:"Floor 3"')).toEqual(['FQ Delta']);
      expect(await matching('city[contains]:ari')).toEqual(['FQ Alpha']);
      expect(await matching('state[eq]:CA')).toEqual(['FQ Delta']);
      expect(await matching('zipcode[startsWith]:75')).toEqual(['FQ Alpha']);
      expect(await matching('country[in]:[FR,DE]')).toEqual(['FQ Alpha', 'FQ Beta']);
      expect(await matching('description[isNotEmpty]')).toEqual(['FQ Delta']);
      expect(await matching('name[gt]:"FQ C"')).toEqual(['FQ Delta', 'FQ Gamma']);
    });

    it('int, id and date-time properties: size, id, ownerId / owner.id, createdAt, modifiedAt', async () => {
      expect(await matching('size[gte]:10')).toEqual(['FQ Alpha', 'FQ Beta']);
      expect(await matching('size[between]:[0,10]')).toEqual(['FQ Alpha', 'FQ Delta']);
      expect(await matching('size[eq]:0')).toEqual(['FQ Delta']);
      expect(await matching('size[isEmpty]')).toEqual(['FQ Gamma']);
      expect(await matching(`id[in]:[${co.Alpha.id},${co.Gamma.id}]`)).toEqual(['FQ Alpha', 'FQ Gamma']);
      expect(await matching(`id[neq]:${co.Alpha.id}`)).toEqual(['FQ Beta', 'FQ Delta', 'FQ Gamma']);
      expect(await matching(`owner.id[eq]:${adminId}`)).toEqual(['FQ Alpha']);
      expect(await matching(`ownerId[eq]:${adminId}`)).toEqual(['FQ Alpha']);
      expect(await matching('owner.id[isEmpty]')).toEqual(['FQ Beta', 'FQ Delta', 'FQ Gamma']);
      expect(await matching('createdAt[gte]:now-1h')).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Delta', 'FQ Gamma']);
      expect(await matching('createdAt[lt]:now-1d')).toEqual([]);
      expect(await matching('modifiedAt[gt]:now+1h')).toEqual([]);
      expect(await matching('modifiedAt[isNotEmpty]')).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Delta', 'FQ Gamma']);
      expect((await refused('size[gt]:many')).details?.[0].message).toMatch(/number/);
      expect((await refused('size[contains]:1')).details?.[0].message).toMatch(/allowed: eq, neq/);
      expect((await refused('ownerId[eq]:0')).details?.[0].field).toBe('filter.value');
    });

    it('custom company fields by type: number, date, date-time, boolean, select, multiselect, text; unknown ones are 400s', async () => {
      expect(await matching('fields.fq_seats[gt]:10')).toEqual(['FQ Beta']);
      expect(await matching('fields.fq_seats[between]:[1,10]')).toEqual(['FQ Alpha']);
      expect(await matching('fields.fq_seats[isEmpty]')).toEqual(['FQ Delta', 'FQ Gamma']);
      expect(await matching('fields.fq_since[lt]:2026-01-01')).toEqual(['FQ Alpha']);
      expect(await matching('fields.fq_seen[lt]:now')).toEqual(['FQ Alpha']);
      expect(await matching('fields.fq_partner[eq]:true')).toEqual(['FQ Alpha']);
      expect(await matching('fields.fq_partner[eq]:false')).toEqual(['FQ Beta']);
      expect(await matching('fields.fq_level[in]:[gold,silver]')).toEqual(['FQ Alpha', 'FQ Beta']);
      expect(await matching('fields.fq_level[neq]:gold')).toEqual(['FQ Beta', 'FQ Delta', 'FQ Gamma']);
      expect(await matching('fields.fq_regions[contains]:apac')).toEqual(['FQ Beta']);
      expect(await matching('fields.fq_regions[in]:[emea]')).toEqual(['FQ Alpha', 'FQ Beta']);
      expect(await matching('fields.fq_regions[isEmpty]')).toEqual(['FQ Delta', 'FQ Gamma']);
      expect(await matching('fields.fq_note[contains]:fish')).toEqual(['FQ Alpha']);
      // The JSON form through POST /api/companies/search answers the same.
      expect(await matching({ field: 'fields.fq_seats', op: 'gt', value: 10 })).toEqual(['FQ Beta']);
      expect(
        await matching({
          or: [
            { field: 'size', op: 'eq', value: 0 },
            { field: 'fields.fq_level', op: 'eq', value: 'gold' },
          ],
        }),
      ).toEqual(['FQ Alpha', 'FQ Delta']);
      expect(await matching({ not: { field: 'industry', op: 'eq', value: 'Retail' } })).toEqual(['FQ Delta', 'FQ Gamma']);
      expect((await refused('fields.fq_level[eq]:bronze')).details?.[0].message).toMatch(/one of: gold, silver/);
      expect((await refused('fields.fq_partner[gt]:true')).details?.[0].message).toMatch(/allowed: eq, neq/);
      // A contact field (or no field at all) is not a company field: the 400 names the allowed fields.
      expect((await post('/api/fields/contact/new', { label: 'fq_shoe', alias: 'fq_shoe', type: 'number' })).status).toBe(201);
      const unknown = await refused('fields.fq_shoe[eq]:1');
      const allowed = (unknown.details?.[0].message ?? '').split('allowed: ')[1].split(', ');
      expect(allowed).toEqual(expect.arrayContaining(['name', 'size', 'owner.id', 'fields.fq_seats', 'fields.fq_regions']));
      expect(allowed).not.toContain('fields.fq_shoe');
      expect((await refused('password[eq]:x')).details?.[0].message).toMatch(/domain/);
    });

    it('POST /api/companies/search: list parameters as JSON, companies:read', async () => {
      const body = { filter: { field: 'industry', op: 'eq', value: 'Retail' }, orderBy: 'size', orderByDir: 'desc', fields: ['name', 'size'], limit: 1 };
      const res = await post('/api/companies/search', body, readOnly);
      expect(res.status).toBe(200);
      const retail = (await get('/api/companies?filter=industry[eq]:Retail')).body.total as number;
      expect(res.body.total).toBe(retail);
      expect(Object.keys(res.body.companies[0]).sort()).toEqual(['id', 'name', 'size']);
      expectError(await post('/api/companies/search', body, noCompanies), 403, 'forbidden');
      expectError(await app.http.post('/api/companies/search').send(body), 401, 'unauthorized');
      expectError(await post('/api/companies/search', { filter: { field: 'nope', op: 'eq', value: 1 } }), 400, 'validation_failed');
      expectError(await post('/api/companies/search', { page: 'x' }), 400, 'validation_failed');
    });

    it('cursors walk the filtered list (both directions, ties broken by id); count=false skips the total', async () => {
      for (const [orderBy, dir] of [
        ['name', 'asc'],
        ['size', 'desc'],
        ['id', 'asc'],
      ]) {
        const seen: string[] = [];
        let after = '';
        for (let i = 0; i < 10; i++) {
          const res = await get(`/api/companies?${new URLSearchParams({ filter: FQ, orderBy, orderByDir: dir, limit: '1', after })}`);
          expect(res.status).toBe(200);
          expect(res.body.total).toBe(4);
          seen.push(...(res.body.companies as Named[]).map((c) => c.name));
          if (res.body.next === null) break;
          after = res.body.next as string;
        }
        expect([...seen].sort()).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Delta', 'FQ Gamma']);
        if (orderBy === 'name') expect(seen).toEqual(['FQ Alpha', 'FQ Beta', 'FQ Delta', 'FQ Gamma']);
        // size desc: NULLs first, then 250, 10, 0.
        if (orderBy === 'size') expect(seen).toEqual(['FQ Gamma', 'FQ Beta', 'FQ Alpha', 'FQ Delta']);
      }
      const uncounted = await get(`/api/companies?${new URLSearchParams({ filter: FQ, orderBy: 'name', limit: '3', count: 'false' })}`);
      expect(uncounted.body).toMatchObject({ total: -1, next: expect.any(String) });
      expect(uncounted.body.companies).toHaveLength(3);
      const rest = await get(`/api/companies?${new URLSearchParams({ filter: FQ, orderBy: 'name', limit: '3', after: uncounted.body.next as string })}`);
      expect(rest.body.companies.map((c: Named) => c.name)).toEqual(['FQ Gamma']);
      expect(rest.body.next).toBeNull();
      // A cursor belongs to its walk.
      expectError(await get(`/api/companies?${new URLSearchParams({ orderBy: 'size', after: uncounted.body.next as string })}`), 400, 'validation_failed');
      // Plain lists keep their envelope (no next).
      expect(Object.keys((await get('/api/companies?limit=1')).body).sort()).toEqual(['companies', 'total']);
    });

    it('fields= answers only the chosen properties plus id; fields.<alias> one custom value; unknown names are 400s', async () => {
      const res = await get(
        `/api/companies?${new URLSearchParams({ filter: `${FQ},id[eq]:${co.Alpha.id}`, fields: 'name,owner,fields.fq_seats,fields.fq_level' })}`,
      );
      expect(res.status).toBe(200);
      expect(res.body.companies).toEqual([
        { id: co.Alpha.id, name: 'FQ Alpha', owner: { id: adminId, name: expect.any(String) }, fields: { fq_seats: 5, fq_level: 'gold' } },
      ]);
      const all = await get(`/api/companies?${new URLSearchParams({ filter: `id[eq]:${co.Beta.id}`, fields: 'domain,size,fields,modifiedAt' })}`);
      expect(all.body.companies).toEqual([
        {
          id: co.Beta.id,
          domain: 'beta-fq.example',
          size: 250,
          fields: { fq_seats: 50, fq_since: '2026-06-01', fq_partner: false, fq_level: 'silver', fq_regions: ['emea', 'apac'] },
          modifiedAt: expect.stringMatching(ISO),
        },
      ]);
      const bad = expectError(await get('/api/companies?fields=name,password'), 400, 'validation_failed');
      expect(bad.details?.[0]).toMatchObject({ field: 'fields', message: expect.stringContaining('fields.fq_seats') });
      expectError(await get('/api/companies?fields=fields.fq_shoe'), 400, 'validation_failed');
    });

    it('contacts and deals filter by company.id / companyId (company_id); sparse companyId, companyRef, company_id', async () => {
      const marker = uniqueEmail('fq-contacts.test');
      const domain = marker.split('@')[1];
      const inAlpha = [
        await newContact({ name: 'FQ a1', email: `a1.${marker}`, companyId: co.Alpha.id }),
        await newContact({ name: 'FQ a2', email: `a2.${marker}`, companyId: co.Alpha.id }),
      ];
      const inBeta = await newContact({ name: 'FQ b1', email: `b1.${marker}`, companyId: co.Beta.id });
      const none = await newContact({ name: 'FQ none', email: `n1.${marker}` });
      const contactIds = async (filter: string) => {
        const res = await get(`/api/contacts?${new URLSearchParams({ filter: `email[endsWith]:"@${domain}",${filter}`, orderBy: 'id', limit: '200' })}`);
        expect(res.status).toBe(200);
        return (res.body.contacts as { id: number }[]).map((c) => c.id);
      };
      expect(await contactIds(`company.id[eq]:${co.Alpha.id}`)).toEqual(inAlpha);
      expect(await contactIds(`companyId[in]:[${co.Alpha.id},${co.Beta.id}]`)).toEqual([...inAlpha, inBeta]);
      expect(await contactIds(`company.id[neq]:${co.Alpha.id}`)).toEqual([inBeta, none]);
      expect(await contactIds('company.id[isEmpty]')).toEqual([none]);
      const json = await post('/api/contacts/search', {
        filter: {
          and: [
            { field: 'email', op: 'endsWith', value: `@${domain}` },
            { field: 'company.id', op: 'eq', value: co.Beta.id },
          ],
        },
      });
      expect(json.body.contacts.map((c: { id: number }) => c.id)).toEqual([inBeta]);
      expectError(await get('/api/contacts?filter=company.id[eq]:abc'), 400, 'validation_failed');
      const sparse = await get(`/api/contacts?${new URLSearchParams({ filter: `id[eq]:${inAlpha[0]}`, fields: 'companyId,companyRef' })}`);
      expect(sparse.body.contacts).toEqual([{ id: inAlpha[0], companyId: co.Alpha.id, companyRef: { id: co.Alpha.id, name: 'FQ Alpha' } }]);
      // A company's contacts take the same filters.
      const ofAlpha = await get(`/api/companies/${co.Alpha.id}/contacts?${new URLSearchParams({ filter: `company.id[eq]:${co.Alpha.id}`, orderBy: 'id' })}`);
      expect(ofAlpha.body.contacts.map((c: { id: number }) => c.id)).toEqual(inAlpha);

      const alphaDeal = await createDeal(app, auth, inAlpha[0], { title: 'FQ deal', company_id: co.Alpha.id });
      const betaDeal = await createDeal(app, auth, inBeta, { title: 'FQ deal', company_id: co.Beta.id });
      const plainDeal = await createDeal(app, auth, none, { title: 'FQ deal' });
      const dealIds = async (filter: string) => {
        const res = await get(`/api/deals?${new URLSearchParams({ filter: `contact_id[in]:[${inAlpha[0]},${inBeta},${none}],${filter}`, orderBy: 'id' })}`);
        expect(res.status).toBe(200);
        return (res.body.deals as { id: number }[]).map((d) => d.id);
      };
      expect(await dealIds(`company.id[eq]:${co.Alpha.id}`)).toEqual([alphaDeal.id]);
      expect(await dealIds(`company_id[in]:[${co.Alpha.id},${co.Beta.id}]`)).toEqual([alphaDeal.id, betaDeal.id]);
      expect(await dealIds(`company.id[nin]:[${co.Alpha.id}]`)).toEqual([betaDeal.id, plainDeal.id]);
      expect(await dealIds('company_id[isEmpty]')).toEqual([plainDeal.id]);
      const dealSearch = await post('/api/deals/search', { filter: { field: 'company.id', op: 'eq', value: co.Beta.id }, fields: ['company_id'] });
      expect(dealSearch.body.deals).toEqual([{ id: betaDeal.id, company_id: co.Beta.id }]);
    });
  });

  describe('contacts and deals', () => {
    it('contacts take companyId: companyRef, company text from the company when not given, 400 for a missing company', async () => {
      const co = await newCompany({ name: 'Initech' });
      const res = await post('/api/contacts', { name: 'Peter', email: uniqueEmail('companies.test'), companyId: co.id });
      expect(res.status).toBe(201);
      expect(res.body.contact).toMatchObject({ company: 'Initech', companyId: co.id, companyRef: { id: co.id, name: 'Initech' } });
      const id = res.body.contact.id as number;
      expect((await get(`/api/contacts/${id}`)).body.contact.companyRef).toEqual({ id: co.id, name: 'Initech' });
      const own = await post('/api/contacts/new', { name: 'Bill', email: uniqueEmail('companies.test'), companyId: co.id, company: 'Initech LLC' });
      expect(own.body.contact).toMatchObject({ company: 'Initech LLC', companyId: co.id });
      const missing = expectError(
        await post('/api/contacts', { name: 'X', email: uniqueEmail('companies.test'), companyId: 987654 }),
        400,
        'validation_failed',
      );
      expect(missing.details).toEqual([{ field: 'companyId', message: 'company 987654 does not exist' }]);
      expectError(await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ companyId: 987654 }), 400, 'validation_failed');
      expectError(await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ companyId: 'x' }), 400, 'validation_failed');
      const other = await newCompany({ name: 'Globochem' });
      const moved = await app.http.patch(`/api/contacts/${id}/edit`).set('Authorization', auth).send({ companyId: other.id });
      expect(moved.body.contact).toMatchObject({ company: 'Globochem', companyRef: { id: other.id, name: 'Globochem' } });
      const cleared = await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ companyId: null });
      expect(cleared.body.contact).toMatchObject({ company: 'Globochem', companyId: null, companyRef: null });
      const put = await app.http.put(`/api/contacts/${id}`).set('Authorization', auth).send({ name: 'Peter', email: res.body.contact.email, companyId: co.id });
      expect(put.body.contact).toMatchObject({ company: 'Initech', companyId: co.id });
      const listed = await get('/api/contacts?search=initech&orderBy=id');
      expect(listed.body.contacts.map((c: { companyRef: unknown }) => c.companyRef)).toEqual([
        { id: co.id, name: 'Initech' },
        { id: co.id, name: 'Initech' },
      ]);
      // A contact without a company keeps the old shape plus companyRef null.
      const plain = await newContact({ name: 'Plain', company: 'Free text Ltd' });
      expect((await get(`/api/contacts/${plain}`)).body.contact).toMatchObject({ company: 'Free text Ltd', companyId: null, companyRef: null });
    });

    it('deals take company_id (snake_case): stored, filtered, 400 for a missing company', async () => {
      const co = await newCompany({ name: 'Dealco' });
      const contact = await newContact({ name: 'Buyer' });
      const deal = await createDeal(app, auth, contact, { company_id: co.id });
      expect(deal).toMatchObject({ company_id: co.id });
      const plain = await createDeal(app, auth, contact);
      expect(plain).toMatchObject({ company_id: null });
      const missing = expectError(await post('/api/deals', { title: 'x', value: 1, contact_id: contact, company_id: 987654 }), 400, 'validation_failed');
      expect(missing.details).toEqual([{ field: 'company_id', message: 'company 987654 does not exist' }]);
      const listed = await get(`/api/deals?company_id=${co.id}`);
      expect(listed.body.deals.map((d: { id: number }) => d.id)).toEqual([deal.id]);
      const patched = await app.http.patch(`/api/deals/${plain.id}`).set('Authorization', auth).send({ company_id: co.id });
      expect(patched.body.deal.company_id).toBe(co.id);
      const put = await app.http.put(`/api/deals/${plain.id}`).set('Authorization', auth).send({ title: 'R', value: 2, contact_id: contact });
      expect(put.body.deal.company_id).toBeNull();
    });
  });

  describe("a company's contacts", () => {
    it('add (twice is fine), list with the contacts list parameters, remove (a non-member is a 404)', async () => {
      const co = await newCompany({ name: 'Members Inc' });
      const ids = [await newContact({ name: 'Member B' }), await newContact({ name: 'Member A' }), await newContact({ name: 'Outsider' })];
      expect((await add(co.id, ids[0])).body).toEqual({ success: true });
      expect((await add(co.id, ids[0])).body).toEqual({ success: true });
      expect((await add(co.id, ids[1])).status).toBe(200);
      const list = await get(`/api/companies/${co.id}/contacts?orderBy=name`);
      expect(list.status).toBe(200);
      expect(list.body.total).toBe(2);
      expect(list.body.contacts.map((c: { name: string }) => c.name)).toEqual(['Member A', 'Member B']);
      expect(list.body.contacts[0]).toMatchObject({ company: 'Members Inc', companyId: co.id, companyRef: { id: co.id, name: 'Members Inc' } });
      expect((await get(`/api/companies/${co.id}/contacts?search=member a`)).body.total).toBe(1);
      expect((await get(`/api/companies/${co.id}/contacts?limit=1&page=2&orderBy=name`)).body.contacts[0].name).toBe('Member B');
      expectError(await get(`/api/companies/${co.id}/contacts?bogus=1`), 400, 'validation_failed');
      expectError(await get('/api/companies/987654/contacts'), 404, 'not_found');

      expectError(await remove(co.id, ids[2]), 404, 'not_found');
      expectError(await remove(987654, ids[0]), 404, 'not_found');
      expectError(await remove(co.id, 987654), 404, 'not_found');
      expectError(await add(987654, ids[0]), 404, 'not_found');
      expectError(await add(co.id, 987654), 404, 'not_found');
      expectError(await add(co.id, ids[0], readOnly), 403, 'forbidden');
      expect((await remove(co.id, ids[0])).body).toEqual({ success: true });
      expectError(await remove(co.id, ids[0]), 404, 'not_found');
      expect((await get(`/api/contacts/${ids[0]}`)).body.contact).toMatchObject({ companyId: null, company: 'Members Inc' });
      expect((await get(`/api/companies/${co.id}/contacts`)).body.total).toBe(1);
      // Adding a contact of another company moves it.
      const other = await newCompany({ name: 'Poacher' });
      await add(other.id, ids[1]);
      expect((await get(`/api/companies/${co.id}/contacts`)).body.total).toBe(0);
      expect((await get(`/api/contacts/${ids[1]}`)).body.contact.companyRef).toEqual({ id: other.id, name: 'Poacher' });
    });

    it('parallel adds of many contacts all land; parallel removes of one contact: exactly one 200', async () => {
      const co = await newCompany({ name: 'Parallel Inc' });
      const ids = await Promise.all(Array.from({ length: 15 }, (_, i) => newContact({ name: `P${i}` })));
      const adds = await Promise.all(ids.flatMap((id) => [add(co.id, id), add(co.id, id)]));
      expect(adds.map((r) => r.status)).toEqual(adds.map(() => 200));
      expect((await get(`/api/companies/${co.id}/contacts?limit=100`)).body.total).toBe(15);
      const removes = await Promise.all(Array.from({ length: 8 }, () => remove(co.id, ids[0])));
      expect(removes.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of removes.filter((x) => x.status !== 200)) expectError(r, 404, 'not_found');
      // Adds and removes of different contacts in parallel.
      const mixed = await Promise.all([...ids.slice(1, 8).map((id) => remove(co.id, id)), ...ids.slice(0, 1).map((id) => add(co.id, id))]);
      expect(mixed.map((r) => r.status)).toEqual(mixed.map(() => 200));
      expect((await get(`/api/companies/${co.id}/contacts?limit=100`)).body.total).toBe(8);
    });
  });

  describe('delete', () => {
    it('detaches contacts and deals (visible in modifiedAt and the event feed); parallel deletes: one 200, the rest 404', async () => {
      const co = await newCompany({ name: 'Doomed Corp' });
      const contact = await newContact({ name: 'Survivor', companyId: co.id });
      const deal = await createDeal(app, auth, contact, { company_id: co.id });
      const cursor = await head();
      const results = await Promise.all(Array.from({ length: 8 }, () => app.http.delete(`/api/companies/${co.id}`).set('Authorization', auth)));
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 200)) expectError(r, 404, 'not_found');
      const c = (await get(`/api/contacts/${contact}`)).body.contact;
      expect(c).toMatchObject({ companyId: null, companyRef: null, company: 'Doomed Corp', modifiedAt: expect.stringMatching(ISO) });
      const d = (await get(`/api/deals/${deal.id}`)).body.deal;
      expect(d).toMatchObject({ company_id: null, modifiedAt: expect.stringMatching(ISO) });
      const events = await eventsSince(cursor, 'company.deleted,contact.updated,deal.updated');
      expect(events.map((e) => e.type).sort()).toEqual(['company.deleted', 'contact.updated', 'deal.updated']);
      expect(events.find((e) => e.type === 'contact.updated')).toMatchObject({
        data: c,
        previous: { companyId: co.id, companyRef: { id: co.id, name: 'Doomed Corp' } },
      });
      expect(events.find((e) => e.type === 'deal.updated')).toMatchObject({ data: d, previous: { company_id: co.id } });
      // Listed contacts with modifiedSince see the detach.
      const since = await get(`/api/contacts?modifiedSince=${encodeURIComponent(c.modifiedAt)}&search=survivor`);
      expect(since.body.contacts.map((x: { id: number }) => x.id)).toContain(contact);
    });
  });

  describe('events', () => {
    it('company.created, company.updated (with previous) and company.deleted; contact.updated for membership changes', async () => {
      const cursor = await head();
      const co = await newCompany({ name: 'Evented', industry: 'A' });
      const patched = (await app.http.patch(`/api/companies/${co.id}`).set('Authorization', auth).send({ industry: 'B' })).body.company;
      const contact = await newContact({ name: 'Joiner' });
      await add(co.id, contact);
      await add(co.id, contact); // no change, no event
      await remove(co.id, contact);
      const deleted = (await app.http.delete(`/api/companies/${co.id}`).set('Authorization', auth)).body.company;
      const events = await eventsSince(cursor, 'company.created,company.updated,company.deleted,contact.updated');
      expect(events.map((e) => e.type)).toEqual(['company.created', 'company.updated', 'contact.updated', 'contact.updated', 'company.deleted']);
      expect(events[0].data).toEqual(co);
      expect(events[1]).toMatchObject({ data: patched, previous: { industry: 'A' } });
      expect(events[2]).toMatchObject({ data: { id: contact, companyId: co.id, company: 'Evented' }, previous: { companyId: null, companyRef: null } });
      expect(events[3]).toMatchObject({ data: { id: contact, companyId: null }, previous: { companyId: co.id } });
      expect(events[4].data).toEqual(deleted);
    });
  });

  describe('backfill', () => {
    it('CLI companies:backfill: companies from distinct strings (case-insensitive, trimmed, first spelling), links contacts; idempotent', async () => {
      const existing = await newCompany({ name: 'Umbrella' });
      const ids = [
        await newContact({ name: 'BF1', company: ' Cyberdyne ' }),
        await newContact({ name: 'BF2', company: 'CYBERDYNE' }),
        await newContact({ name: 'BF3', company: 'cyberdyne' }),
        await newContact({ name: 'BF4', company: 'umbrella' }),
        await newContact({ name: 'BF5', company: '   ' }),
      ];
      const cursor = await head();
      const first = await app.cli(['companies:backfill']);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/backfill run \d+ completed: \d+ companies created, \d+ contacts linked/);
      const cyberdyne = await app.sql<{ id: number; name: string; created_by_user: string }>(
        `SELECT id, name, created_by_user FROM companies WHERE lower(name) = 'cyberdyne'`,
      );
      expect(cyberdyne).toHaveLength(1);
      expect(cyberdyne[0]).toMatchObject({ name: 'Cyberdyne', created_by_user: 'cli' });
      for (const id of ids.slice(0, 3)) expect((await get(`/api/contacts/${id}`)).body.contact.companyRef).toEqual({ id: cyberdyne[0].id, name: 'Cyberdyne' });
      expect((await get(`/api/contacts/${ids[1]}`)).body.contact.company).toBe('CYBERDYNE');
      expect((await get(`/api/contacts/${ids[3]}`)).body.contact.companyId).toBe(existing.id);
      expect((await get(`/api/contacts/${ids[4]}`)).body.contact.companyId).toBeNull();
      const events = await eventsSince(cursor, 'company.created,contact.updated');
      const created = events.filter((e) => e.type === 'company.created').find((e) => e.data.id === cyberdyne[0].id);
      expect(created?.data).toEqual((await get(`/api/companies/${cyberdyne[0].id}`)).body.company);
      expect(events.filter((e) => e.type === 'contact.updated' && ids.includes(e.data.id as number))).toHaveLength(4);

      const again = await app.cli(['companies:backfill']);
      expect(again.stdout).toMatch(/completed: 0 companies created, 0 contacts linked/);
    });

    it('POST /api/companies/backfill: 202 with a run, followed to completed with GET /api/companies/backfill/{runId}; idempotent', async () => {
      const ids = [await newContact({ name: 'EP1', company: 'Tyrell Corp' }), await newContact({ name: 'EP2', company: 'tyrell corp ' })];
      const start = await post('/api/companies/backfill', {});
      expect(start.status).toBe(202);
      expect(start.body.backfill).toMatchObject({ id: expect.any(Number), status: 'queued', trigger: 'api', companiesCreated: null });
      const run = await waitForRun(start.body.backfill.id as number);
      expect(run).toMatchObject({ status: 'completed', companiesCreated: 1, contactsLinked: 2, finishedAt: expect.stringMatching(ISO) });
      const tyrell = await app.sql<{ id: number; created_by: number }>(`SELECT id, created_by FROM companies WHERE lower(name) = 'tyrell corp'`);
      expect(tyrell).toEqual([{ id: expect.any(Number), created_by: adminId }]);
      for (const id of ids) expect((await get(`/api/contacts/${id}`)).body.contact.companyId).toBe(tyrell[0].id);
      const second = await post('/api/companies/backfill', {});
      expect(await waitForRun(second.body.backfill.id as number)).toMatchObject({ status: 'completed', companiesCreated: 0, contactsLinked: 0 });
      expectError(await get('/api/companies/backfill/987654'), 404, 'not_found');
      expectError(await get('/api/companies/backfill/abc'), 404, 'not_found');
      expect((await get(`/api/companies/backfill/${start.body.backfill.id}`, readOnly)).status).toBe(200);
    });

    it('parallel backfill requests create each company once', async () => {
      await newContact({ name: 'PB1', company: 'Soylent' });
      await newContact({ name: 'PB2', company: 'SOYLENT' });
      const starts = await Promise.all(Array.from({ length: 4 }, () => post('/api/companies/backfill', {})));
      expect(starts.map((r) => r.status)).toEqual([202, 202, 202, 202]);
      const runs = await Promise.all(starts.map((r) => waitForRun(r.body.backfill.id as number)));
      expect(runs.map((r) => r.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
      expect(runs.reduce((n, r) => n + (r.companiesCreated as number), 0)).toBe(1);
      const [{ n }] = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM companies WHERE lower(name) = 'soylent'`);
      expect(n).toBe(1);
    });
  });

  async function waitForRun(id: number): Promise<Record<string, unknown>> {
    return waitUntil(
      `backfill run ${id} to finish`,
      async () => {
        const res = await get(`/api/companies/backfill/${id}`);
        expect(res.status).toBe(200);
        const run = res.body.backfill as Record<string, unknown>;
        return run.status === 'completed' || run.status === 'failed' ? run : null;
      },
      30000,
    );
  }
});
