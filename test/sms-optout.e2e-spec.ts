import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createContact, tokenFor, uniqueEmail } from './support/fixtures.js';
import { FakeGateway, sign } from './support/sms-gateway.js';
import { waitUntil } from './support/wait.js';

const SECRET = 'whsec-optout-secret';

describe('SMS opt-out: do-not-contact entries, inbound STOP/START, refused and canceled sends', () => {
  let gateway: FakeGateway;
  let api: TestApp;
  let worker: TestApp;
  let auth: string;

  beforeAll(async () => {
    gateway = await new FakeGateway().start();
    const env = { SMS_PROVIDER: 'http', SMS_HTTP_URL: gateway.url, SMS_WEBHOOK_SECRET: SECRET, SMS_HTTP_TIMEOUT_MS: '3000', JOB_LOCK_MS: '3000' };
    api = await startApp({ role: 'api', env });
    worker = await startApp({ shareWith: api, role: 'worker', env });
    auth = await adminToken(api);
  }, 120000);
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await gateway?.stop();
  });

  let phone = 4155551000;
  const nextPhone = () => `+1${phone++}`;
  const contact = (p: string | null) => createContact(api, auth, { name: 'Opt Out', email: uniqueEmail('optout.test'), phone: p });
  const getContact = async (id: number) => (await api.http.get(`/api/contacts/${id}`).set('Authorization', auth)).body.contact;
  const dnc = (id: number, body: object) => api.http.post(`/api/contacts/${id}/dnc/sms`).set('Authorization', auth).send(body);
  const undnc = (id: number) => api.http.delete(`/api/contacts/${id}/dnc/sms`).set('Authorization', auth);
  const inbound = (body: object, secret = SECRET) => {
    const raw = JSON.stringify(body);
    return api.http.post('/api/text-messages/inbound').set('Content-Type', 'application/json').set('X-Signature', sign(secret, raw)).send(raw);
  };
  const message = (recipient: string, extra: object = {}) =>
    api.http
      .post('/api/text-messages')
      .set('Authorization', auth)
      .send({ content: 'Hi there', recipient, ...extra });
  const events = async (type: string, id: number) => {
    const rows = await api.sql<{ data: { id: number; doNotContact: unknown }; previous: unknown }>(
      `SELECT data, previous FROM events WHERE type = $1 AND (data->>'id')::int = $2 ORDER BY insert_order`,
      [type, id],
    );
    return rows;
  };

  it('sets, shows, filters and removes the sms entry (contact.updated each time)', async () => {
    const id = await contact(nextPhone());
    expect((await getContact(id)).doNotContact).toEqual({ sms: null });

    const set = await dnc(id, { reason: 'manual', comment: 'asked on the phone' });
    expect(set.status).toBe(200);
    expect(set.body.contact.doNotContact.sms).toMatchObject({ reason: 'manual', comment: 'asked on the phone' });
    expect(set.body.contact.doNotContact.sms.since).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
    expect((await getContact(id)).doNotContact).toEqual(set.body.contact.doNotContact);

    // A new reason keeps `since`.
    const again = await dnc(id, { reason: 'bounced' });
    expect(again.body.contact.doNotContact.sms).toEqual({ reason: 'bounced', since: set.body.contact.doNotContact.sms.since, comment: null });

    const optedOut = await api.http.get('/api/contacts?dncSms=true&limit=100').set('Authorization', auth);
    expect(optedOut.status).toBe(200);
    expect(optedOut.body.contacts.map((c: { id: number }) => c.id)).toContain(id);
    expect(optedOut.body.contacts.every((c: { doNotContact: { sms: unknown } }) => c.doNotContact.sms !== null)).toBe(true);
    const notOptedOut = await api.http.get('/api/contacts?dncSms=false&limit=100').set('Authorization', auth);
    expect(notOptedOut.body.contacts.map((c: { id: number }) => c.id)).not.toContain(id);
    expectError(await api.http.get('/api/contacts?dncSms=maybe').set('Authorization', auth), 400, 'validation_failed');

    const removed = await undnc(id);
    expect(removed.status).toBe(200);
    expect(removed.body.contact.doNotContact).toEqual({ sms: null });
    expectError(await undnc(id), 404, 'not_found');

    const ev = await events('contact.updated', id);
    expect(ev).toHaveLength(3);
    expect(ev[0].previous).toEqual({ doNotContact: { sms: null } });
    expect(ev[0].data.doNotContact).toEqual(set.body.contact.doNotContact);
    expect(ev[2].data.doNotContact).toEqual({ sms: null });
  });

  it('validates the body and the contact', async () => {
    const id = await contact(nextPhone());
    expectError(await dnc(id, {}), 400, 'validation_failed');
    expectError(await dnc(id, { reason: 'spam' }), 400, 'validation_failed');
    expectError(await dnc(id, { reason: 'manual', comment: 'x'.repeat(1001) }), 400, 'validation_failed');
    expectError(await dnc(id, { reason: 'manual', other: 1 }), 400, 'validation_failed');
    expectError(await dnc(999999, { reason: 'manual' }), 404, 'not_found');
    expectError(await undnc(999999), 404, 'not_found');
    const readOnly = await tokenFor(api, 'contacts:read');
    expectError(await api.http.post(`/api/contacts/${id}/dnc/sms`).set('Authorization', readOnly).send({ reason: 'manual' }), 403, 'forbidden');
  });

  it('parallel POSTs leave one entry and one event; of parallel DELETEs exactly one succeeds', async () => {
    const id = await contact(nextPhone());
    const posts = await Promise.all(Array.from({ length: 8 }, () => dnc(id, { reason: 'unsubscribed' })));
    expect(posts.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(posts.map((r) => r.body.contact.doNotContact.sms.since)).size).toBe(1);
    expect(await events('contact.updated', id)).toHaveLength(1);

    const deletes = await Promise.all(Array.from({ length: 8 }, () => undnc(id)));
    expect(deletes.filter((r) => r.status === 200)).toHaveLength(1);
    expect(deletes.filter((r) => r.status === 404)).toHaveLength(7);
    expect(await events('contact.updated', id)).toHaveLength(2);
  });

  it('a contact PATCH and a do-not-contact change in parallel both survive', async () => {
    const id = await contact(nextPhone());
    const [a, b] = await Promise.all([api.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ title: 'CEO' }), dnc(id, { reason: 'manual' })]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const c = await getContact(id);
    expect(c.title).toBe('CEO');
    expect(c.doNotContact.sms.reason).toBe('manual');
  });

  it('STOP (any case, trimmed) opts out every contact with the number; START opts them back in', async () => {
    const p = nextPhone();
    const national = `(${p.slice(2, 5)}) ${p.slice(5, 8)}-${p.slice(8)}`;
    const a = await contact(p);
    const b = await contact(national); // stored normalised
    const other = await contact(nextPhone());

    expectError(await inbound({ from: p, body: 'STOP' }, 'wrong-secret'), 401, 'unauthorized');
    expect((await getContact(a)).doNotContact.sms).toBeNull();

    const stop = await inbound({ from: national, to: '+14155550000', body: '  sToP \n', messageId: `in-${p}-1` });
    expect(stop.status).toBe(200);
    expect(stop.body).toMatchObject({ accepted: true, action: 'opt_out', contactsUpdated: 2 });
    for (const id of [a, b]) expect((await getContact(id)).doNotContact.sms).toMatchObject({ reason: 'unsubscribed' });
    expect((await getContact(other)).doNotContact.sms).toBeNull();

    // A retried callback (same messageId) is not acted on again.
    const repeat = await inbound({ from: p, body: 'STOP', messageId: `in-${p}-1` });
    expect(repeat.body).toMatchObject({ accepted: false, contactsUpdated: 0 });

    // Sends to the number are refused.
    const draft = await message(p);
    expect(draft.status).toBe(201);
    const refused = expectError(await api.http.post(`/api/text-messages/${draft.body.textMessage.id}/send`).set('Authorization', auth), 409, 'conflict');
    expect(refused.message).toMatch(/opted out/);
    expectError(await message(p, { scheduledFor: new Date(Date.now() + 60_000).toISOString() }), 409, 'conflict');

    const other1 = await inbound({ from: p, body: 'hello, who is this?' });
    expect(other1.body).toMatchObject({ accepted: true, action: 'none', contactsUpdated: 0 });

    for (const word of ['unsubscribe', 'Cancel', 'END', 'quit']) {
      expect((await inbound({ from: p, body: word })).body.action).toBe('opt_out');
    }

    const start = await inbound({ from: p, body: 'Start' });
    expect(start.body).toMatchObject({ accepted: true, action: 'opt_in', contactsUpdated: 2 });
    for (const id of [a, b]) expect((await getContact(id)).doNotContact.sms).toBeNull();
    const sent = await api.http.post(`/api/text-messages/${draft.body.textMessage.id}/send`).set('Authorization', auth);
    expect(sent.status).toBe(202);

    // UNSTOP does not remove a manual entry.
    await dnc(a, { reason: 'manual' });
    expect((await inbound({ from: p, body: 'UNSTOP' })).body.contactsUpdated).toBe(0);
    expect((await getContact(a)).doNotContact.sms.reason).toBe('manual');

    const stored = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM inbound_text_messages WHERE from_number = $1`, [p]);
    expect(stored[0].n).toBe(8); // the repeated messageId and the badly signed one are not stored
    const ev = await events('contact.updated', b);
    expect(ev.map((e) => e.data.doNotContact)).toEqual([{ sms: expect.objectContaining({ reason: 'unsubscribed' }) }, { sms: null }]);
  });

  it('a captured signed STOP or START (no messageId) cannot be replayed: signatures older than 5 minutes, or without a timestamp, are 401s', async () => {
    const p = nextPhone();
    const id = await contact(p);
    const post = (raw: string, signature: string, path = '/api/text-messages/inbound') =>
      api.http.post(path).set('Content-Type', 'application/json').set('X-Signature', signature).send(raw);
    const stop = JSON.stringify({ from: p, body: 'STOP' });
    // Signed 6 minutes ago (a request captured then), and 6 minutes ahead.
    const replayed = expectError(await post(stop, sign(SECRET, stop, Date.now() - 6 * 60_000)), 401, 'unauthorized');
    expect(replayed.message).toMatch(/more than 5 minutes/);
    expectError(await post(stop, sign(SECRET, stop, Date.now() + 6 * 60_000)), 401, 'unauthorized');
    // The body-only HMAC (no timestamp) is refused, and so is a fresh timestamp on an old HMAC.
    const bodyOnly = 'sha256=' + createHmac('sha256', SECRET).update(stop).digest('hex');
    expect(expectError(await post(stop, bodyOnly), 401, 'unauthorized').message).toMatch(/timestamp/);
    const old = sign(SECRET, stop, Date.now() - 6 * 60_000);
    expectError(await post(stop, `t=${Math.floor(Date.now() / 1000)},${old.split(',')[1]}`), 401, 'unauthorized');
    expect((await getContact(id)).doNotContact.sms).toBeNull();
    expect((await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM inbound_text_messages WHERE from_number = $1`, [p]))[0].n).toBe(0);
    // A fresh signature (4 minutes old: within the tolerance) is taken.
    expect((await post(stop, sign(SECRET, stop, Date.now() - 4 * 60_000))).body).toMatchObject({ accepted: true, action: 'opt_out', contactsUpdated: 1 });
    // Delivery reports share the scheme.
    const report = JSON.stringify({ reference: 'textmessage-999999-1', status: 'delivered' });
    expectError(await post(report, sign(SECRET, report, Date.now() - 6 * 60_000), '/api/text-messages/delivery-reports'), 401, 'unauthorized');
    expect((await post(report, sign(SECRET, report), '/api/text-messages/delivery-reports')).status).toBe(200);
  });

  it('refuses malformed inbound bodies with 400', async () => {
    expectError(await inbound({ body: 'STOP' }), 400, 'validation_failed');
    expectError(await inbound({ from: 'not a phone', body: 'STOP' }), 400, 'validation_failed');
    expectError(await inbound({ from: '+14155550000' }), 400, 'validation_failed');
    expectError(await inbound({ from: '+14155550000', body: 'x'.repeat(1601) }), 400, 'validation_failed');
    expectError(await inbound({ from: '+14155550000', body: 'hi', receivedAt: 'yesterday' }), 400, 'validation_failed');
  });

  it('an opt-out after the message was queued wins: the worker cancels it (opted_out) and never calls the gateway', async () => {
    const p = nextPhone();
    const id = await contact(p);
    const queued = await message(p, { scheduledFor: new Date(Date.now() + 3000).toISOString() });
    expect(queued.status).toBe(201);
    expect(queued.body.textMessage.status).toBe('queued');
    expect((await dnc(id, { reason: 'unsubscribed' })).status).toBe(200);
    const t = await waitUntil(
      'the message to leave queued',
      async () => {
        const m = (await api.http.get(`/api/text-messages/${queued.body.textMessage.id}`).set('Authorization', auth)).body.textMessage;
        return m.status === 'queued' ? undefined : m;
      },
      30000,
    );
    expect(t).toMatchObject({ status: 'canceled', failureCode: 'opted_out', sentAt: null });
    expect(t.canceledAt).toMatch(/\+00:00$/);
    expect(gateway.requestsTo(p)).toHaveLength(0);
    expect(await events('text_message.canceled', t.id)).toHaveLength(1);
    // Canceled is terminal.
    expectError(await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth), 409, 'conflict');
    const list = await api.http.get('/api/text-messages?status=canceled').set('Authorization', auth);
    expect(list.body.textMessages.map((m: { id: number }) => m.id)).toContain(t.id);
  });
});
