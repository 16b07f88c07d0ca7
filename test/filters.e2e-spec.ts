/**
 * The filter language on every list (docs/decisions/filter-language.md): every operator on every field type, contact
 * custom fields by type, the JSON and query-string forms and POST /search, the limits, and hostile
 * field names and values (never a 500, never SQL).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createContact, uniqueEmail, tokenFor } from './support/fixtures.js';

type Contact = { id: number; name: string; title: string | null; fields: Record<string, unknown> };

describe('filter language', () => {
  let app: TestApp;
  let admin: string;
  let campaignId: number;
  const ids: Record<string, number> = {};

  const names = (body: { contacts: Contact[] }) => body.contacts.map((c) => c.name).sort();

  async function filtered(filter: unknown, path = '/api/contacts'): Promise<string[]> {
    const res =
      typeof filter === 'string'
        ? await app.http.get(path).query({ filter, limit: 200 }).set('Authorization', admin)
        : await app.http.post(`${path}/search`).set('Authorization', admin).send({ filter, limit: 200 });
    if (res.status !== 200) throw new Error(`${JSON.stringify(filter)} → ${res.status} ${JSON.stringify(res.body)}`);
    return names(res.body as { contacts: Contact[] });
  }

  async function refused(filter: unknown, path = '/api/contacts') {
    const res =
      typeof filter === 'string'
        ? await app.http.get(path).query({ filter }).set('Authorization', admin)
        : await app.http.post(`${path}/search`).set('Authorization', admin).send({ filter });
    expectError(res, 400, 'validation_failed');
    return res.body as { error: { message: string; details: { field: string; message: string }[] } };
  }

  beforeAll(async () => {
    app = await startApp({ role: 'api' });
    admin = await adminToken(app);
    const field = async (alias: string, type: string, properties: unknown = []) => {
      const res = await app.http.post('/api/fields/contact/new').set('Authorization', admin).send({ label: alias, alias, type, properties });
      expect(res.status).toBe(201);
    };
    const list = (...v: string[]) => ({ list: v.map((x) => ({ label: x, value: x })) });
    await field('plan', 'select', list('free', 'pro', 'team'));
    await field('seats', 'number');
    await field('renewal', 'date');
    await field('seen', 'datetime');
    await field('vip', 'boolean');
    await field('tags', 'multiselect', list('red', 'green', 'blue'));
    await field('note', 'text');
    const campaign = (await app.http.post('/api/campaigns/new').set('Authorization', admin).send({ name: 'Spring' })).body as { campaign: { id: number } };
    campaignId = campaign.campaign.id;
    const people: [string, Record<string, unknown>][] = [
      [
        'Ada',
        {
          title: 'Countess',
          fields: { plan: 'pro', seats: 10, renewal: '2026-03-01', seen: '2026-01-01T10:00:00Z', vip: true, tags: ['red', 'blue'], note: 'Likes Engines' },
        },
      ],
      ['Bob', { title: null, fields: { plan: 'free', seats: 2, renewal: '2025-12-31', vip: false, tags: ['green'], note: '100% sure' } }],
      ['Cy', { title: 'CTO', fields: { plan: 'team', seats: 250, tags: [] } }],
      ['Dee', { title: '', company: 'Acme, (Inc.)', fields: { note: 'under_score' } }],
      ['Émile', { title: 'Ingénieur', fields: { plan: 'pro', seats: 2.5 } }],
    ];
    for (const [name, body] of people) ids[name] = await createContact(app, admin, { name, email: uniqueEmail('filters.test', name.toLowerCase()), ...body });
    for (const n of ['Ada', 'Cy']) {
      const r = await app.http.post(`/api/campaigns/${campaignId}/contact/${ids[n]}/add`).set('Authorization', admin);
      expect(r.status).toBe(200);
    }
  }, 120_000);
  afterAll(() => app?.stop());

  it('string operators: exact eq/neq/in/nin, case-insensitive contains/startsWith/endsWith, ordering, emptiness', async () => {
    expect(await filtered('name[eq]:Ada')).toEqual(['Ada']);
    expect(await filtered('name[eq]:ada')).toEqual([]);
    expect(await filtered('name[neq]:Ada')).toEqual(['Bob', 'Cy', 'Dee', 'Émile']);
    expect(await filtered('name[in]:[Ada,Cy]')).toEqual(['Ada', 'Cy']);
    expect(await filtered('name[nin]:[Ada,Cy]')).toEqual(['Bob', 'Dee', 'Émile']);
    expect(await filtered('name[contains]:D')).toEqual(['Ada', 'Dee']);
    expect(await filtered('name[startsWith]:é')).toEqual(['Émile']);
    expect(await filtered('name[endsWith]:E')).toEqual(['Dee', 'Émile']);
    expect(await filtered('name[gte]:C')).toEqual(['Cy', 'Dee', 'Émile']);
    expect(await filtered('name[lt]:Bz')).toEqual(['Ada', 'Bob']);
    expect(await filtered('title[isEmpty]')).toEqual(['Bob', 'Dee']);
    expect(await filtered('title[isNotEmpty]')).toEqual(['Ada', 'Cy', 'Émile']);
    expect(await filtered('company[eq]:"Acme, (Inc.)"')).toEqual(['Dee']);
  });

  it('ids, owners, campaign membership and date-times with relative dates', async () => {
    expect(await filtered(`id[in]:[${ids.Ada},${ids.Bob}]`)).toEqual(['Ada', 'Bob']);
    expect(await filtered(`id[neq]:${ids.Ada}`)).toHaveLength(4);
    // Ids compare like every integer (created in this order: Ada, Bob, Cy, Dee, Émile).
    expect(await filtered(`id[gt]:${ids.Cy}`)).toEqual(['Dee', 'Émile']);
    expect(await filtered(`id[gte]:${ids.Cy}`)).toEqual(['Cy', 'Dee', 'Émile']);
    expect(await filtered(`id[lt]:${ids.Bob}`)).toEqual(['Ada']);
    expect(await filtered(`id[lte]:${ids.Bob}`)).toEqual(['Ada', 'Bob']);
    expect(await filtered(`id[between]:[${ids.Bob},${ids.Dee}]`)).toEqual(['Bob', 'Cy', 'Dee']);
    expect(await filtered({ field: 'id', op: 'gt', value: ids.Dee })).toEqual(['Émile']);
    expect((await refused('id[gt]:0')).error.message).toMatch(/out of range/);
    for (const path of ['/api/deals', '/api/account/tokens', '/api/webhooks']) {
      const res = await app.http.get(path).query({ filter: 'id[gt]:1' }).set('Authorization', admin);
      expect(res.status).toBe(200);
    }
    const doc = (await app.http.get('/api/docs-json').set('Authorization', admin)).body as {
      paths: Record<string, { get?: { parameters?: { name: string; description?: string }[] } }>;
    };
    const described = doc.paths['/api/deals'].get?.parameters?.find((x) => x.name === 'filter')?.description ?? '';
    expect(described).toContain('`id` id: eq, neq, gt, gte, lt, lte, between, in, nin, isEmpty, isNotEmpty');
    expect(await filtered('owner.id[isEmpty]')).toHaveLength(5);
    expect(await filtered('owner.id[eq]:1')).toEqual([]);
    expect(await filtered(`campaign.id[eq]:${campaignId}`)).toEqual(['Ada', 'Cy']);
    expect(await filtered(`campaign.id[neq]:${campaignId}`)).toEqual(['Bob', 'Dee', 'Émile']);
    expect(await filtered(`campaign.id[in]:[${campaignId},999999]`)).toEqual(['Ada', 'Cy']);
    expect(await filtered(`campaign.id[nin]:[${campaignId}]`)).toHaveLength(3);
    expect(await filtered('campaign.id[isEmpty]')).toEqual(['Bob', 'Dee', 'Émile']);
    expect(await filtered('campaign.id[isNotEmpty]')).toEqual(['Ada', 'Cy']);
    expect(await filtered('createdAt[gte]:now-1h')).toHaveLength(5);
    expect(await filtered('createdAt[gt]:now+2d')).toEqual([]);
    expect(await filtered('createdAt[between]:[now-1w,now+1M]')).toHaveLength(5);
    expect(await filtered('createdAt[lt]:2000-01-01T00:00:00Z')).toEqual([]);
    // modifiedAt is set on creation.
    expect(await filtered('modifiedAt[isNotEmpty]')).toHaveLength(5);
    expect(await filtered('modifiedAt[isEmpty]')).toEqual([]);
    // The member list of a campaign takes the same filters.
    expect(await filtered('name[startsWith]:a', `/api/campaigns/${campaignId}/contacts`)).toEqual(['Ada']);
  });

  it('custom fields by type: select, number, date, date-time, boolean, multiselect and text', async () => {
    expect(await filtered('fields.plan[eq]:pro')).toEqual(['Ada', 'Émile']);
    expect(await filtered('fields.plan[in]:[free,team]')).toEqual(['Bob', 'Cy']);
    expect(await filtered('fields.plan[neq]:pro')).toEqual(['Bob', 'Cy', 'Dee']);
    expect(await filtered('fields.plan[nin]:[pro,free]')).toEqual(['Cy', 'Dee']);
    expect(await filtered('fields.plan[isEmpty]')).toEqual(['Dee']);
    expect(await filtered('fields.seats[gt]:9')).toEqual(['Ada', 'Cy']);
    expect(await filtered('fields.seats[eq]:2')).toEqual(['Bob']);
    expect(await filtered('fields.seats[between]:[2,10]')).toEqual(['Ada', 'Bob', 'Émile']);
    expect(await filtered('fields.seats[lte]:2.5')).toEqual(['Bob', 'Émile']);
    expect(await filtered('fields.renewal[lt]:2026-01-01')).toEqual(['Bob']);
    expect(await filtered('fields.renewal[gte]:2026-01-01')).toEqual(['Ada']);
    expect(await filtered('fields.seen[gte]:2025-12-31T23:00:00-02:00')).toEqual(['Ada']);
    expect(await filtered('fields.seen[lt]:now')).toEqual(['Ada']);
    expect(await filtered('fields.vip[eq]:true')).toEqual(['Ada']);
    expect(await filtered('fields.vip[eq]:false')).toEqual(['Bob']);
    expect(await filtered('fields.vip[isEmpty]')).toEqual(['Cy', 'Dee', 'Émile']);
    expect(await filtered('fields.tags[contains]:red')).toEqual(['Ada']);
    expect(await filtered('fields.tags[in]:[green,blue]')).toEqual(['Ada', 'Bob']);
    expect(await filtered('fields.tags[nin]:[red]')).toEqual(['Bob', 'Cy', 'Dee', 'Émile']);
    expect(await filtered('fields.tags[isEmpty]')).toEqual(['Cy', 'Dee', 'Émile']);
    expect(await filtered('fields.note[contains]:engine')).toEqual(['Ada']);
    expect(await filtered('fields.note[contains]:%')).toEqual(['Bob']);
    expect(await filtered('fields.note[contains]:_')).toEqual(['Dee']);
    expect(await filtered('fields.note[eq]:"100% sure"')).toEqual(['Bob']);
    // Typed values: a select takes only its options, a number only numbers.
    expect((await refused('fields.plan[eq]:gold')).error.details[0].message).toMatch(/one of: free, pro, team/);
    expect((await refused('fields.seats[gt]:many')).error.details[0].message).toMatch(/number/);
    expect((await refused('fields.vip[gt]:true')).error.details[0].message).toMatch(/allowed: eq, neq/);
    expect((await refused('fields.renewal[eq]:2026-02-30')).error.details[0].message).toMatch(/calendar day/);
  });

  it('and, or, not in both forms; the JSON form in the query string; POST /search answers as GET', async () => {
    const qs = 'or(and(fields.plan[eq]:pro,not(name[eq]:Ada)),name[in]:[Bob,"Cy"])';
    const json = {
      or: [
        { and: [{ field: 'fields.plan', op: 'eq', value: 'pro' }, { not: { field: 'name', op: 'eq', value: 'Ada' } }] },
        { field: 'name', op: 'in', value: ['Bob', 'Cy'] },
      ],
    };
    expect(await filtered(qs)).toEqual(['Bob', 'Cy', 'Émile']);
    expect(await filtered(json)).toEqual(['Bob', 'Cy', 'Émile']);
    expect(await filtered(JSON.stringify(json))).toEqual(['Bob', 'Cy', 'Émile']);
    expect(await filtered(qs, `/api/campaigns/${campaignId}/contacts`)).toEqual(['Cy']);
    expect(await filtered(json, `/api/campaigns/${campaignId}/contacts`)).toEqual(['Cy']);
    // A top-level list is an and; not() of a condition on an empty value is its exact complement.
    expect(await filtered('title[isNotEmpty],name[startsWith]:c')).toEqual(['Cy']);
    expect(await filtered('not(title[eq]:CTO)')).toEqual(['Ada', 'Bob', 'Dee', 'Émile']);
    expect(await filtered({ field: 'title', op: 'neq', value: 'CTO' })).toEqual(['Ada', 'Bob', 'Dee', 'Émile']);
    const get = await app.http.get('/api/contacts').query({ filter: qs, orderBy: 'name', limit: 2, page: 2 }).set('Authorization', admin);
    const post = await app.http.post('/api/contacts/search').set('Authorization', admin).send({ filter: json, orderBy: 'name', limit: 2, page: 2 });
    expect(get.status).toBe(200);
    expect(post.body).toEqual(get.body);
    expect(Object.keys(get.body as object).sort()).toEqual(['contacts', 'total']);
    expect((get.body as { total: number }).total).toBe(3);
  });

  it('every filterable field of every list takes isNotEmpty and isEmpty (each registry expression is valid SQL)', async () => {
    const doc = (await app.http.get('/api/docs-json').set('Authorization', admin)).body as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string; description?: string }[] }>>;
    };
    const failures: string[] = [];
    let lists = 0;
    const company = await app.http.post('/api/companies').set('Authorization', admin).send({ name: 'Filter Co' });
    expect(company.status).toBe(201);
    const segment = await app.http.post('/api/segments').set('Authorization', admin).send({ name: 'Filter segment', type: 'static' });
    expect(segment.status).toBe(201);
    // Inactive (nothing is sent to it), for its deliveries list.
    const webhook = await app.http
      .post('/api/webhooks')
      .set('Authorization', admin)
      .send({ url: 'https://192.0.43.10/filters', events: ['deal.won'], isActive: false });
    expect(webhook.status).toBe(201);
    // A draft workflow, for its enrollments list.
    const workflow = await app.http
      .post('/api/workflows')
      .set('Authorization', admin)
      .send({ name: 'Filter workflow', trigger: { type: 'manual' }, steps: [{ key: 'done', type: 'exit' }] });
    expect(workflow.status).toBe(201);
    for (const [path, ops] of Object.entries(doc.paths)) {
      const p = ops.get?.parameters?.find((x) => x.in === 'query' && x.name === 'filter');
      if (!p) continue;
      lists++;
      const url = path
        .replace('/api/fields/{id}', '/api/fields/contact')
        .replace('/api/companies/{id}', `/api/companies/${company.body.company.id as number}`)
        .replace('/api/segments/{id}', `/api/segments/${segment.body.segment.id as number}`)
        .replace('/api/webhooks/{id}', `/api/webhooks/${webhook.body.webhook.id as number}`)
        .replace('/api/workflows/{id}', `/api/workflows/${workflow.body.workflow.id as number}`)
        .replace('{id}', String(campaignId));
      const fields = [...(p.description ?? '').matchAll(/`([A-Za-z_.]+)` ([a-z-]+)/g)].map((m) => m[1]);
      expect(fields.length).toBeGreaterThan(2);
      for (const f of fields) {
        for (const op of ['isEmpty', 'isNotEmpty']) {
          const res = await app.http
            .get(url)
            .query({ filter: `${f}[${op}]` })
            .set('Authorization', admin);
          if (res.status !== 200) failures.push(`${url} ${f}[${op}] → ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        }
        const search = await app.http
          .post(`${url}/search`)
          .set('Authorization', admin)
          .send({ filter: { field: f, op: 'isNotEmpty' } });
        if (search.status !== 200 && !(url.startsWith('/api/fields/') && [404, 405].includes(search.status)))
          failures.push(`POST ${url}/search ${f} → ${search.status}`);
      }
    }
    expect(lists).toBeGreaterThanOrEqual(14);
    expect(failures).toEqual([]);
  }, 300_000);

  it('other lists: numbers, dates, enums, ints and booleans', async () => {
    const contact = ids.Ada;
    for (const [title, value, date] of [
      ['Small', 10, '2026-01-10'],
      ['Big', 5000.5, '2026-06-01'],
      ['None', 0, null],
    ] as const) {
      const r = await app.http
        .post('/api/deals/new')
        .set('Authorization', admin)
        .send({ title, value, contact_id: contact, ...(date ? { expected_close_date: date } : {}) });
      expect(r.status).toBe(201);
    }
    const deals = async (filter: string) => {
      const r = await app.http.get('/api/deals').query({ filter }).set('Authorization', admin);
      expect(r.status).toBe(200);
      return (r.body as { deals: { title: string }[] }).deals.map((d) => d.title).sort();
    };
    expect(await deals('value[gt]:10')).toEqual(['Big']);
    expect(await deals('value[between]:[0,10]')).toEqual(['None', 'Small']);
    expect(await deals('value[in]:[10,0]')).toEqual(['None', 'Small']);
    expect(await deals('expected_close_date[lt]:2026-02-01')).toEqual(['Small']);
    expect(await deals('expected_close_date[isEmpty]')).toEqual(['None']);
    expect(await deals('status[eq]:open')).toHaveLength(3);
    expect(await deals(`contact_id[eq]:${contact}`)).toHaveLength(3);
    expect(await deals('quantity[gte]:1')).toHaveLength(3);
    expectError(await app.http.get('/api/deals').query({ filter: 'status[eq]:maybe' }).set('Authorization', admin), 400, 'validation_failed');
    expectError(await app.http.get('/api/deals').query({ filter: 'value[contains]:1' }).set('Authorization', admin), 400, 'validation_failed');
    const groups = await app.http.get('/api/point-groups').query({ filter: 'isPublished[eq]:maybe' }).set('Authorization', admin);
    expect((groups.body as { error: { details: { message: string }[] } }).error.details[0].message).toMatch(/true or false/);
  });

  it('limits: depth, number of conditions, list size, value length; each a 400 naming the rule', async () => {
    const nest = (depth: number): string => (depth === 0 ? 'name[eq]:a' : `and(${nest(depth - 1)})`);
    expect(await filtered(nest(4))).toEqual([]);
    expect((await refused(nest(5))).error.message).toMatch(/deeper than 4/);
    const many = (n: number) => `or(${Array.from({ length: n }, (_, i) => `name[eq]:n${i}`).join(',')})`;
    expect(await filtered(many(50))).toEqual([]);
    expect((await refused(many(51))).error.message).toMatch(/more than 50/);
    expect((await refused(`and(${many(30)},${many(30)})`)).error.message).toMatch(/more than 50 conditions/);
    const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    expect(await filtered({ field: 'name', op: 'in', value: values(1000) })).toEqual([]);
    expect((await refused({ field: 'name', op: 'in', value: values(1001) })).error.message).toMatch(/1000/);
    expect((await refused(`name[in]:[${values(1001).join(',')}]`)).error.message).toMatch(/1000/);
    expect((await refused({ field: 'name', op: 'eq', value: 'x'.repeat(1001) })).error.message).toMatch(/1000 characters/);
    const long = await app.http
      .post('/api/contacts/search')
      .set('Authorization', admin)
      .send({ filter: 'x'.repeat(70_000) });
    expectError(long, 400, 'validation_failed');
    expect((long.body as { error: { message: string } }).error.message).toMatch(/longer than/);
    expect((await refused({ field: 'name', op: 'between', value: ['a'] })).error.message).toMatch(/exactly two/);
    expect((await refused({ field: 'name', op: 'in', value: [] })).error.message).toMatch(/at least one/);
    expect((await refused({ field: 'name', op: 'eq' })).error.message).toMatch(/needs a value/);
    expect((await refused({ field: 'name', op: 'eq', value: ['a'] })).error.message).toMatch(/one value/);
    expect((await refused({ field: 'name', op: 'eq', value: null })).error.message).toMatch(/isEmpty/);
    expect((await refused({ and: [] })).error.message).toMatch(/non-empty/);
    expect((await refused({ field: 'name', op: 'eq', value: 'a', extra: 1 })).error.message).toMatch(/unknown property/);
  });

  it('unknown fields and operators are 400s naming the allowed ones', async () => {
    const unknown = await refused('favourite[eq]:blue');
    expect(unknown.error.details[0].field).toBe('filter.field');
    expect(unknown.error.details[0].message).toMatch(/allowed: id, name, email/);
    expect(unknown.error.details[0].message).toMatch(/fields\.plan/);
    const op = await refused('name[like]:a');
    expect(op.error.details[0].message).toMatch(/allowed: eq, neq, in, nin, contains, startsWith, endsWith, gt/);
    expect((await refused('fields.unknown[eq]:1')).error.message).toMatch(/not a filterable field/);
    expect((await refused('name[eq]:a,')).error.message).toMatch(/field name/);
    expect((await refused('and(name[eq]:a')).error.message).toMatch(/expected/);
    expect((await refused('name[eq]:"unterminated')).error.message).toMatch(/unterminated/);
    expect((await refused('{"field":')).error.message).toMatch(/not valid JSON/);
    // Fields of another list are unknown here.
    expectError(await app.http.get('/api/campaigns').query({ filter: 'email[eq]:a' }).set('Authorization', admin), 400, 'validation_failed');
    // The body of POST /search takes the list parameters only.
    const extra = await app.http.post('/api/contacts/search').set('Authorization', admin).send({ filter: 'name[eq]:a', drop: 1 });
    expectError(extra, 400, 'validation_failed');
    const text = await app.http.post('/api/contacts/search').set('Authorization', admin).set('Content-Type', 'text/plain').send('name[eq]:a');
    expectError(text, 415, 'unsupported_media_type');
    const narrow = await tokenFor(app, 'deals:read');
    expectError(await app.http.post('/api/contacts/search').set('Authorization', narrow).send({}), 403, 'forbidden');
    expectError(await app.http.post('/api/campaigns/2147483647/contacts/search').set('Authorization', admin).send({}), 404, 'not_found');
    // The /search path is not an id.
    expectError(await app.http.get('/api/contacts/search').set('Authorization', admin), 404, 'not_found');
  });

  it('hostile field names and values are refused or matched literally, never a 500 and never SQL', async () => {
    const hostileFields = [
      'name;drop table contacts',
      "fields.x'--",
      'fields.plan OR 1=1',
      'c.email',
      'name)--',
      '"name"',
      'fields.',
      'fields.PLAN',
      '\u202ename',
      'имя',
    ];
    for (const f of hostileFields) {
      const res = await app.http
        .post('/api/contacts/search')
        .set('Authorization', admin)
        .send({ filter: { field: f, op: 'eq', value: 'x' } });
      expect(res.status).toBe(400);
    }
    const hostileValues = ["'; DROP TABLE contacts; --", "Ada' OR '1'='1", '\\', '%', '_', '\u0301', '😀'.repeat(200), '$1', ':__flt0', '::jsonb'];
    for (const v of hostileValues) {
      expect(await filtered({ field: 'name', op: 'eq', value: v })).toEqual([]);
      await refused({ field: 'fields.plan', op: 'in', value: ['pro', v] });
      expect(await filtered({ field: 'fields.note', op: 'contains', value: v })).toEqual(v === '%' ? ['Bob'] : v === '_' ? ['Dee'] : []);
    }
    expect(await filtered('name[eq]:"a\\"b\\\\c"')).toEqual([]);
    const nul = await app.http.get('/api/contacts').query({ filter: 'name[eq]:a\u0000b' }).set('Authorization', admin);
    expectError(nul, 400, 'validation_failed');
    const ops = ['eq', 'in', 'contains', 'between', 'gt', '__proto__', 'constructor'];
    for (const op of ops) {
      const res = await app.http
        .post('/api/contacts/search')
        .set('Authorization', admin)
        .send({ filter: { field: 'createdAt', op, value: { toString: 'x' } } });
      expect(res.status).toBe(400);
    }
    for (const body of [
      { filter: [] },
      { filter: 5 },
      { filter: { and: 'x' } },
      { filter: { not: [] } },
      { filter: { field: 1, op: 'eq' } },
      { page: 'x' },
      { fields: 'name' },
    ]) {
      expect((await app.http.post('/api/contacts/search').set('Authorization', admin).send(body)).status).toBe(400);
    }
    const count = await app.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts');
    expect(count[0].n).toBe(5);
  });

  it('POST /api/segments/preview answers the count and the first contacts of a filter, with the same checks', async () => {
    const res = await app.http
      .post('/api/segments/preview')
      .set('Authorization', admin)
      .send({ filter: { field: 'fields.plan', op: 'eq', value: 'pro' } });
    expect(res.status).toBe(200);
    const body = res.body as { count: number; sample: Contact[] };
    expect(body.count).toBe(2);
    expect(body.sample.map((c) => c.name)).toEqual(['Ada', 'Émile']);
    const text = await app.http.post('/api/segments/preview').set('Authorization', admin).send({ filter: 'name[startsWith]:' });
    expect(text.status).toBe(200);
    expect((text.body as { count: number }).count).toBe(5);
    for (const filter of [undefined, null, '', 'nope[eq]:1', { field: 'name', op: 'like', value: 'a' }]) {
      expectError(await app.http.post('/api/segments/preview').set('Authorization', admin).send({ filter }), 400, 'validation_failed');
    }
    const narrow = await tokenFor(app, 'deals:read');
    expectError(await app.http.post('/api/segments/preview').set('Authorization', narrow).send({ filter: 'name[eq]:a' }), 403, 'forbidden');
  });
});
