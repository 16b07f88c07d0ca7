/**
 * Keyset cursors, sparse fields and count=false (docs/decisions/lists-and-cursors.md): a walk of a list that changes
 * while it is walked returns every record present throughout exactly once, for orders with NULLs
 * and in both directions; cursors are tied to their walk; `fields=` cuts records.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createCampaign, createContact, createRecord, uniqueEmail } from './support/fixtures.js';

type Page = { total: number; next?: string | null; contacts: { id: number; name: string; title: string | null }[] };

describe('keyset cursors, sparse fields and count=false', () => {
  let app: TestApp;
  let admin: string;
  const initial: number[] = [];

  beforeAll(async () => {
    app = await startApp({ role: 'api' });
    admin = await adminToken(app);
    // Duplicate names and titles (ties broken by id) and NULL titles.
    for (let i = 0; i < 45; i++) {
      initial.push(
        await createContact(app, admin, {
          name: `Person ${String(i % 9).padStart(2, '0')}`,
          title: i % 4 === 0 ? null : `Title ${i % 5}`,
          email: uniqueEmail('cursors.test'),
        }),
      );
    }
  }, 180_000);
  afterAll(() => app?.stop());

  async function page(query: Record<string, string | number>): Promise<Page> {
    const res = await app.http.get('/api/contacts').query(query).set('Authorization', admin);
    if (res.status !== 200) throw new Error(`${JSON.stringify(query)} → ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as Page;
  }

  const walks: [string, 'asc' | 'desc'][] = [
    ['id', 'asc'],
    ['id', 'desc'],
    ['name', 'asc'],
    ['name', 'desc'],
    ['title', 'asc'],
    ['title', 'desc'],
    ['createdAt', 'desc'],
  ];

  it.each(walks)(
    'a walk ordered by %s %s over a changing list sees every record present throughout exactly once',
    async (orderBy, dir) => {
      const present = new Set(initial);
      const deletedDuringWalk = new Set<number>();
      // Contacts made by this walk's changes, removed again at the end so walks stay independent.
      const made: number[] = [];
      // A contact that exists before the walk and is deleted in the middle of it.
      const doomed = await createContact(app, admin, { name: 'Person 04', title: 'Title 2', email: uniqueEmail('cursors.test') });
      made.push(doomed);
      const seen: number[] = [];
      let after = '';
      let pages = 0;
      for (;;) {
        const body = await page({ orderBy, orderByDir: dir, limit: 4, after });
        expect(body.next === null || typeof body.next === 'string').toBe(true);
        seen.push(...body.contacts.map((c) => c.id));
        pages++;
        // Change the list between pages: a new row, a deleted row, an update of a non-sort column.
        made.push(await createContact(app, admin, { name: `Person 0${pages % 9}`, title: pages % 2 ? null : 'Title 1', email: uniqueEmail('cursors.test') }));
        if (pages === 3) {
          expect((await app.http.delete(`/api/contacts/${doomed}`).set('Authorization', admin)).status).toBe(200);
          deletedDuringWalk.add(doomed);
        }
        const target = initial[(pages * 7) % initial.length];
        expect(
          (
            await app.http
              .patch(`/api/contacts/${target}`)
              .set('Authorization', admin)
              .send({ phone: `+1555000${String(pages).padStart(4, '0')}` })
          ).status,
        ).toBe(200);
        if (!body.next) break;
        after = body.next;
        expect(pages).toBeLessThan(100);
      }
      const counts = new Map<number, number>();
      for (const id of seen) counts.set(id, (counts.get(id) ?? 0) + 1);
      expect([...counts.entries()].filter(([, n]) => n > 1)).toEqual([]);
      for (const id of present) expect(counts.get(id)).toBe(1);
      for (const id of made) if (!deletedDuringWalk.has(id)) await app.http.delete(`/api/contacts/${id}`).set('Authorization', admin);
    },
    120_000,
  );

  it('walks in the same order as page/limit, and the first cursor page equals page 1', async () => {
    for (const [orderBy, dir] of walks) {
      const all = await page({ orderBy, orderByDir: dir, limit: 200 });
      const ids: number[] = [];
      let after = '';
      for (;;) {
        const body = await page({ orderBy, orderByDir: dir, limit: 10, after });
        ids.push(...body.contacts.map((c) => c.id));
        if (!body.next) break;
        after = body.next;
      }
      expect(ids).toEqual(all.contacts.map((c) => c.id));
      const first = await page({ orderBy, orderByDir: dir, limit: 10, after: '' });
      const paged = await page({ orderBy, orderByDir: dir, limit: 10 });
      expect(first.contacts).toEqual(paged.contacts);
      expect(first.total).toBe(paged.total);
    }
  });

  it('a cursor is tied to its order, filter and search; malformed cursors and after with page > 1 are 400s', async () => {
    const first = await page({ orderBy: 'name', limit: 3, after: '' });
    expect(typeof first.next).toBe('string');
    const next = first.next as string;
    expect((await page({ orderBy: 'name', limit: 3, after: next })).contacts).toHaveLength(3);
    const bad = async (query: Record<string, string | number>, pattern: RegExp) => {
      const res = await app.http.get('/api/contacts').query(query).set('Authorization', admin);
      expectError(res, 400, 'validation_failed');
      expect((res.body as { error: { message: string } }).error.message).toMatch(pattern);
    };
    await bad({ orderBy: 'title', after: next }, /another orderBy/);
    await bad({ orderBy: 'name', orderByDir: 'desc', after: next }, /another orderBy/);
    await bad({ orderBy: 'name', filter: 'name[contains]:p', after: next }, /another orderBy/);
    await bad({ orderBy: 'name', search: 'person', after: next }, /another orderBy/);
    await bad({ orderBy: 'name', after: next, page: 2 }, /page > 1/);
    for (const garbage of [
      'x',
      'not a cursor!',
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from('["x",null,-1]').toString('base64url'),
      'A'.repeat(5000),
    ]) {
      await bad({ after: garbage }, /not a cursor of this list/);
    }
    // The same walk through POST /search, with the filter in JSON.
    const viaPost = await app.http.post('/api/contacts/search').set('Authorization', admin).send({ orderBy: 'name', limit: 3, after: '' });
    expect(viaPost.status).toBe(200);
    expect((viaPost.body as Page).next).toBe(next);
  });

  it("a cursor is tied to its list: another list's cursor (same order, no filter) is a 400 naming both lists", async () => {
    const contacts = await page({ limit: 2, after: '' });
    const next = contacts.next as string;
    expect(typeof next).toBe('string');
    const campaignId = (await createCampaign(app, admin, { name: 'Cursor scope' })).id;
    const companyId = (await createRecord(app, admin, '/api/companies/new', 'company', { name: 'Cursor scope Inc' })).id;
    for (const path of [
      '/api/deals',
      '/api/account/tokens',
      '/api/companies',
      '/api/webhooks',
      `/api/campaigns/${campaignId}/contacts`,
      `/api/companies/${companyId}/contacts`,
    ]) {
      const res = await app.http.get(path).query({ limit: 2, after: next }).set('Authorization', admin);
      const err = expectError(res, 400, 'validation_failed');
      expect(err.message).toMatch(/after is a cursor of the contacts list, not of the .+ list/);
      expect(err.details).toEqual([{ field: 'after', message: expect.stringMatching(/^is a cursor of the contacts list/) }]);
      // The list's own walk still starts with an empty after=.
      expect((await app.http.get(path).query({ limit: 2, after: '' }).set('Authorization', admin)).status).toBe(200);
    }
    // One campaign's cursor does not continue another campaign's list either.
    const otherId = (await createCampaign(app, admin, { name: 'Cursor scope 2' })).id;
    const members = initial.slice(0, 3);
    for (const id of [campaignId, otherId]) {
      const added = await app.http.post(`/api/campaigns/${id}/contacts/batch`).set('Authorization', admin).send({ add: members });
      expect(added.status).toBe(200);
    }
    const first = await app.http.get(`/api/campaigns/${campaignId}/contacts`).query({ limit: 1, after: '' }).set('Authorization', admin);
    expect(typeof first.body.next).toBe('string');
    const crossed = await app.http
      .get(`/api/campaigns/${otherId}/contacts`)
      .query({ limit: 1, after: first.body.next as string })
      .set('Authorization', admin);
    expectError(crossed, 400, 'validation_failed');
    // And the same list through its POST /search twin continues the walk.
    const twin = await app.http.post('/api/contacts/search').set('Authorization', admin).send({ limit: 2, after: next });
    expect(twin.status).toBe(200);
  });

  it('count=false answers total -1 and next; plain lists keep their envelope', async () => {
    const res = await page({ count: 'false', limit: 5 });
    expect(res.total).toBe(-1);
    expect(res.contacts).toHaveLength(5);
    expect(typeof res.next).toBe('string');
    const plain = await page({ limit: 5 });
    expect(Object.keys(plain).sort()).toEqual(['contacts', 'total']);
    expect(plain.total).toBeGreaterThanOrEqual(45);
    // With page: the same records as the counted page.
    const third = await page({ count: 'false', limit: 5, page: 3, orderBy: 'name' });
    expect(third.contacts).toEqual((await page({ limit: 5, page: 3, orderBy: 'name' })).contacts);
    const fourth = await page({ orderBy: 'name', limit: 5, after: third.next as string });
    expect(fourth.contacts).toEqual((await page({ limit: 5, page: 4, orderBy: 'name' })).contacts);
    const last = await page({ count: 'false', limit: 200 });
    expect(last.next).toBeNull();
    expectError(await app.http.get('/api/contacts').query({ count: 'maybe' }).set('Authorization', admin), 400, 'validation_failed');
    // Every list takes after and count.
    for (const path of [
      '/api/campaigns',
      '/api/deals',
      '/api/activities',
      '/api/categories',
      '/api/point-groups',
      '/api/reports',
      '/api/text-messages',
      '/api/assets',
      '/api/notifications',
      '/api/fields',
      '/api/fields/contact',
      '/api/webhooks',
    ]) {
      const r = await app.http.get(path).query({ after: '', count: 'false', fields: 'id' }).set('Authorization', admin);
      expect([path, r.status]).toEqual([path, 200]);
      expect((r.body as { next: unknown }).next).toBeNull();
    }
  });

  it('fields= answers only the chosen properties plus id; fields.<alias> one custom value; unknown names are 400s', async () => {
    const f = await app.http.post('/api/fields/contact/new').set('Authorization', admin).send({ label: 'Plan', alias: 'plan', type: 'text' });
    expect(f.status).toBe(201);
    await createContact(app, admin, { name: 'Sparse', fields: { plan: 'pro' } });
    const res = await page({ fields: 'name,title', limit: 3 });
    for (const c of res.contacts) expect(Object.keys(c).sort()).toEqual(['id', 'name', 'title']);
    const custom = await page({ fields: 'name,fields.plan', filter: 'name[eq]:Sparse' });
    expect(custom.contacts).toEqual([{ id: expect.any(Number), name: 'Sparse', fields: { plan: 'pro' } }]);
    const whole = await page({ fields: 'fields', filter: 'name[eq]:Sparse' });
    expect(whole.contacts[0]).toEqual({ id: expect.any(Number), fields: { plan: 'pro' } });
    const unknown = await app.http.get('/api/contacts').query({ fields: 'name,shoeSize' }).set('Authorization', admin);
    expectError(unknown, 400, 'validation_failed');
    expect((unknown.body as { error: { message: string } }).error.message).toMatch(/"shoeSize" is not a property of this list; allowed: id, name, email/);
    expectError(await app.http.get('/api/contacts').query({ fields: 'fields.nope' }).set('Authorization', admin), 400, 'validation_failed');
    const viaPost = await app.http
      .post('/api/contacts/search')
      .set('Authorization', admin)
      .send({ fields: ['email'], limit: 2 });
    expect(viaPost.status).toBe(200);
    for (const c of (viaPost.body as { contacts: object[] }).contacts) expect(Object.keys(c).sort()).toEqual(['email', 'id']);
    const deals = await app.http.get('/api/deals').query({ fields: 'title,value' }).set('Authorization', admin);
    expect(deals.status).toBe(200);
    expectError(await app.http.get('/api/deals').query({ fields: 'fields.plan' }).set('Authorization', admin), 400, 'validation_failed');
  });

  it('walks other lists by numeric, date, boolean and enum keys', async () => {
    const contact = initial[0];
    for (let i = 0; i < 9; i++) {
      const r = await app.http
        .post('/api/deals/new')
        .set('Authorization', admin)
        .send({ title: `Deal ${i}`, value: (i % 3) * 10.5, contact_id: contact, ...(i % 2 ? { expected_close_date: `2026-0${1 + (i % 4)}-15` } : {}) });
      expect(r.status).toBe(201);
      const g = await app.http
        .post('/api/point-groups/new')
        .set('Authorization', admin)
        .send({ name: `Group ${i}`, isPublished: i % 2 === 0, minimumPoints: 0, maximumPoints: 10 });
      expect(g.status).toBe(201);
    }
    const walk = async (path: string, key: string, orderBy: string, dir: string) => {
      const ids: number[] = [];
      let after = '';
      for (let n = 0; n < 50; n++) {
        const res = await app.http.get(path).query({ orderBy, orderByDir: dir, limit: 2, after }).set('Authorization', admin);
        expect(res.status).toBe(200);
        const body = res.body as Record<string, { id: number }[]> & { next: string | null };
        ids.push(...body[key].map((r) => r.id));
        if (!body.next) break;
        after = body.next;
      }
      const all = await app.http.get(path).query({ orderBy, orderByDir: dir, limit: 200 }).set('Authorization', admin);
      expect(ids).toEqual((all.body as Record<string, { id: number }[]>)[key].map((r) => r.id));
    };
    for (const dir of ['asc', 'desc']) {
      await walk('/api/deals', 'deals', 'value', dir);
      await walk('/api/deals', 'deals', 'expected_close_date', dir);
      await walk('/api/deals', 'deals', 'status', dir);
      await walk('/api/point-groups', 'pointGroups', 'isPublished', dir);
    }
  });
});
