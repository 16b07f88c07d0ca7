import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitUntil } from './support/wait.js';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createContact, tokenFor, uniqueEmail } from './support/fixtures.js';

interface Event {
  id: string;
  type: string;
  occurredAt: string;
  sequence: number;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

describe('events: outbox, feed and incremental sync', () => {
  let app: TestApp;
  let auth: string;
  let adminId: number;

  beforeAll(async () => {
    app = await startApp({ env: { DATABASE_POOL_SIZE: '20' } });
    auth = await adminToken(app);
    adminId = (await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'admin@example.com'`))[0].id;
  }, 120000);
  afterAll(async () => app?.stop());

  const feed = (query = '', token = auth) => app.http.get(`/api/events${query}`).set('Authorization', token);

  /** The cursor at the end of the feed now. */
  async function head(): Promise<string> {
    let cursor: string | null = null;
    for (;;) {
      const res = await feed(`?limit=500${cursor === null ? '' : `&after=${cursor}`}`);
      expect(res.status).toBe(200);
      if (!res.body.events.length) return res.body.next;
      cursor = res.body.next;
    }
  }

  /** Every event after the cursor (all pages). */
  async function readFrom(cursor: string, types?: string): Promise<Event[]> {
    const out: Event[] = [];
    for (;;) {
      const res = await feed(`?after=${cursor}&limit=500${types ? `&types=${types}` : ''}`);
      expect(res.status).toBe(200);
      if (!res.body.events.length) return out;
      out.push(...res.body.events);
      cursor = res.body.next;
    }
  }

  /** Waits until the feed after `cursor` holds an event matching `match` (events written by the worker). */
  async function waitForEvent(cursor: string, match: (e: Event) => boolean, what: string): Promise<Event> {
    return waitUntil(`event ${what}`, async () => (await readFrom(cursor)).find(match), 20000);
  }

  it('contacts: created, updated with previous, owner_changed, deleted; data is the record the API answers', async () => {
    const start = await head();
    const created = await app.http.post('/api/contacts').set('Authorization', auth).send({ name: 'Ada', email: uniqueEmail(), company: 'Engines' });
    expect(created.status).toBe(201);
    const contact = created.body.contact;
    const patched = await app.http.patch(`/api/contacts/${contact.id}`).set('Authorization', auth).send({ company: 'Analytical', ownerId: adminId });
    expect(patched.status).toBe(200);
    const deleted = await app.http.delete(`/api/contacts/${contact.id}`).set('Authorization', auth);
    expect(deleted.status).toBe(200);

    const events = (await readFrom(start)).filter((e) => e.data.id === contact.id);
    expect(events.map((e) => e.type)).toEqual(['contact.created', 'contact.updated', 'contact.owner_changed', 'contact.deleted']);
    expect(events[0].data).toEqual(contact);
    expect(events[0].previous).toBeNull();
    expect(events[1].data).toEqual(patched.body.contact);
    expect(events[1].previous).toEqual({ company: 'Engines', ownerId: null, owner: null });
    expect(events[2].previous).toEqual({ ownerId: null, owner: null });
    expect(events[3].data).toEqual(deleted.body.contact);
    for (const e of events) {
      expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(e.occurredAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    }
    for (let i = 1; i < events.length; i++) expect(events[i].sequence).toBeGreaterThan(events[i - 1].sequence);
  });

  it('a rolled-back change writes no event (409 on a taken alias, 400 on a missing reference)', async () => {
    await app.http.post('/api/categories').set('Authorization', auth).send({ title: 'Taken', alias: 'taken-alias', bundle: 'global' });
    const start = await head();
    expectError(
      await app.http.post('/api/categories').set('Authorization', auth).send({ title: 'Again', alias: 'taken-alias', bundle: 'global' }),
      409,
      'conflict',
    );
    expectError(await app.http.post('/api/deals').set('Authorization', auth).send({ title: 'D', value: 1, contact_id: 2147483000 }), 400, 'validation_failed');
    expect(await readFrom(start)).toEqual([]);
  });

  it('campaigns, memberships, deals (stage, won), activities, categories, point groups, fields: one event per change', async () => {
    const start = await head();
    const contactId = await createContact(app, auth);
    const post = async (path: string, body: object, key: string) => {
      const res = await app.http.post(path).set('Authorization', auth).send(body);
      expect(res.status).toBe(201);
      return res.body[key];
    };
    const campaign = await post('/api/campaigns', { name: 'Spring' }, 'campaign');
    const campaignPatched = (await app.http.patch(`/api/campaigns/${campaign.id}`).set('Authorization', auth).send({ name: 'Summer' })).body.campaign;
    expect((await app.http.post(`/api/campaigns/${campaign.id}/contact/${contactId}/add`).set('Authorization', auth)).status).toBe(200);
    // Adding again changes nothing: no second event.
    expect((await app.http.post(`/api/campaigns/${campaign.id}/contact/${contactId}/add`).set('Authorization', auth)).status).toBe(200);
    expect((await app.http.post(`/api/campaigns/${campaign.id}/contact/${contactId}/remove`).set('Authorization', auth)).status).toBe(200);
    const deal = await post('/api/deals', { title: 'Big', value: 1000, contact_id: contactId, stage: 'lead' }, 'deal');
    const dealWon = (await app.http.patch(`/api/deals/${deal.id}`).set('Authorization', auth).send({ stage: 'closing', status: 'won' })).body.deal;
    const activity = await post('/api/activities', { type: 'call', subject: 'Hello', contact_id: contactId }, 'activity');
    await app.http.delete(`/api/activities/${activity.id}`).set('Authorization', auth);
    const category = await post('/api/categories', { title: 'Cat', bundle: 'global' }, 'category');
    await app.http.patch(`/api/categories/${category.id}`).set('Authorization', auth).send({ color: '#112233' });
    const group = await post('/api/point-groups/new', { name: 'Gold', minimumPoints: 0, maximumPoints: 10 }, 'pointGroup');
    await app.http.delete(`/api/point-groups/${group.id}`).set('Authorization', auth);
    const field = await post('/api/fields/contact/new', { label: 'Shoe size', type: 'number' }, 'field');
    await app.http.patch(`/api/fields/contact/${field.id}/edit`).set('Authorization', auth).send({ label: 'Shoe' });
    await app.http.delete(`/api/campaigns/${campaign.id}`).set('Authorization', auth);

    const events = await readFrom(start);
    expect(events.map((e) => e.type)).toEqual([
      'contact.created',
      'campaign.created',
      'campaign.updated',
      'campaign.contact_added',
      'campaign.contact_removed',
      'deal.created',
      'deal.updated',
      'deal.stage_changed',
      'deal.won',
      'activity.created',
      'activity.deleted',
      'category.created',
      'category.updated',
      'point_group.created',
      'point_group.deleted',
      'field.created',
      'field.updated',
      'campaign.deleted',
    ]);
    const byType = new Map(events.map((e) => [e.type, e]));
    expect(byType.get('campaign.created')!.data).toEqual(campaign);
    expect(byType.get('campaign.updated')).toMatchObject({ data: campaignPatched, previous: { name: 'Spring' } });
    expect(byType.get('campaign.contact_added')!.data).toMatchObject({ campaignId: campaign.id, contactId });
    expect(byType.get('deal.updated')).toMatchObject({ data: dealWon, previous: { stage: 'lead', status: 'open' } });
    expect(byType.get('deal.stage_changed')!.previous).toEqual({ stage: 'lead', stage_id: deal.stage_id, pipeline_id: deal.pipeline_id });
    expect(byType.get('deal.won')!.previous).toEqual({ status: 'open' });
    expect(byType.get('activity.created')!.data).toEqual(activity);
    expect(byType.get('category.updated')!.previous).toEqual({ color: null });
    expect(byType.get('field.created')!.data).toEqual(field);
    expect(byType.get('field.updated')!.previous).toEqual({ label: 'Shoe size' });
  });

  it('text messages (worker): created, queued, sent, delivered; assets; report.completed', async () => {
    const start = await head();
    const t = (await app.http.post('/api/text-messages').set('Authorization', auth).send({ content: 'Hi', recipient: '+14155550123' })).body.textMessage;
    expect((await app.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth)).status).toBe(202);
    await waitForEvent(start, (e) => e.type === 'text_message.delivered' && e.data.id === t.id, 'text_message.delivered');
    const sms = (await readFrom(start)).filter((e) => e.type.startsWith('text_message.') && e.data.id === t.id);
    expect(sms.map((e) => e.type)).toEqual(['text_message.created', 'text_message.queued', 'text_message.sent', 'text_message.delivered']);
    expect(sms[1].previous).toEqual({ status: 'draft' });
    expect(sms[2].previous).toEqual({ status: 'queued' });
    expect(sms[3].previous).toEqual({ status: 'sent' });
    expect(sms[3].data).toEqual((await app.http.get(`/api/text-messages/${t.id}`).set('Authorization', auth)).body.textMessage);

    const asset = await app.http
      .post('/api/assets')
      .set('Authorization', auth)
      .field('title', 'Price list')
      .attach('file', Buffer.from('prices'), 'prices.txt');
    expect(asset.status).toBe(201);
    const edited = await app.http.patch(`/api/assets/${asset.body.asset.id}`).set('Authorization', auth).send({ title: 'Prices' });
    expect(edited.status).toBe(200);
    const assetEvents = (await readFrom(start)).filter((e) => e.type.startsWith('asset.'));
    expect(assetEvents.map((e) => e.type)).toEqual(['asset.created', 'asset.updated']);
    expect(assetEvents[0].data).toEqual(asset.body.asset);
    expect(assetEvents[1]).toMatchObject({ data: edited.body.asset, previous: { title: 'Price list' } });

    const report = (
      await app.http
        .post('/api/reports')
        .set('Authorization', auth)
        .send({ name: 'Sales', type: 'sales', filters: { dateRange: 'last_30_days' } })
    ).body.report;
    expect((await app.http.post(`/api/reports/${report.id}/run`).set('Authorization', auth)).status).toBe(200);
    const completed = await waitForEvent(start, (e) => e.type === 'report.completed' && e.data.id === report.id, 'report.completed');
    expect(completed.data).toMatchObject({ id: report.id, name: 'Sales', lastRun: expect.any(String), result: { id: expect.any(Number), trigger: 'manual' } });
  });

  it('the feed: paging with next, types filter, bad input, permission', async () => {
    const start = await head();
    for (let i = 0; i < 5; i++) await createContact(app, auth);
    const page1 = await feed(`?after=${start}&limit=2`);
    expect(page1.body.events).toHaveLength(2);
    const page2 = await feed(`?after=${page1.body.next}&limit=2`);
    const page3 = await feed(`?after=${page2.body.next}&limit=2`);
    const all = [...page1.body.events, ...page2.body.events, ...page3.body.events];
    expect(all.map((e: Event) => e.type)).toEqual(Array(5).fill('contact.created'));
    expect(new Set(all.map((e: Event) => e.sequence)).size).toBe(5);
    const empty = await feed(`?after=${page3.body.next}`);
    expect(empty.body).toEqual({ events: [], next: page3.body.next });
    expect((await feed(`?after=${start}&types=contact.deleted,deal.won`)).body.events).toEqual([]);

    expectError(await feed('?after=abc'), 400, 'validation_failed');
    expectError(await feed('?after=-1'), 400, 'validation_failed');
    const badType = expectError(await feed('?types=contact.created,contact.exploded'), 400, 'validation_failed');
    expect(badType.message).toContain('contact.exploded');
    expect(badType.message).toContain('deal.won');
    expectError(await feed('?limit=0'), 400, 'validation_failed');
    expectError(await feed('?limit=501'), 400, 'validation_failed');
    expectError(await feed('?cursor=1'), 400, 'validation_failed');
    const noPermission = await tokenFor(app, 'contacts:read', { user: 'reader@example.com', plan: 'enterprise' });
    expectError(await feed('', noPermission), 403, 'forbidden');
    const reader = await tokenFor(app, 'events:read', { user: 'events@example.com', plan: 'enterprise' });
    expect((await feed('?limit=1', reader)).status).toBe(200);
  });

  it('the feed answers only the events of resources the token may read (an event carries its record); naming another type is a 403', async () => {
    const start = await head();
    const email = uniqueEmail('feed.perm');
    const contactId = await createContact(app, auth, { email });
    const deal = await app.http.post('/api/deals').set('Authorization', auth).send({ title: 'Feed deal', value: 1, contact_id: contactId });
    expect(deal.status).toBe(201);
    const everything = await readFrom(start);
    expect(everything.map((e) => e.type)).toEqual(expect.arrayContaining(['contact.created', 'deal.created']));

    const eventsOnly = await tokenFor(app, 'events:read', { user: 'events@example.com', plan: 'enterprise' });
    const seen = (await feed(`?after=${start}&limit=500`, eventsOnly)).body as { events: Event[]; next: string };
    expect(seen.events).toEqual([]);
    expect(JSON.stringify(seen)).not.toContain(email);
    expect(expectError(await feed(`?after=${start}&types=contact.created`, eventsOnly), 403, 'forbidden').message).toContain('contacts:read');

    const contactsReader = await tokenFor(app, 'events:read,contacts:read', { user: 'events@example.com', plan: 'enterprise' });
    const contactsSeen = (await feed(`?after=${start}&limit=500`, contactsReader)).body as { events: Event[] };
    expect(contactsSeen.events.map((e) => e.type)).toEqual(['contact.created']);
    expect(contactsSeen.events[0].data.id).toBe(contactId);
    expect((await feed(`?after=${start}&types=contact.created`, contactsReader)).status).toBe(200);
    expectError(await feed(`?after=${start}&types=contact.created,deal.created`, contactsReader), 403, 'forbidden');
  });

  it('a cursor older than the retention is 410 gone with the oldest available cursor', async () => {
    const start = await head();
    await createContact(app, auth);
    const last = await head();
    // What the events.prune job does after EVENT_RETENTION_DAYS: events up to `last` are gone.
    await app.sql(`DELETE FROM events e USING event_transactions t WHERE t.tx = e.tx AND t.last_sequence <= $1`, [Number(last)]);
    await app.sql(`UPDATE event_feed_state SET pruned_through = $1`, [Number(last)]);
    const gone = expectError(await feed(`?after=${start}`), 410, 'gone');
    expect(gone.details?.[0]).toMatchObject({ field: 'after', oldestCursor: last });
    expect((await feed(`?after=${last}`)).status).toBe(200);
    // Without a cursor the feed starts at the oldest kept event.
    expect((await feed('')).status).toBe(200);
  });

  it('modifiedSince on contacts and deals: records created or changed at or after the time', async () => {
    const a = await createContact(app, auth);
    const b = await createContact(app, auth);
    const deal = (await app.http.post('/api/deals').set('Authorization', auth).send({ title: 'Sync', value: 5, contact_id: a })).body.deal;
    await new Promise((r) => setTimeout(r, 1100)); // timestamps have second precision on the wire
    const since = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 50));
    await app.http.patch(`/api/contacts/${b}`).set('Authorization', auth).send({ company: 'Changed' });
    const c = await createContact(app, auth);
    const contacts = await app.http.get(`/api/contacts?modifiedSince=${encodeURIComponent(since)}&limit=200`).set('Authorization', auth);
    expect(contacts.status).toBe(200);
    expect(contacts.body.contacts.map((x: { id: number }) => x.id).sort()).toEqual([b, c].sort());
    expect(contacts.body.total).toBe(2);
    const deals = await app.http.get(`/api/deals?modifiedSince=${encodeURIComponent(since)}`).set('Authorization', auth);
    expect(deals.body.deals).toEqual([]);
    await app.http.patch(`/api/deals/${deal.id}`).set('Authorization', auth).send({ value: 6 });
    const changed = await app.http.get(`/api/deals?modifiedSince=${encodeURIComponent(since)}`).set('Authorization', auth);
    expect(changed.body.deals.map((d: { id: number }) => d.id)).toEqual([deal.id]);
    expectError(await app.http.get('/api/contacts?modifiedSince=yesterday').set('Authorization', auth), 400, 'validation_failed');
  });

  it("modifiedSince on a campaign's contacts counts joining the campaign as a change", async () => {
    const old = await createContact(app, auth);
    const campaign = (await app.http.post('/api/campaigns').set('Authorization', auth).send({ name: 'Sync' })).body.campaign;
    await new Promise((r) => setTimeout(r, 1100));
    const since = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 50));
    expect((await app.http.post(`/api/campaigns/${campaign.id}/contact/${old}/add`).set('Authorization', auth)).status).toBe(200);
    const members = await app.http.get(`/api/campaigns/${campaign.id}/contacts?modifiedSince=${encodeURIComponent(since)}`).set('Authorization', auth);
    expect(members.status).toBe(200);
    expect(members.body.contacts.map((x: { id: number }) => x.id)).toEqual([old]);
    // The contact itself did not change.
    const contacts = await app.http.get(`/api/contacts?modifiedSince=${encodeURIComponent(since)}`).set('Authorization', auth);
    expect(contacts.body.contacts.map((x: { id: number }) => x.id)).not.toContain(old);
  });

  it('1,000 concurrent updates: exactly 1,000 contact.updated events, strictly increasing, none lost or duplicated', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, () => createContact(app, auth)));
    const start = await head();
    const results: number[] = [];
    let next = 0;
    const worker = async () => {
      while (next < 1000) {
        const i = next++;
        const res = await app.http
          .patch(`/api/contacts/${ids[i % ids.length]}`)
          .set('Authorization', auth)
          .send({ title: `Title ${i}` });
        results.push(res.status);
      }
    };
    await Promise.all(Array.from({ length: 25 }, worker));
    expect(results.filter((s) => s === 200)).toHaveLength(1000);
    const events = await readFrom(start, 'contact.updated');
    expect(events).toHaveLength(1000);
    expect(new Set(events.map((e) => e.id)).size).toBe(1000);
    expect(new Set(events.map((e) => e.data.title)).size).toBe(1000);
    for (let i = 1; i < events.length; i++) expect(events[i].sequence).toBeGreaterThan(events[i - 1].sequence);
  }, 120000);
});
