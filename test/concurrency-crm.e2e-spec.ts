/**
 * Concurrency and numeric edge values for campaigns, categories, point groups, deals and activities:
 * parallel PATCHes of different properties all land, parallel DELETEs of one record answer one 200
 * and 404s, server-generated category aliases never 409, and a deal's numeric edge values are 400s.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken } from './support/fixtures.js';

const ROUNDS = 4;

describe('CRM resources under concurrency', () => {
  let app: TestApp;
  let auth: string;
  let contactId: number;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    const res = await app.http
      .post('/api/contacts')
      .set('Authorization', auth)
      .send({ name: 'Concurrent', email: `conc-${Date.now()}@crm.test` });
    expect(res.status).toBe(201);
    contactId = res.body.contact.id;
  });
  afterAll(async () => app?.stop());

  const post = (path: string, body: object | string) =>
    app.http
      .post(path)
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(body as object);
  const patch = (path: string, body: object | string) =>
    app.http
      .patch(path)
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(body as object);
  const put = (path: string, body: object | string) =>
    app.http
      .put(path)
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(body as object);

  /** Per resource: how to create one, and per round the PATCH bodies (one property each) sent at once. */
  const resources: { name: string; path: string; key: string; create: () => object; rounds: (r: number) => Record<string, unknown>[] }[] = [
    {
      name: 'campaigns',
      path: '/api/campaigns',
      key: 'campaign',
      create: () => ({ name: 'Start' }),
      rounds: (r) => [
        { name: `Name ${r}` },
        { description: `Description ${r}` },
        { type: `type-${r}` },
        { status: r % 2 ? 'inactive' : 'active' },
        { startDate: `2030-01-0${r + 1}T00:00:00+00:00` },
        { endDate: `2031-01-0${r + 1}T00:00:00+00:00` },
      ],
    },
    {
      name: 'categories',
      path: '/api/categories',
      key: 'category',
      create: () => ({ title: 'Start', bundle: 'global' }),
      rounds: (r) => [{ title: `Title ${r}` }, { description: `Description ${r}` }, { color: `#00000${r}` }, { alias: `conc-alias-${Date.now()}-${r}` }],
    },
    {
      name: 'point groups',
      path: '/api/point-groups',
      key: 'pointGroup',
      create: () => ({ name: 'Start', minimumPoints: 0, maximumPoints: 10_000 }),
      rounds: (r) => [
        { name: `Name ${r}` },
        { description: `Description ${r}` },
        { isPublished: r % 2 === 0 },
        { color: `#0000a${r}` },
        { minimumPoints: r + 1 },
        { maximumPoints: 5000 + r },
      ],
    },
    {
      name: 'deals',
      path: '/api/deals',
      key: 'deal',
      create: () => ({ title: 'Start', value: 1, contact_id: contactId }),
      rounds: (r) => [
        { title: `Title ${r}` },
        { value: 100 + r + 0.25 },
        { stage: `stage-${r}` },
        { probability: 10 + r },
        { product: `product-${r}` },
        { quantity: 2 + r },
        { expected_close_date: `2030-02-0${r + 1}` },
      ],
    },
    {
      name: 'activities',
      path: '/api/activities',
      key: 'activity',
      create: () => ({ type: 'call', subject: 'Start', contact_id: contactId }),
      rounds: (r) => [
        { subject: `Subject ${r}` },
        { notes: `Notes ${r}` },
        { outcome: `Outcome ${r}` },
        { type: r % 2 ? 'email' : 'meeting' },
        { due_date: `2030-03-0${r + 1}T00:00:00+00:00` },
      ],
    },
  ];

  describe.each(resources)('$name', ({ path, key, create, rounds }) => {
    it('parallel PATCHes of different properties all land, round after round', async () => {
      const created = await post(path, create());
      expect(created.status).toBe(201);
      const id = created.body[key].id as number;
      for (let r = 0; r < ROUNDS; r++) {
        const bodies = rounds(r);
        const answers = await Promise.all(bodies.map((b) => patch(`${path}/${id}`, b)));
        expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 200));
        const now = await app.http.get(`${path}/${id}`).set('Authorization', auth);
        expect(now.status).toBe(200);
        const expected: Record<string, unknown> = Object.assign({}, ...bodies);
        for (const k of ['startDate', 'endDate', 'due_date']) {
          if (typeof expected[k] === 'string') expected[k] = new Date(expected[k]).toISOString().replace('.000Z', '+00:00');
        }
        expect(now.body[key]).toMatchObject(expected);
      }
    });

    it('parallel DELETEs of one record: exactly one 200, the others 404', async () => {
      for (let r = 0; r < 2; r++) {
        const created = await post(path, create());
        expect(created.status).toBe(201);
        const id = created.body[key].id as number;
        const answers = await Promise.all(Array.from({ length: 12 }, () => app.http.delete(`${path}/${id}`).set('Authorization', auth)));
        const statuses = answers.map((a) => a.status).sort();
        expect(statuses).toEqual([200, ...Array(11).fill(404)]);
        for (const a of answers.filter((x) => x.status === 404)) expectError(a, 404, 'not_found');
        expect(answers.find((a) => a.status === 200)!.body[key].id).toBe(id);
      }
    });
  });

  describe('generated category aliases', () => {
    it('50 parallel creates without an alias all succeed, with distinct aliases', async () => {
      const title = `Busy ${Date.now()}`;
      const answers = await Promise.all(Array.from({ length: 50 }, () => post('/api/categories', { title, bundle: 'asset' })));
      expect(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${JSON.stringify(a.body)}`)).toEqual([]);
      const aliases = answers.map((a) => a.body.category.alias as string);
      expect(new Set(aliases).size).toBe(50);
    });

    it('50 parallel PUTs to new ids without an alias all create, with distinct aliases', async () => {
      const title = `Busy put ${Date.now()}`;
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => put(`/api/categories/${900_000 + i}`, { title, bundle: 'report' })));
      expect(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${JSON.stringify(a.body)}`)).toEqual([]);
      expect(new Set(answers.map((a) => a.body.category.alias as string)).size).toBe(50);
    });
  });

  describe('numeric edge values are a 400, never a 500', () => {
    // Written as raw JSON so the numbers reach the server exactly as a client would send them.
    const tooPrecise = ['1e-7', '0.0000001', '1E-7', '1e-320', '5e-324', '1.5e-10', '0.001', '1.005'];
    const outOfRange = ['1e308', '-1e308', '1e13', '-0.01', '1e400'];

    it.each([...tooPrecise, ...outOfRange])('deal value %s on POST, PATCH and PUT', async (raw) => {
      const created = await post('/api/deals', { title: 'Edge', value: 1, contact_id: contactId });
      expect(created.status).toBe(201);
      const id = created.body.deal.id as number;
      const body = `{"title":"Edge","value":${raw},"contact_id":${contactId}}`;
      for (const res of [await post('/api/deals', body), await patch(`/api/deals/${id}`, `{"value":${raw}}`), await put(`/api/deals/${id}`, body)]) {
        const err = expectError(res, 400, 'validation_failed');
        expect(err.details?.map((d) => d.field)).toEqual(['value']);
      }
    });

    it('-0 and values at the limits are accepted (-0 is stored as 0)', async () => {
      for (const [raw, stored] of [
        ['-0', 0],
        ['0.1', 0.1],
        ['1e2', 100],
        ['999999999999.99', 999999999999.99],
      ] as const) {
        const res = await post('/api/deals', `{"title":"Edge","value":${raw},"contact_id":${contactId}}`);
        expect(res.status).toBe(201);
        expect(res.body.deal.value).toBe(stored);
      }
    });

    it.each(['1e-7', '1e-320', '1e308', '0.5', '-1e-7'])('other numeric deal, activity and point group properties: %s', async (raw) => {
      const deal = { title: 'Edge', value: 1, contact_id: contactId };
      const cases: [string, string, string][] = [
        ['/api/deals', JSON.stringify(deal).replace('}', `,"probability":${raw}}`), 'probability'],
        ['/api/deals', JSON.stringify(deal).replace('}', `,"quantity":${raw}}`), 'quantity'],
        ['/api/deals', JSON.stringify(deal).replace('}', `,"owner_id":${raw}}`), 'owner_id'],
        ['/api/deals', `{"title":"Edge","value":1,"contact_id":${raw}}`, 'contact_id'],
        ['/api/activities', `{"type":"call","subject":"Edge","contact_id":${raw}}`, 'contact_id'],
        ['/api/point-groups', `{"name":"Edge","minimumPoints":${raw},"maximumPoints":10}`, 'minimumPoints'],
        ['/api/point-groups', `{"name":"Edge","minimumPoints":0,"maximumPoints":${raw}}`, 'maximumPoints'],
      ];
      for (const [path, body, field] of cases) {
        const err = expectError(await post(path, body), 400, 'validation_failed');
        expect(err.details?.map((d) => d.field)).toContain(field);
      }
    });
  });
});
