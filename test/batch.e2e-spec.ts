/**
 * Batch writes (docs/decisions/batch-writes.md) over HTTP: per-item statuses equal to the single-record routes',
 * atomic rollback, the 413 limits, upsert by email and by a unique custom field, events per record,
 * one request against the plan limit, parallel batches on the same emails, campaign membership batches.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createCampaign, createContact, tokenFor, uniqueEmail } from './support/fixtures.js';

interface Result {
  index: number;
  status: number;
  id?: number;
  error?: { code: string; message: string; status: number; details?: { field: string; message: string; index?: number; existingId?: number }[] };
}
interface Answer {
  results: Result[];
  summary: { created: number; updated: number; deleted: number; failed: number };
}

describe('batch writes', () => {
  let app: TestApp;
  let auth: string;
  let alias: string;

  beforeAll(async () => {
    app = await startApp({ env: { DATABASE_POOL_SIZE: '20' } });
    auth = await adminToken(app);
    const f = await app.http.post('/api/fields/contact/new').set('Authorization', auth).send({ label: 'Crm Id', type: 'text', isUniqueIdentifier: true });
    expect(f.status).toBe(201);
    alias = f.body.field.alias;
  }, 120000);
  afterAll(async () => app?.stop());

  const batch = (resource: string, body: object, token = auth) => app.http.post(`/api/${resource}/batch`).set('Authorization', token).send(body);
  const ok = async (resource: string, body: object): Promise<Answer> => {
    const r = await batch(resource, body);
    if (r.status !== 200) throw new Error(`batch answered ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as Answer;
  };
  const countEmail = async (email: string) =>
    Number((await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE lower(email) = lower($1)`, [email]))[0].n);
  const eventsOf = async (type: string, since: number) =>
    app.sql<{ data: { id: number } }>(`SELECT data FROM events WHERE type = $1 AND occurred_at >= to_timestamp($2 / 1000.0) ORDER BY data->>'id'`, [
      type,
      since,
    ]);

  it('answers each item as its single-record route would: 201, 400 with details, 409 vs existing and within the batch', async () => {
    const taken = uniqueEmail('batch.test');
    const takenId = await createContact(app, auth, { name: 'Taken', email: taken });
    const fresh = uniqueEmail('batch.test');
    const items = [
      { name: 'Fresh', email: fresh },
      { name: 'No email' },
      { name: 'Dup of existing', email: taken.toUpperCase() },
      { name: 'Dup in batch', email: fresh },
      'not an object',
      { name: 'Unknown prop', email: uniqueEmail('batch.test'), color: 'red' },
    ];
    const a = await ok('contacts', { mode: 'create', items });
    expect(a.results.map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(a.results.map((r) => r.status)).toEqual([201, 400, 409, 409, 400, 400]);
    expect(a.summary).toEqual({ created: 1, updated: 0, deleted: 0, failed: 5 });
    // The single routes' answers for the same bodies, item by item.
    const single1 = await app.http.post('/api/contacts').set('Authorization', auth).send(items[1]);
    expect(a.results[1].error).toEqual(single1.body.error);
    const single2 = await app.http.post('/api/contacts').set('Authorization', auth).send(items[2]);
    expect(a.results[2].error).toEqual(single2.body.error);
    expect(a.results[2].error?.details?.[0]).toMatchObject({ field: 'email', existingId: takenId });
    expect(a.results[3].error?.code).toBe('conflict');
    expect(a.results[3].error?.details?.[0]).toMatchObject({ field: 'email', index: 0 });
    const single5 = await app.http.post('/api/contacts').set('Authorization', auth).send(items[5]);
    expect(a.results[5].error).toEqual(single5.body.error);
    expect(a.results[0].id).toBeGreaterThan(0);
    expect(await countEmail(fresh)).toBe(1);
  });

  it('create refuses an item with an id exactly as the single-record route refuses the body (contacts, deals, activities)', async () => {
    const contactId = await createContact(app, auth, { name: 'Id owner', email: uniqueEmail('batch.test') });
    const cases: [string, () => Record<string, unknown>][] = [
      ['contacts', () => ({ name: 'With id', email: uniqueEmail('batch.test') })],
      ['deals', () => ({ title: 'With id', value: 1, contact_id: contactId })],
      ['activities', () => ({ type: 'call', subject: 'With id', contact_id: contactId })],
    ];
    for (const [resource, body] of cases) {
      const withId = { ...body(), id: 1999999999 };
      const single = await app.http.post(`/api/${resource}`).set('Authorization', auth).send(withId);
      const err = expectError(single, 400, 'validation_failed');
      expect(err.details).toEqual([{ field: 'id', message: 'should not exist' }]);
      const a = await ok(resource, { mode: 'create', items: [body(), withId] });
      expect(a.results.map((r) => r.status)).toEqual([201, 400]);
      expect(a.results[1]).toEqual({ index: 1, status: 400, error: single.body.error });
      expect(a.summary).toMatchObject({ created: 1, failed: 1 });
    }
    expect(await app.sql(`SELECT id FROM contacts WHERE id = 1999999999`)).toEqual([]);
  });

  it('update and delete: 404 for a missing id, 200 otherwise; a second delete of one id in a batch is a 409', async () => {
    const id = await createContact(app, auth, { name: 'To change', email: uniqueEmail('batch.test') });
    const gone = await createContact(app, auth, { name: 'To delete', email: uniqueEmail('batch.test') });
    const up = await ok('contacts', {
      mode: 'update',
      items: [{ id, title: 'CTO' }, { id: 2000000000, title: 'x' }, { title: 'no id' }, { id: 'abc' }, { id, title: 'again' }],
    });
    expect(up.results.map((r) => r.status)).toEqual([200, 404, 400, 400, 409]);
    const single404 = await app.http.patch('/api/contacts/2000000000').set('Authorization', auth).send({ title: 'x' });
    expect(up.results[1].error).toEqual(single404.body.error);
    expect((await app.http.get(`/api/contacts/${id}`).set('Authorization', auth)).body.contact.title).toBe('CTO');

    const del = await ok('contacts', { mode: 'delete', items: [{ id: gone }, { id: 2000000001 }, { id: gone }] });
    expect(del.results.map((r) => r.status)).toEqual([200, 404, 409]);
    expect(del.summary).toEqual({ created: 0, updated: 0, deleted: 1, failed: 2 });
    expectError(await app.http.get(`/api/contacts/${gone}`).set('Authorization', auth), 404, 'not_found');
  });

  it('atomic: any failure answers 422 with the results and writes nothing', async () => {
    const e1 = uniqueEmail('batch.test');
    const r = await batch('contacts', {
      mode: 'create',
      atomic: true,
      items: [
        { name: 'A', email: e1 },
        { name: 'B', email: 'bad' },
      ],
    });
    const err = expectError(r, 422, 'batch_failed');
    expect(err.details?.[0]).toMatchObject({ field: 'items.1', index: 1 });
    const body = r.body as Answer;
    expect(body.results.map((x) => x.status)).toEqual([201, 400]);
    expect(body.results[0].id).toBeUndefined();
    expect(await countEmail(e1)).toBe(0);
    // And the same batch without the bad item commits.
    const good = await ok('contacts', { mode: 'create', atomic: true, items: [{ name: 'A', email: e1 }] });
    expect(good.summary.created).toBe(1);
    expect(await countEmail(e1)).toBe(1);
  });

  it('413 over 500 items and over the byte limit, naming the limit; 400 for a bad envelope', async () => {
    const many = Array.from({ length: 501 }, (_, i) => ({ name: `N${i}`, email: `n${i}@big.test` }));
    const r = await batch('contacts', { mode: 'create', items: many });
    const e = expectError(r, 413, 'payload_too_large');
    expect(e.message).toContain('500');
    const huge = await app.http
      .post('/api/contacts/batch')
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ mode: 'create', items: [{ name: 'x'.repeat(9 * 1024 * 1024), email: 'a@b.test' }] }));
    const e2 = expectError(huge, 413, 'payload_too_large');
    expect(e2.message).toContain(String(8 * 1024 * 1024));
    // 500 contacts with custom fields fit, over the 1 MiB single-record limit.
    const big = Array.from({ length: 500 }, (_, i) => ({
      name: `Big ${i} ${'y'.repeat(240)}`,
      company: 'c'.repeat(255),
      title: 't'.repeat(255),
      email: uniqueEmail('big.test'),
      fields: { [alias]: `big-${Date.now()}-${i}` },
    }));
    const text = JSON.stringify({ mode: 'create', items: big }, null, 2).replace(/\n/g, `\n${' '.repeat(250)}`);
    expect(Buffer.byteLength(text)).toBeGreaterThan(1024 * 1024);
    const fits = await app.http.post('/api/contacts/batch').set('Authorization', auth).set('Content-Type', 'application/json').send(text);
    expect(fits.status).toBe(200);
    expect((fits.body as Answer).summary).toEqual({ created: 500, updated: 0, deleted: 0, failed: 0 });
    expectError(await batch('contacts', { mode: 'merge', items: [] }), 400, 'validation_failed');
    expectError(await batch('contacts', { mode: 'upsert', idProperty: 'nope', items: [{}] }), 400, 'validation_failed');
    expectError(await batch('contacts', { mode: 'create', items: 'x' }), 400, 'validation_failed');
  });

  it('upsert by email: updates existing (200), creates new (201), emits one event per record', async () => {
    const since = Date.now() - 1000;
    const existing = uniqueEmail('batch.test');
    const id = await createContact(app, auth, { name: 'Old', email: existing, company: 'Keep' });
    const created = uniqueEmail('batch.test');
    const a = await ok('contacts', {
      mode: 'upsert',
      items: [
        { name: 'New', email: existing.toUpperCase() },
        { name: 'Created', email: created },
      ],
    });
    expect(a.results.map((r) => [r.status, r.id === id])).toEqual([
      [200, true],
      [201, false],
    ]);
    const after = (await app.http.get(`/api/contacts/${id}`).set('Authorization', auth)).body.contact;
    expect(after).toMatchObject({ name: 'New', company: 'Keep' });
    // The events are those of the single-record routes: the record as the API answers it, and the changed properties.
    const updated = await app.sql<{ data: object; previous: object }>(`SELECT data, previous FROM events WHERE type = 'contact.updated' AND data->>'id' = $1`, [
      String(id),
    ]);
    expect(updated).toHaveLength(1);
    expect(updated[0].data).toEqual(after);
    expect(updated[0].previous).toEqual({ name: 'Old', email: existing });
    const createdRecord = (await app.http.get(`/api/contacts/${a.results[1].id}`).set('Authorization', auth)).body.contact;
    const createdEvents = (await eventsOf('contact.created', since)).filter((e) => e.data.id === a.results[1].id);
    expect(createdEvents.map((e) => e.data)).toEqual([createdRecord]);
  });

  it('upsert by a unique custom field, and update/delete by email', async () => {
    const v = `crm-${Date.now()}`;
    const email = uniqueEmail('batch.test');
    const first = await ok('contacts', { mode: 'upsert', idProperty: alias, items: [{ name: 'By field', email, fields: { [alias]: v } }] });
    expect(first.results[0].status).toBe(201);
    const second = await ok('contacts', {
      mode: 'upsert',
      idProperty: alias,
      items: [
        { name: 'By field 2', email, fields: { [alias]: v } },
        { name: 'no key', email: uniqueEmail('batch.test') },
      ],
    });
    expect(second.results.map((r) => r.status)).toEqual([200, 400]);
    expect(second.results[0].id).toBe(first.results[0].id);
    expect(second.results[1].error?.details?.[0].field).toBe(`fields.${alias}`);
    const upd = await ok('contacts', {
      mode: 'update',
      idProperty: 'email',
      items: [
        { email, title: 'By email' },
        { email: 'nobody@batch.test', title: 'x' },
      ],
    });
    expect(upd.results.map((r) => r.status)).toEqual([200, 404]);
    const del = await ok('contacts', { mode: 'delete', idProperty: 'email', items: [{ email }] });
    expect(del.results[0]).toEqual({ index: 0, status: 200, id: first.results[0].id });
    expect(await countEmail(email)).toBe(0);
  });

  it('counts as one request against the plan limit', async () => {
    const t = await tokenFor(app, '*', { user: 'limits@example.com', plan: 'basic' });
    const r1 = await app.http.get('/api/contacts?limit=1').set('Authorization', t);
    const items = Array.from({ length: 50 }, (_, i) => ({ name: `L${i}`, email: uniqueEmail('limit.test') }));
    const r2 = await batch('contacts', { mode: 'create', items }, t);
    expect(r2.status).toBe(200);
    expect(Number(r2.headers['x-ratelimit-remaining'])).toBe(Number(r1.headers['x-ratelimit-remaining']) - 1);
  });

  it('mode delete needs the delete permission', async () => {
    const t = await tokenFor(app, 'contacts:read,contacts:write');
    const id = await createContact(app, auth, { name: 'Protected', email: uniqueEmail('batch.test') });
    expectError(await batch('contacts', { mode: 'delete', items: [{ id }] }, t), 403, 'forbidden');
    expect((await batch('contacts', { mode: 'create', items: [{ name: 'ok', email: uniqueEmail('batch.test') }] }, t)).status).toBe(200);
  });

  it('parallel batches upserting the same emails: no duplicates, no 5xx', async () => {
    const emails = Array.from({ length: 40 }, () => uniqueEmail('race.test'));
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, k) =>
        batch('contacts', { mode: 'upsert', items: (k % 2 ? [...emails].reverse() : emails).map((email) => ({ name: `Racer ${k}`, email })) }),
      ),
    );
    for (const a of answers) {
      expect(a.status).toBe(200);
      for (const r of (a.body as Answer).results) expect([200, 201]).toContain(r.status);
    }
    const created = answers.reduce((n, a) => n + (a.body as Answer).summary.created, 0);
    expect(created).toBe(40);
    const rows = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE email = ANY($1)`, [emails]);
    expect(Number(rows[0].n)).toBe(40);
  });

  it('parallel batches deleting the same ids: each id deleted once', async () => {
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => createContact(app, auth, { name: `D${i}`, email: uniqueEmail('batch.test') })));
    const answers = await Promise.all(Array.from({ length: 4 }, () => batch('contacts', { mode: 'delete', items: ids.map((id) => ({ id })) })));
    const deleted = answers.reduce((n, a) => n + (a.body as Answer).summary.deleted, 0);
    expect(deleted).toBe(10);
    for (const a of answers) for (const r of (a.body as Answer).results) expect([200, 404]).toContain(r.status);
  });

  it('deals and activities: per-item statuses, upsert by id, events per record', async () => {
    const since = Date.now() - 1000;
    const contactId = await createContact(app, auth, { name: 'Deal owner', email: uniqueEmail('batch.test') });
    const d = await ok('deals', {
      mode: 'create',
      items: [
        { title: 'D1', value: 10, contact_id: contactId },
        { title: 'D2', value: 5, contact_id: 2000000000 },
        { title: '', value: 1, contact_id: contactId },
      ],
    });
    expect(d.results.map((r) => r.status)).toEqual([201, 400, 400]);
    const single = await app.http.post('/api/deals').set('Authorization', auth).send({ title: 'D2', value: 5, contact_id: 2000000000 });
    expect(d.results[1].error).toEqual(single.body.error);
    const dealId = d.results[0].id!;
    const up = await ok('deals', {
      mode: 'upsert',
      items: [
        { id: dealId, stage: 'won-ish' },
        { id: 2000000000, title: 'New', value: 1, contact_id: contactId },
      ],
    });
    expect(up.results.map((r) => r.status)).toEqual([200, 201]);
    expect((await eventsOf('deal.created', since)).map((e) => e.data.id).sort()).toEqual([dealId, up.results[1].id].sort());
    const del = await ok('deals', { mode: 'delete', items: [{ id: dealId }, { id: dealId }] });
    expect(del.results.map((r) => r.status)).toEqual([200, 409]);

    const act = await ok('activities', {
      mode: 'create',
      items: [
        { type: 'call', subject: 'Hi', contact_id: contactId },
        { type: 'nope', subject: 'x', contact_id: contactId },
      ],
    });
    expect(act.results.map((r) => r.status)).toEqual([201, 400]);
    const actDel = await ok('activities', { mode: 'delete', items: [{ id: act.results[0].id }, { id: 2000000000 }] });
    expect(actDel.results.map((r) => r.status)).toEqual([200, 404]);
  });

  describe('campaign membership batch', () => {
    it('adds, removes, counts members and unknown ids, one event per change', async () => {
      const since = Date.now() - 1000;
      const campaign = await createCampaign(app, auth);
      const campaignId = (campaign as { id: number }).id;
      const ids = await Promise.all(Array.from({ length: 5 }, (_, i) => createContact(app, auth, { name: `M${i}`, email: uniqueEmail('members.test') })));
      const url = `/api/campaigns/${campaignId}/contacts/batch`;
      const r1 = await app.http
        .post(url)
        .set('Authorization', auth)
        .send({ add: [ids[0], ids[1], ids[2], ids[2], 2000000000] });
      expect(r1.status).toBe(200);
      expect(r1.body).toEqual({ added: 3, alreadyMember: 0, removed: 0, notMember: 0, notFound: [2000000000] });
      const r2 = await app.http
        .post(url)
        .set('Authorization', auth)
        .send({ add: [ids[0], ids[3]], remove: [ids[1], ids[4], 2000000001] });
      expect(r2.body).toEqual({ added: 1, alreadyMember: 1, removed: 1, notMember: 1, notFound: [2000000001] });
      const added = (await eventsOf('campaign.contact_added', since)) as unknown as { data: { campaignId: number; contactId: number } }[];
      expect(
        added
          .filter((e) => e.data.campaignId === campaignId)
          .map((e) => e.data.contactId)
          .sort(),
      ).toEqual([ids[0], ids[1], ids[2], ids[3]].sort());
      const removed = (await eventsOf('campaign.contact_removed', since)) as unknown as { data: { campaignId: number; contactId: number } }[];
      expect(removed.filter((e) => e.data.campaignId === campaignId).map((e) => e.data.contactId)).toEqual([ids[1]]);
      expectError(
        await app.http
          .post(`/api/campaigns/2000000000/contacts/batch`)
          .set('Authorization', auth)
          .send({ add: [ids[0]] }),
        404,
        'not_found',
      );
      expectError(
        await app.http
          .post(url)
          .set('Authorization', auth)
          .send({ add: [ids[0]], remove: [ids[0]] }),
        400,
        'validation_failed',
      );
      expectError(
        await app.http
          .post(url)
          .set('Authorization', auth)
          .send({ add: ['x'] }),
        400,
        'validation_failed',
      );
      const tooMany = Array.from({ length: 10001 }, (_, i) => i + 1);
      expectError(await app.http.post(url).set('Authorization', auth).send({ add: tooMany }), 413, 'payload_too_large');
    });

    it('parallel batches adding the same contacts: each membership added once', async () => {
      const campaignId = ((await createCampaign(app, auth)) as { id: number }).id;
      const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => createContact(app, auth, { name: `P${i}`, email: uniqueEmail('members.test') })));
      const url = `/api/campaigns/${campaignId}/contacts/batch`;
      const answers = await Promise.all(Array.from({ length: 5 }, () => app.http.post(url).set('Authorization', auth).send({ add: ids })));
      for (const a of answers) expect(a.status).toBe(200);
      expect(answers.reduce((n, a) => n + (a.body as { added: number }).added, 0)).toBe(20);
      expect(answers.reduce((n, a) => n + (a.body as { alreadyMember: number }).alreadyMember, 0)).toBe(80);
    });
  });
});
