/**
 * Tracked events end to end: Segment's own Node library (@segment/analytics-node, pinned as a dev
 * dependency) sends track and identify calls through its batching to the intake with the token as
 * its write key; the calls appear in the contact's timeline; a retried batch (the library's own
 * request sent again) stores nothing twice. Then, over plain HTTP: the credentials, the limits and
 * bad input, identity (anonymous events attributed, identify by email, an invalid trait reported,
 * parallel identifies), the definitions and the events list, and a behavioural window segment that
 * gains a contact on a new event and loses it as time passes (the server's clock is moved, not slept).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Analytics } from '@segment/analytics-node';
import { expectError, startApp, type TestApp } from './support/app.js';
import { testClock, type TestClock } from './support/clock.js';
import { adminToken, createContact, tokenFor, uniqueEmail } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const DAY = 86_400_000;

interface TimelineItem {
  at: string;
  kind: string;
  type: string;
  summary: string;
  data: Record<string, unknown>;
}

describe('tracked events', () => {
  let app: TestApp;
  let auth: string;
  let secret: string;
  let clock: TestClock;
  let seq = 0;
  const uid = (p = 'user') => `${p}-${++seq}-${Date.now()}`;
  const basic = (user: string, password = '') => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  beforeAll(async () => {
    clock = testClock();
    app = await startApp({ env: { ...clock.env, SEGMENT_REFRESH_INTERVAL_MS: '200', WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true' } });
    auth = await adminToken(app);
    secret = auth.slice('Bearer '.length);
  });
  afterAll(async () => app?.stop());

  const send = (path: 'track' | 'identify' | 'batch', body: unknown, authorization = basic(secret)) =>
    app.http
      .post(`/api/ingest/v1/${path}`)
      .set('Authorization', authorization)
      .send(body as object);
  const contactByExternalId = async (userId: string): Promise<{ id: number; [k: string]: unknown } | undefined> => {
    const r = await app.http
      .get('/api/contacts')
      .query({ filter: `externalId[eq]:${userId}` })
      .set('Authorization', auth);
    return (r.body as { contacts: { id: number }[] }).contacts[0];
  };
  const timeline = async (id: number, query: Record<string, string> = {}) => {
    const r = await app.http.get(`/api/contacts/${id}/timeline`).query(query).set('Authorization', auth);
    expect(r.status).toBe(200);
    return r.body as { items: TimelineItem[]; next: string | null };
  };
  const trackedCount = async (filter: string) => {
    const r = await app.http.get('/api/tracking/events').query({ filter }).set('Authorization', auth);
    expect(r.status).toBe(200);
    return (r.body as { total: number }).total;
  };

  it('@segment/analytics-node sends through its batching; the calls appear in the timeline; its retried batch stores nothing twice', async () => {
    const userId = uid();
    const analytics = new Analytics({ writeKey: secret, host: app.url, path: '/api/ingest/v1/batch', flushAt: 3, flushInterval: 200, maxRetries: 0 });
    const bodies: string[] = [];
    analytics.on('http_request', (r) => bodies.push(r.body));
    analytics.identify({ userId, traits: { email: `${userId}@segment.test`, name: 'Seg Ment', plan: 'pro' } });
    analytics.track({ userId, event: 'Pricing Viewed', properties: { plan: 'pro', seats: 3, nested: { a: [1, 2] } } });
    analytics.track({ userId, event: 'Trial Started', properties: { days: 14 }, timestamp: new Date(clock.now().getTime() - 3600_000) });
    await analytics.closeAndFlush({ timeout: 20_000 });
    expect(bodies.length).toBeGreaterThanOrEqual(1);
    const contact = await contactByExternalId(userId);
    expect(contact).toMatchObject({ name: 'Seg Ment', email: `${userId}@segment.test`, externalId: userId });
    const { items } = await timeline(contact!.id, { types: 'tracked' });
    expect(items.map((i) => i.type)).toEqual(['Pricing Viewed', 'identify', 'Trial Started']);
    expect(items[0].data).toMatchObject({ properties: { plan: 'pro', seats: 3, nested: { a: [1, 2] } }, userId });
    // The library's own request again (a retry after a lost answer): nothing is stored twice.
    for (const body of bodies) {
      const again = await app.http.post('/api/ingest/v1/batch').set('Authorization', basic(secret)).set('Content-Type', 'application/json').send(body);
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ success: true });
    }
    expect(await trackedCount(`userId[eq]:${userId}`)).toBe(3);
    // The record events are in the same stream: the contact's creation.
    const all = await waitUntil(
      'the contact.created record event',
      async () => {
        const t = await timeline(contact!.id);
        return t.items.some((i) => i.kind === 'record' && i.type === 'contact.created') && t;
      },
      5_000,
    );
    // Walking the merged stream one item a page answers the same items in the same order.
    const walked: TimelineItem[] = [];
    let after: string | null = '';
    while (after !== null) {
      const page = await timeline(contact!.id, { limit: '1', ...(after ? { after } : {}) });
      walked.push(...page.items);
      after = page.next;
    }
    expect(walked).toEqual(all.items);
    expectError(await app.http.get(`/api/contacts/${contact!.id}/timeline`).query({ after: 'garbage' }).set('Authorization', auth), 400, 'validation_failed');
    expectError(await app.http.get('/api/contacts/999999/timeline').set('Authorization', auth), 404, 'not_found');
  });

  it('takes a Bearer token or the write key (token as user name, empty password); needs tracking:write', async () => {
    const body = { userId: uid(), event: 'x' };
    expect((await send('track', body, auth)).status).toBe(200);
    expect((await send('track', body, basic(secret))).status).toBe(200);
    expectError(await send('track', body, basic(secret, 'password')), 401, 'unauthorized');
    expectError(await send('track', body, basic('sf_nope')), 401, 'unauthorized');
    const reader = await tokenFor(app, 'tracking:read', { user: 'tracking-reader@example.com', plan: 'enterprise' });
    expectError(await send('track', body, reader), 403, 'forbidden');
    expectError(
      await app.http.get('/api/tracking/definitions').set('Authorization', await tokenFor(app, 'contacts:read', { plan: 'enterprise' })),
      403,
      'forbidden',
    );
  });

  it('refuses a bad batch naming the call index and field, storing nothing of it; NUL and oversize are refused', async () => {
    const userId = uid();
    const res = await send('batch', {
      batch: [
        { type: 'track', event: 'fine', userId },
        { type: 'track', userId },
        { type: 'identify', anonymousId: 'a', traits: 'x' },
        { type: 'track', event: 'e', userId, timestamp: 'not a time' },
      ],
    });
    expectError(res, 400, 'validation_failed');
    const fields = (res.body as { error: { details: { field: string }[] } }).error.details.map((d) => d.field);
    expect(fields).toEqual(['batch.1.event', 'batch.2.traits', 'batch.3.timestamp']);
    expect(await trackedCount(`userId[eq]:${userId}`)).toBe(0);
    expectError(await send('track', { userId, event: 'bad\u0000name' }), 400, 'validation_failed');
    const big = { batch: Array.from({ length: 20 }, () => ({ type: 'track', event: 'big', userId, properties: { s: 'x'.repeat(30_000) } })) };
    const tooBig = await send('batch', big);
    expectError(tooBig, 400, 'validation_failed');
    expect(JSON.stringify(tooBig.body)).toContain('500 KB');
    const tooMany = await send('batch', { batch: Array.from({ length: 501 }, () => ({ type: 'track', event: 'many', userId })) });
    expectError(tooMany, 400, 'validation_failed');
    expect(await trackedCount(`userId[eq]:${userId}`)).toBe(0);
  });

  it('attributes anonymous events on identify, in their place in the timeline; identify by email links the existing contact', async () => {
    const anon = uid('anon');
    const userId = uid();
    const email = uniqueEmail('tracking.test');
    const existing = await createContact(app, auth, { name: 'Existing Person', email });
    const earlier = new Date(clock.now().getTime() - 2 * DAY).toISOString();
    expect((await send('track', { anonymousId: anon, event: 'Landing Viewed', timestamp: earlier })).status).toBe(200);
    expect((await send('identify', { userId, anonymousId: anon, traits: { email, title: 'CTO' } })).status).toBe(200);
    const contact = await contactByExternalId(userId);
    expect(contact?.id).toBe(existing);
    expect(contact).toMatchObject({ title: 'CTO', name: 'Existing Person' });
    const { items } = await timeline(existing, { types: 'tracked' });
    expect(items.map((i) => i.type)).toEqual(['identify', 'Landing Viewed']);
    expect(Math.abs(Date.parse(items[1].at) - Date.parse(earlier))).toBeLessThan(1000);
    // The contact's update by the identify is in the record stream (once the feed's sequencer numbered it).
    const records = await waitUntil('the record event', async () => (await timeline(existing, { types: 'contact.updated' })).items[0], 5_000);
    expect(records).toMatchObject({ kind: 'record', type: 'contact.updated', summary: expect.stringContaining('title') as unknown });
  });

  it('an invalid trait is reported on the stored call without losing the valid ones', async () => {
    const userId = uid();
    const messageId = uid('msg');
    expect((await send('identify', { userId, messageId, traits: { email: 'nope', name: 'Valid Name', phone: 'x'.repeat(50) } })).status).toBe(200);
    expect(await contactByExternalId(userId)).toMatchObject({ name: 'Valid Name', email: null, phone: null });
    const r = await app.http
      .get('/api/tracking/events')
      .query({ filter: `messageId[eq]:${messageId}` })
      .set('Authorization', auth);
    const [event] = (r.body as { events: { flags: { problems: { field: string }[] } }[] }).events;
    expect(event.flags.problems.map((p) => p.field).sort()).toEqual(['traits.email', 'traits.phone']);
  });

  it('parallel identifies of one userId create one contact', async () => {
    const userId = uid();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send('identify', { userId, traits: { name: `Parallel ${i}` } })));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const r = await app.http
      .get('/api/contacts')
      .query({ filter: `externalId[eq]:${userId}` })
      .set('Authorization', auth);
    expect((r.body as { total: number }).total).toBe(1);
  });

  it('lists definitions and filters tracked events by name, contact and property', async () => {
    const userId = uid();
    await send('batch', {
      batch: [
        { type: 'track', event: 'Order Completed', userId, properties: { total: 12.5, currency: 'EUR' } },
        { type: 'track', event: 'Order Completed', userId, properties: { total: '13', coupon: null } },
      ],
    });
    const defs = await app.http.get('/api/tracking/definitions').set('Authorization', auth);
    const def = (defs.body as { definitions: { name: string; properties: Record<string, string[]> }[] }).definitions.find((d) => d.name === 'Order Completed');
    expect(def?.properties).toEqual({ total: ['number', 'string'], currency: ['string'], coupon: ['null'] });
    const contact = await contactByExternalId(userId);
    expect(await trackedCount(`and(name[eq]:Order Completed,contact.id[eq]:${contact!.id},properties.currency[eq]:EUR)`)).toBe(1);
    expectError(await app.http.get('/api/tracking/events').query({ filter: 'nope[eq]:1' }).set('Authorization', auth), 400, 'validation_failed');
  });

  it('a 7-day behavioural segment gains a contact on a new event within 5 s and loses it once the events age out', async () => {
    const userId = uid();
    const seg = await app.http
      .post('/api/segments')
      .set('Authorization', auth)
      .send({ name: `viewers ${userId}`, type: 'dynamic', filter: 'and(events.Pricing Viewed.count.7d[gte]:2,events.Churned.lastAt[isEmpty])' });
    expect(seg.status).toBe(201);
    const segmentId = (seg.body as { segment: { id: number } }).segment.id;
    const members = async () => {
      const r = await app.http.get(`/api/segments/${segmentId}/contacts`).set('Authorization', auth);
      return (r.body as { contacts: { externalId: string }[] }).contacts.map((c) => c.externalId);
    };
    await send('track', { userId, event: 'Pricing Viewed' });
    await waitUntil(
      'the segment built',
      async () => (await app.http.get(`/api/segments/${segmentId}`).set('Authorization', auth)).body.segment.membership.status === 'ready',
      10_000,
    );
    expect(await members()).toEqual([]);
    const t0 = Date.now();
    await send('track', { userId, event: 'Pricing Viewed' });
    await waitUntil('the contact joined', async () => (await members()).includes(userId), 5_000);
    expect(Date.now() - t0).toBeLessThan(5_000);
    // Eight days later by the server's clock, with no other change: the contact leaves.
    clock.travel(8 * DAY);
    await waitUntil('the contact left', async () => !(await members()).includes(userId), 10_000);
  });

  it('webhooks subscribed to tracked.<name> or tracked.* get signed deliveries of tracked events (not "*")', async () => {
    const got: { path: string; body: string; headers: IncomingHttpHeaders }[] = [];
    const server: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push({ path: req.url ?? '', body, headers: req.headers });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const hook = async (path: string, events: string[]) => {
        const r = await app.http
          .post('/api/webhooks')
          .set('Authorization', auth)
          .send({ url: `http://127.0.0.1:${port}${path}`, events });
        expect(r.status).toBe(201);
        return (r.body as { webhook: { secret: string } }).webhook.secret;
      };
      const named = await hook('/named', ['tracked.Plan Upgraded']);
      await hook('/all', ['tracked.*', 'contact.created']);
      await hook('/feed', ['*']);
      const reader = await tokenFor(app, 'webhooks:read,webhooks:write', { user: 'hooks@example.com', plan: 'enterprise' });
      expectError(
        await app.http
          .post('/api/webhooks')
          .set('Authorization', reader)
          .send({ url: `http://127.0.0.1:${port}/x`, events: ['tracked.*'] }),
        403,
        'forbidden',
      );
      const userId = uid();
      await send('batch', {
        batch: [
          { type: 'track', userId, event: 'Plan Upgraded', properties: { to: 'pro' } },
          { type: 'track', userId, event: 'Other' },
        ],
      });
      await waitUntil(
        'the tracked deliveries',
        async () => got.filter((g) => g.path === '/all' && g.body.includes('tracked.')).length >= 2 && got.some((g) => g.path === '/named'),
        10_000,
      );
      const [delivery] = got.filter((g) => g.path === '/named');
      const body = JSON.parse(delivery.body) as { type: string; data: { name: string; properties: unknown; userId: string } };
      expect(body).toMatchObject({ type: 'tracked.Plan Upgraded', data: { name: 'Plan Upgraded', properties: { to: 'pro' }, userId } });
      // Signed as the change feed's deliveries (Standard Webhooks).
      const id = String(delivery.headers['webhook-id']);
      const ts = String(delivery.headers['webhook-timestamp']);
      const key = Buffer.from(named.replace(/^whsec_/, ''), 'base64');
      const expected = createHmac('sha256', key).update(`${id}.${ts}.${delivery.body}`).digest('base64');
      expect(String(delivery.headers['webhook-signature']).split(' ')).toContain(`v1,${expected}`);
      expect(got.filter((g) => g.path === '/named')).toHaveLength(1);
      // "*" is the change feed: no tracked event reaches it.
      expect(got.filter((g) => g.path === '/feed').some((g) => g.body.includes('"tracked.'))).toBe(false);
      // The userId is known now (the intake's one-statement path would take it): a subscribed webhook still gets the event.
      await send('batch', { batch: [{ type: 'track', userId, event: 'Plan Upgraded', properties: { to: 'enterprise' } }] });
      await waitUntil('the second delivery', async () => got.filter((g) => g.path === '/named').length >= 2, 10_000);
      expect(JSON.parse(got.filter((g) => g.path === '/named')[1].body)).toMatchObject({ data: { properties: { to: 'enterprise' }, userId } });
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
