import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { expectError, startApp, TEST_REDIS_URL, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { FakeGateway, sign } from './support/sms-gateway.js';
import { waitUntil } from './support/wait.js';

const SECRET = 'whsec-test-secret';

describe('text messages (API and worker in separate processes, HTTP provider against a fake gateway)', () => {
  let gateway: FakeGateway;
  let api: TestApp;
  let worker: TestApp;
  let auth: string;
  let adminId: number;
  let env: Record<string, string>;

  beforeAll(async () => {
    gateway = await new FakeGateway().start();
    env = {
      SMS_PROVIDER: 'http',
      SMS_HTTP_URL: gateway.url,
      SMS_HTTP_TOKEN: 'gateway-token',
      SMS_WEBHOOK_SECRET: SECRET,
      SMS_HTTP_TIMEOUT_MS: '3000',
      JOB_LOCK_MS: '3000',
    };
    api = await startApp({ role: 'api', env });
    worker = await startApp({ shareWith: api, role: 'worker', env });
    auth = await adminToken(api);
    adminId = (await api.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'admin@example.com'`))[0].id;
  }, 120000);
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await gateway?.stop();
  });

  let phone = 4155550100;
  const nextPhone = () => `+1${phone++}`;
  const create = (body: object) => api.http.post('/api/text-messages/new').set('Authorization', auth).send(body);
  const get = async (id: number) => (await api.http.get(`/api/text-messages/${id}`).set('Authorization', auth)).body.textMessage;
  const waitStatus = (id: number, status: string, ms = 20000) =>
    waitUntil(
      `message ${id} to be ${status}`,
      async () => {
        const t = await get(id);
        return t.status === status ? t : undefined;
      },
      ms,
    );
  const report = (body: object, signature?: string) => {
    const raw = JSON.stringify(body);
    const req = api.http.post('/api/text-messages/delivery-reports').set('Content-Type', 'application/json');
    if (signature !== undefined) req.set('X-Signature', signature);
    return req.send(raw);
  };

  it('goes draft → queued → sent → delivered through the HTTP provider and a signed delivery report', async () => {
    const to = nextPhone();
    const created = await create({ content: 'Hello from the test', recipient: to });
    expect(created.status).toBe(201);
    const t = created.body.textMessage;
    expect(t).toMatchObject({ status: 'draft', recipient: to, sentAt: null, deliveredAt: null, campaign: null, createdBy: adminId });

    const sent = await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    expect(sent.status).toBe(202);
    expect(sent.body.textMessage.status).toBe('queued');

    const afterSend = await waitStatus(t.id, 'sent');
    expect(afterSend.sentAt).toMatch(/\+00:00$/);
    const reqs = gateway.requestsTo(to);
    expect(reqs).toHaveLength(1);
    expect(reqs[0].headers.authorization).toBe('Bearer gateway-token');
    expect(reqs[0].headers['idempotency-key']).toBe(`textmessage-${t.id}-1`);
    expect(reqs[0].body).toMatchObject({ to, body: 'Hello from the test', reference: `textmessage-${t.id}-1` });
    // BASE_URL of the sending (worker) process + the callback route.
    expect(reqs[0].body.callbackUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/text-messages\/delivery-reports$/);

    const body = { reference: `textmessage-${t.id}-1`, status: 'delivered', timestamp: '2030-01-01T10:00:00Z' };
    const ok = await report(body, sign(SECRET, JSON.stringify(body)));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ accepted: true, status: 'delivered' });
    const delivered = await get(t.id);
    expect(delivered).toMatchObject({ status: 'delivered', deliveredAt: '2030-01-01T10:00:00+00:00' });

    // Transitions only move forward: a late "failed" report is acknowledged and ignored.
    const late = { reference: `textmessage-${t.id}-1`, status: 'failed' };
    expect((await report(late, sign(SECRET, JSON.stringify(late)))).body).toEqual({ accepted: false, status: 'delivered' });
    expect((await get(t.id)).status).toBe('delivered');
    // Past draft/failed: no edits, no send.
    expectError(await api.http.patch(`/api/text-messages/${t.id}/edit`).set('Authorization', auth).send({ content: 'changed' }), 409, 'conflict');
    expectError(await api.http.put(`/api/text-messages/${t.id}`).set('Authorization', auth).send({ content: 'changed', recipient: to }), 409, 'conflict');
    expectError(await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth), 409, 'conflict');
  }, 60000);

  it('refuses forged, unsigned and tampered delivery reports with 401 and changes nothing', async () => {
    const to = nextPhone();
    const t = (await create({ content: 'forge me', recipient: to })).body.textMessage;
    await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    await waitStatus(t.id, 'sent');
    const body = { reference: `textmessage-${t.id}-1`, status: 'delivered' };
    expectError(await report(body), 401, 'unauthorized');
    expectError(await report(body, sign('wrong-secret', JSON.stringify(body))), 401, 'unauthorized');
    expectError(await report(body, 'sha256=' + '0'.repeat(64)), 401, 'unauthorized');
    // Signed for other bytes than those sent.
    expectError(await report({ ...body, status: 'failed' }, sign(SECRET, JSON.stringify(body))), 401, 'unauthorized');
    expect((await get(t.id)).status).toBe('sent');
    // A failed report that is signed moves it to failed and notifies the creator.
    const failed = { reference: `textmessage-${t.id}-1`, status: 'undelivered', error: 'handset off' };
    expect((await report(failed, sign(SECRET, JSON.stringify(failed)))).status).toBe(200);
    expect(await get(t.id)).toMatchObject({ status: 'failed', failureCode: 'delivery_failed', failureReason: 'handset off' });
    const notes = await api.sql<{ details: { textMessageId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'sms_failed'`, [
      adminId,
    ]);
    expect(notes.map((n) => n.details.textMessageId)).toContain(t.id);
  }, 60000);

  it('retries gateway 503s with backoff and ends sent, the message staying queued meanwhile', async () => {
    const to = nextPhone();
    gateway.script(to, [503, 503, 200]);
    const t = (await create({ content: 'retry me', recipient: to })).body.textMessage;
    await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    await waitUntil('first attempt', async () => (gateway.requestsTo(to).length >= 1 ? true : undefined), 10000);
    expect((await get(t.id)).status).toBe('queued');
    await waitStatus(t.id, 'sent', 30000);
    const reqs = gateway.requestsTo(to);
    expect(reqs).toHaveLength(3);
    expect(new Set(reqs.map((r) => r.headers['idempotency-key']))).toEqual(new Set([`textmessage-${t.id}-1`]));
    expect(reqs[1].at - reqs[0].at).toBeGreaterThanOrEqual(1500); // backoff, not a tight loop
  }, 60000);

  it('fails on a final gateway refusal with an sms_failed notification; send from failed starts a new send', async () => {
    const to = nextPhone();
    gateway.script(to, [422]);
    const t = (await create({ content: 'refuse me', recipient: to })).body.textMessage;
    await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    const failed = await waitStatus(t.id, 'failed');
    expect(failed).toMatchObject({ failureCode: 'provider_rejected' });
    expect(failed.failureReason).toContain('422');
    const notes = await api.sql<{ details: { textMessageId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'sms_failed'`, [
      adminId,
    ]);
    expect(notes.map((n) => n.details.textMessageId)).toContain(t.id);

    // Failed messages can be edited and sent again (a new idempotency key).
    const edited = await api.http.patch(`/api/text-messages/${t.id}`).set('Authorization', auth).send({ content: 'second try' });
    expect(edited.status).toBe(200);
    const again = await api.http.post(`/api/text_messages/${t.id}/send`).set('Authorization', auth);
    expect(again.status).toBe(202);
    expect(again.body.textMessage).toMatchObject({ status: 'queued', failureReason: null, failureCode: null });
    await waitStatus(t.id, 'sent');
    expect(gateway.requestsTo(to).map((r) => r.headers['idempotency-key'])).toEqual([`textmessage-${t.id}-1`, `textmessage-${t.id}-2`]);
  }, 60000);

  it('never hands a message to the gateway twice when the worker is killed between the gateway call and the status write', async () => {
    const to = nextPhone();
    gateway.script(to, ['hold']);
    const t = (await create({ content: 'crash me', recipient: to })).body.textMessage;
    await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    await waitUntil('the gateway to hold the request', async () => (gateway.requestsTo(to).length === 1 ? true : undefined), 10000);
    await worker.kill('SIGKILL');
    gateway.release(); // the answer goes to a dead process
    expect((await get(t.id)).status).toBe('queued');

    worker = await startApp({ shareWith: api, role: 'worker', env });
    const resolved = await waitStatus(t.id, 'failed', 30000);
    expect(resolved.failureCode).toBe('outcome_unknown');
    expect(resolved.failureReason).toMatch(/outcome unknown/);
    // Let the stalled job be picked up again (JOB_LOCK_MS=3000) and finish: still one request.
    const redis = new Redis(TEST_REDIS_URL);
    try {
      await waitUntil('no active sms job', async () => ((await redis.llen(`${api.env.REDIS_PREFIX}:sms:active`)) === 0 ? true : undefined), 20000);
    } finally {
      redis.disconnect();
    }
    await new Promise((r) => setTimeout(r, 2000));
    expect(gateway.requestsTo(to)).toHaveLength(1);
    expect((await get(t.id)).status).toBe('failed');

    // The gateway's own report still tells the truth: the message was delivered.
    const body = { reference: `textmessage-${t.id}-1`, status: 'delivered' };
    expect((await report(body, sign(SECRET, JSON.stringify(body)))).body).toEqual({ accepted: true, status: 'delivered' });
  }, 90000);

  it('a worker stopped with SIGTERM finishes the send it is in the middle of before exiting', async () => {
    const to = nextPhone();
    gateway.script(to, ['hold']);
    const t = (await create({ content: 'graceful', recipient: to })).body.textMessage;
    await api.http.post(`/api/text-messages/${t.id}/send`).set('Authorization', auth);
    await waitUntil('the gateway to hold the request', async () => (gateway.requestsTo(to).length === 1 ? true : undefined), 10000);
    const exiting = worker.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1000));
    expect(worker.process.exitCode).toBeNull(); // still finishing its job
    gateway.release();
    expect(await exiting).toBe(0);
    const [row] = await api.sql<{ status: string; claim_token: string | null }>(`SELECT status, claim_token FROM text_messages WHERE id = $1`, [t.id]);
    expect(row).toEqual({ status: 'sent', claim_token: null });
    worker = await startApp({ shareWith: api, role: 'worker', env });
    expect(gateway.requestsTo(to)).toHaveLength(1);
  }, 60000);

  it('queues a message with scheduledFor and sends it at that time', async () => {
    const to = nextPhone();
    const at = new Date(Date.now() + 3000);
    const created = await create({ content: 'later', recipient: to, scheduledFor: at.toISOString() });
    expect(created.status).toBe(201);
    expect(created.body.textMessage.status).toBe('queued');
    expect(created.body.textMessage.scheduledFor).toBe(at.toISOString().slice(0, 19) + '+00:00');
    await new Promise((r) => setTimeout(r, 1500));
    expect(gateway.requestsTo(to)).toHaveLength(0);
    const sent = await waitStatus(created.body.textMessage.id, 'sent', 20000);
    expect(Date.parse(sent.sentAt)).toBeGreaterThanOrEqual(Math.floor(at.getTime() / 1000) * 1000);
    expectError(await api.http.patch(`/api/text-messages/${sent.id}`).set('Authorization', auth).send({ content: 'x' }), 409, 'conflict');
  }, 60000);

  it('validates recipient, content and campaign; shows campaign {id, name}; campaign delete sets it to null', async () => {
    const bad = async (body: object, field: string) => {
      const err = expectError(await create(body), 400, 'validation_failed');
      expect(err.details!.map((d) => d.field)).toContain(field);
    };
    await bad({ content: 'x', recipient: 'not a phone' }, 'recipient');
    await bad({ content: 'x', recipient: '+1' }, 'recipient');
    await bad({ content: '', recipient: '+14155550199' }, 'content');
    await bad({ content: 'x'.repeat(1601), recipient: '+14155550199' }, 'content');
    await bad({ recipient: '+14155550199' }, 'content');
    await bad({ content: 'x', recipient: '+14155550199', campaignId: 999999 }, 'campaignId');
    await bad({ content: 'x', recipient: '+14155550199', scheduledFor: '2030-01-01T10:00:00' }, 'scheduledFor');
    await bad({ content: 'x', recipient: '+14155550199', status: 'sent' }, 'status');
    expect((await create({ content: 'x'.repeat(1600), recipient: '(415) 555-0199' })).body.textMessage.recipient).toBe('+14155550199');

    const [c] = await api.sql<{ id: number }>(`INSERT INTO campaigns (name) VALUES ('SMS blast') RETURNING id`);
    const t = (await create({ content: 'in campaign', recipient: nextPhone(), campaignId: c.id })).body.textMessage;
    expect(t.campaign).toEqual({ id: c.id, name: 'SMS blast' });
    const filtered = await api.http.get(`/api/text-messages?campaignId=${c.id}`).set('Authorization', auth);
    expect(filtered.body).toMatchObject({ total: 1, textMessages: [{ id: t.id }] });
    await api.sql(`DELETE FROM campaigns WHERE id = $1`, [c.id]);
    expect((await get(t.id)).campaign).toBeNull();
  });

  it('CRUD in both spellings, list filters and PUT semantics', async () => {
    const t = (await api.http.post('/api/text_messages').set('Authorization', auth).send({ content: 'coll', recipient: nextPhone() })).body.textMessage;
    expect(t.status).toBe('draft');
    const list = await api.http.get('/api/text_messages?status=draft&orderBy=createdAt&orderByDir=desc').set('Authorization', auth);
    expect(list.status).toBe(200);
    expect(list.body.textMessages.every((m: { status: string }) => m.status === 'draft')).toBe(true);
    expect(list.body.textMessages[0].id).toBe(t.id);
    expectError(await api.http.get('/api/text-messages?status=lost').set('Authorization', auth), 400, 'validation_failed');
    const search = await api.http.get('/api/text-messages?search=COLL').set('Authorization', auth);
    expect(search.body.textMessages.map((m: { id: number }) => m.id)).toContain(t.id);

    const put = await api.http.put(`/api/text-messages/${t.id}/edit`).set('Authorization', auth).send({ content: 'replaced', recipient: '+14155550111' });
    expect(put.status).toBe(200);
    expect(put.body.textMessage).toMatchObject({ content: 'replaced', recipient: '+14155550111', campaign: null, scheduledFor: null, modifiedBy: adminId });
    const putNew = await api.http.put('/api/text-messages/999999').set('Authorization', auth).send({ content: 'new', recipient: '+14155550112' });
    expect(putNew.status).toBe(201);
    expectError(await api.http.patch('/api/text-messages/999999/edit').set('Authorization', auth).send({ content: 'x' }), 404, 'not_found');
    expectError(await api.http.post('/api/text-messages/999999/send').set('Authorization', auth), 404, 'not_found');
    const del = await api.http.delete(`/api/text_messages/${t.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.textMessage.id).toBe(t.id);
    expectError(await api.http.get(`/api/text-messages/${t.id}`).set('Authorization', auth), 404, 'not_found');

    const reader = await tokenFor(api, 'textMessages:read', { user: 'sms-reader@example.com' });
    expectError(await api.http.post(`/api/text-messages/${putNew.body.textMessage.id}/send`).set('Authorization', reader), 403, 'forbidden');
  });

  it('serves the queue dashboard to "*" tokens only (Bearer or Basic)', async () => {
    expectError(await api.http.get('/api/admin/queues'), 401, 'unauthorized');
    const limited = await api.token('reports:read,textMessages:read', { user: 'dash@example.com' });
    expectError(await api.http.get('/api/admin/queues').set('Authorization', `Bearer ${limited}`), 403, 'forbidden');
    expectError(await api.http.get('/api/admin/queues/api/queues').set('Authorization', `Bearer ${limited}`), 403, 'forbidden');
    const page = await api.http.get('/api/admin/queues').set('Authorization', auth);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/html/);
    const secret = auth.slice('Bearer '.length);
    const queues = await api.http.get('/api/admin/queues/api/queues').set('Authorization', `Basic ${Buffer.from(`admin:${secret}`).toString('base64')}`);
    expect(queues.status).toBe(200);
    expect(queues.body.queues.map((q: { name: string }) => q.name).sort()).toEqual(['imports', 'maintenance', 'reports', 'sms', 'webhooks']);
  });
});
