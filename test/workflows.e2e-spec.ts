/**
 * Workflows over HTTP against the built app (API and worker in one process, a test clock): every
 * route form with its permissions and events, validation answers, each trigger (manual,
 * record_event, segment_entered with activation, segment_exited, schedule), the step types (send_sms
 * through the HTTP gateway once, a webhook step verified with the standardwebhooks library, waits on
 * the test clock, a branch on a custom field, a goal), versions and migration, dry run, enrollment
 * routes, stats, and parallel enrolments of one contact.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { expectError, startApp, type TestApp } from './support/app.js';
import { testClock, type TestClock } from './support/clock.js';
import { adminToken, createContact, feedHead, feedSince, tokenFor, uniqueEmail } from './support/fixtures.js';
import { FakeGateway } from './support/sms-gateway.js';
import { waitUntil } from './support/wait.js';

interface Enrollment {
  id: number;
  status: string;
  stepKey: string | null;
  version: number;
  contactId: number;
  history?: { stepKey: string; outcome: string }[];
}

/** A local webhook receiver that records every request. */
class Receiver {
  readonly got: { headers: IncomingMessage['headers']; body: string }[] = [];
  private server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200).end('ok');
    });
  });
  url = '';
  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('workflows', () => {
  let app: TestApp;
  let auth: string;
  let reader: string;
  let clock: TestClock;
  let gateway: FakeGateway;
  let receiver: Receiver;

  beforeAll(async () => {
    clock = testClock();
    gateway = await new FakeGateway().start();
    receiver = await new Receiver().start();
    app = await startApp({
      env: {
        ...clock.env,
        WORKFLOW_POLL_INTERVAL_MS: '200',
        SEGMENT_REFRESH_INTERVAL_MS: '200',
        SMS_PROVIDER: 'http',
        SMS_HTTP_URL: gateway.url,
        SMS_WEBHOOK_SECRET: 'gateway-secret',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_DISPATCH_INTERVAL_MS: '100',
      },
    });
    auth = await adminToken(app);
    reader = await tokenFor(app, 'workflows:read', { user: 'wf-reader@example.com', plan: 'enterprise' });
  }, 120000);
  afterAll(async () => {
    await app?.stop();
    await gateway?.stop();
    await receiver?.close();
  });

  const post = (path: string, body: object, token = auth) => app.http.post(path).set('Authorization', token).send(body);
  const patch = (path: string, body: object, token = auth) => app.http.patch(path).set('Authorization', token).send(body);
  const get = (path: string, token = auth) => app.http.get(path).set('Authorization', token);
  const del = (path: string, token = auth) => app.http.delete(path).set('Authorization', token);
  let seq = 0;
  const workflow = async (body: Record<string, unknown>) => {
    const r = await post('/api/workflows', { name: `wf ${++seq}`, status: 'active', trigger: { type: 'manual' }, ...body });
    expect(r.status).toBe(201);
    return r.body.workflow as { id: number; version: number; status: string };
  };
  const enrollmentsOf = async (workflowId: number): Promise<Enrollment[]> => (await get(`/api/workflows/${workflowId}/enrollments?limit=200`)).body.enrollments;
  const waitFor = (what: string, workflowId: number, pred: (e: Enrollment[]) => boolean, ms = 15000) =>
    waitUntil(
      what,
      async () => {
        const list = await enrollmentsOf(workflowId);
        return pred(list) ? list : null;
      },
      ms,
    );

  it('serves every route form with its permissions and events', async () => {
    const head = await feedHead(app, auth);
    const created = await post('/api/workflows/new', { name: 'Welcome', description: 'd', trigger: { type: 'manual' }, steps: [{ key: 'end', type: 'exit' }] });
    expect(created.status).toBe(201);
    const w = created.body.workflow;
    expect(w).toMatchObject({ name: 'Welcome', status: 'draft', version: 1, settings: { reenrollment: 'never', timezone: 'UTC', sendWindow: null } });
    expect(w.stats).toEqual({ entered: 0, active: 0, completed: 0, converted: 0, exited: 0, failed: 0 });
    expect((await get(`/api/workflows/${w.id}`, reader)).body.workflow.id).toBe(w.id);
    expect(
      (await get('/api/workflows?search=welcome&status=draft&orderBy=id&orderByDir=DESC', reader)).body.workflows.map((x: { id: number }) => x.id),
    ).toContain(w.id);
    expect((await post('/api/workflows/search', { search: 'welcome', limit: 5 }, reader)).status).toBe(200);
    expect((await patch(`/api/workflows/${w.id}/edit`, { name: 'Welcome 2' })).body.workflow.name).toBe('Welcome 2');
    expectError(await patch(`/api/workflows/${w.id}`, { name: 'x' }, reader), 403, 'forbidden');
    const replaced = await app.http
      .put(`/api/workflows/${w.id}`)
      .set('Authorization', auth)
      .send({ name: 'Replaced', trigger: { type: 'manual' }, steps: [{ key: 'end', type: 'exit' }] });
    expect(replaced.status).toBe(200);
    expect(replaced.body.workflow.description).toBeNull();
    const fresh = await app.http
      .put('/api/workflows/987654')
      .set('Authorization', auth)
      .send({ name: 'New', trigger: { type: 'manual' }, steps: [{ key: 'e', type: 'exit' }] });
    expect(fresh.status).toBe(201);
    expectError(await del(`/api/workflows/${w.id}`, reader), 403, 'forbidden');
    expect((await del(`/api/workflows/${w.id}/delete`)).body.workflow.id).toBe(w.id);
    expect((await del(`/api/workflows/${fresh.body.workflow.id}`)).status).toBe(200);
    expectError(await get(`/api/workflows/${w.id}`), 404, 'not_found');
    const types = (await feedSince(app, auth, head, 'workflow.created,workflow.updated,workflow.deleted')).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['workflow.created', 'workflow.updated', 'workflow.deleted']));
  });

  it('answers a 400 naming the step key and field', async () => {
    const bad = await post('/api/workflows', { name: 'bad', trigger: { type: 'manual' }, steps: [{ key: 'a', type: 'wait', duration: '1d', next: 'ghost' }] });
    expectError(bad, 400, 'validation_failed');
    expect(bad.body.error.details[0]).toMatchObject({ field: 'steps.0.next', stepKey: 'a' });
    const points = await post('/api/workflows', { name: 'p', trigger: { type: 'manual' }, steps: [{ key: 'p', type: 'add_points', points: 0 }] });
    expectError(points, 400, 'validation_failed');
    expect(points.body.error.details[0]).toMatchObject({ field: 'steps.0.points', stepKey: 'p' });
    const url = await post('/api/workflows', { name: 'u', trigger: { type: 'manual' }, steps: [{ key: 'h', type: 'webhook', url: 'ftp://x' }] });
    expect(url.body.error.details[0]).toMatchObject({ field: 'steps.0.url', stepKey: 'h' });
    const merge = await post('/api/workflows', {
      name: 'm',
      trigger: { type: 'manual' },
      steps: [{ key: 'h', type: 'webhook', url: receiver.url, payload: { a: ['{{contact.nope}}'] } }],
    });
    expect(merge.body.error.details[0]).toMatchObject({ field: 'steps.0.payload.a.0', stepKey: 'h' });
    const tz = await post('/api/workflows', {
      name: 'tz',
      trigger: { type: 'manual' },
      steps: [{ key: 'e', type: 'exit' }],
      settings: { timezone: 'Moon/Base' },
    });
    expect(tz.body.error.details[0].field).toBe('settings.timezone');
  });

  it('sends an SMS once through the gateway and a webhook verified by the standardwebhooks library, then completes', async () => {
    const hook = await post('/api/webhooks', { url: receiver.url, events: ['workflow.completed'] });
    expect(hook.status).toBe(201);
    const secret = hook.body.webhook.secret as string;
    const phone = `+1415555${String(1000 + (Date.now() % 9000)).slice(0, 4)}`;
    const c = await createContact(app, auth, { name: 'Ann', email: uniqueEmail(), phone });
    const w = await workflow({
      steps: [
        { key: 'sms', type: 'send_sms', body: 'Hello {{contact.name}}', next: 'call' },
        { key: 'call', type: 'webhook', webhookId: hook.body.webhook.id, payload: { kind: 'welcome' } },
      ],
    });
    expect((await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] })).body.enrolled).toBe(1);
    const [e] = await waitFor('completed', w.id, (l) => l[0]?.status === 'completed');
    await waitUntil('the SMS', async () => gateway.requests.some((r) => r.body.to === phone), 15000);
    const hookCall = await waitUntil('the webhook call', async () => receiver.got.find((g) => g.body.includes('"workflow.webhook"')), 15000);
    const payload = new StandardWebhook(secret).verify(hookCall.body, hookCall.headers as Record<string, string>) as { data: Record<string, unknown> };
    expect(payload.data).toMatchObject({ workflowId: w.id, enrollmentId: e.id, stepKey: 'call', payload: { kind: 'welcome' } });
    expect(gateway.requests.filter((r) => r.body.to === phone).map((r) => r.body.body)).toEqual(['Hello Ann']);
    expect(receiver.got.filter((g) => g.body.includes('"workflow.webhook"'))).toHaveLength(1);
    const detail = (await get(`/api/workflows/${w.id}/enrollments/${e.id}`)).body.enrollment as Enrollment;
    // The webhook step waited for its delivery's outcome (two runs: the call, then the 2xx).
    expect(detail.history?.map((h) => h.stepKey)).toEqual(['sms', 'call', 'call']);
  });

  it('adds points once per step run, in the ledger with source workflow', async () => {
    const c = await createContact(app, auth, { name: 'Points', email: uniqueEmail() });
    const w = await workflow({
      steps: [
        { key: 'warm', type: 'add_points', points: 15, reason: 'welcome', next: 'more' },
        { key: 'more', type: 'add_points', points: -5 },
      ],
    });
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] });
    const [e] = await waitFor('completed', w.id, (l) => l[0]?.status === 'completed');
    expect((await get(`/api/contacts/${c}`)).body.contact.points).toBe(10);
    const ledger = (await get(`/api/contacts/${c}/points/history?orderBy=id&orderByDir=asc`)).body.pointChanges as Record<string, unknown>[];
    expect(ledger).toHaveLength(2);
    expect(ledger[0]).toMatchObject({ delta: 15, reason: 'welcome', source: 'workflow', details: { workflowId: w.id, enrollmentId: e.id, stepKey: 'warm' } });
    expect(ledger[1]).toMatchObject({ delta: -5, source: 'workflow', details: { enrollmentId: e.id, stepKey: 'more' } });
  });

  it('calls a webhook step given by URL: its own subscription, a payload template, signed (standardwebhooks), once per step run', async () => {
    const phone = `+1415556${String(1000 + (Date.now() % 9000)).slice(0, 4)}`;
    const c = await createContact(app, auth, { name: 'Url', email: uniqueEmail(), phone });
    const w = await workflow({
      steps: [
        { key: 'first', type: 'webhook', url: receiver.url, payload: { hello: 'Hi {{contact.name}}', n: 1, list: ['{{contact.email}}'] }, next: 'second' },
        { key: 'second', type: 'webhook', url: receiver.url, payload: { step: 2 } },
      ],
    });
    const saved = (await get(`/api/workflows/${w.id}`)).body.workflow as { steps: { webhookId?: number; url?: string }[] };
    const firstHookId = saved.steps[0].webhookId as number;
    expect(firstHookId).toEqual(expect.any(Number));
    expect(saved.steps[1].webhookId).toBe(firstHookId);
    // Saving the steps with another URL, four times at once: one new subscription, which every answer names.
    const steps = (to: string) => [
      { key: 'first', type: 'webhook', url: to, payload: { hello: 'Hi {{contact.name}}', n: 1, list: ['{{contact.email}}'] }, next: 'second' },
      { key: 'second', type: 'webhook', url: to, payload: { step: 2 } },
    ];
    const moved = await Promise.all(Array.from({ length: 4 }, () => patch(`/api/workflows/${w.id}`, { steps: steps(`${receiver.url}/v2`) })));
    expect(moved.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const ids = new Set(moved.flatMap((r) => r.body.workflow.steps.map((s: { webhookId: number }) => s.webhookId)));
    expect(ids.size).toBe(1);
    const hookId = [...ids][0] as number;
    expect(hookId).not.toBe(firstHookId);
    // Saving the same steps again (URL only, no webhookId) keeps the subscription.
    const again = await patch(`/api/workflows/${w.id}`, { steps: steps(`${receiver.url}/v2`) });
    expect(again.status).toBe(200);
    expect(again.body.workflow.steps.map((s: { webhookId: number }) => s.webhookId)).toEqual([hookId, hookId]);
    const hook = (await get(`/api/webhooks/${hookId}`)).body.webhook;
    expect(hook).toMatchObject({ url: `${receiver.url}/v2`, events: [] });
    const secret = (await post(`/api/webhooks/${hookId}/rotate-secret`, {})).body.webhook.secret as string;
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] });
    const [e] = await waitFor('completed', w.id, (l) => l[0]?.status === 'completed');
    const mine = () => receiver.got.filter((g) => g.body.includes('"workflow.webhook"') && g.body.includes(`"enrollmentId":${e.id},`));
    await waitUntil('both calls', async () => mine().length >= 2, 15000);
    const verified = mine().map(
      (g) => new StandardWebhook(secret).verify(g.body, g.headers as Record<string, string>) as { id: string; data: Record<string, unknown> },
    );
    const first = verified.find((v) => v.data.stepKey === 'first');
    expect(first?.data.payload).toEqual({ hello: 'Hi Url', n: 1, list: [expect.stringContaining('@')] });
    expect(verified.find((v) => v.data.stepKey === 'second')?.data.payload).toEqual({ step: 2 });
    expect(new Set(verified.map((v) => v.id)).size).toBe(2);
    // Each step run is one delivery (its Webhook-Id stable), logged on the subscription.
    const logged = await waitUntil(
      'both deliveries recorded',
      async () => {
        const deliveries = (await get(`/api/webhooks/${hookId}/deliveries`)).body.deliveries as { eventId: string; status: string }[];
        const ours = deliveries.filter((d) => verified.some((v) => v.id === d.eventId));
        return ours.length === 2 && ours.every((d) => d.status === 'succeeded') ? ours : null;
      },
      15000,
    );
    expect(logged).toHaveLength(2);
    expect(mine()).toHaveLength(2);
  });

  it('waits on the test clock, then runs the next step', async () => {
    const c = await createContact(app, auth, { name: 'Wait', email: uniqueEmail() });
    const w = await workflow({
      steps: [
        { key: 'wait', type: 'wait', duration: '1d', next: 'mark' },
        { key: 'mark', type: 'update_contact', set: { title: 'waited' } },
      ],
    });
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] });
    await waitFor('waiting', w.id, (l) => l[0]?.status === 'waiting');
    clock.travel(86_400_000 + 1000);
    await waitFor('completed after the wait', w.id, (l) => l[0]?.status === 'completed');
    expect((await get(`/api/contacts/${c}`)).body.contact.title).toBe('waited');
  });

  it('enrols on a record event (changed names, filter) within seconds', async () => {
    const w = await workflow({
      trigger: { type: 'record_event', event: 'contact.updated', changed: ['title'], filter: 'title[eq]:Hot' },
      steps: [{ key: 'wait', type: 'wait', duration: '30d' }],
    });
    const hot = await createContact(app, auth, { name: 'Hot', email: uniqueEmail() });
    const cold = await createContact(app, auth, { name: 'Cold', email: uniqueEmail() });
    await patch(`/api/contacts/${hot}`, { title: 'Hot' });
    await patch(`/api/contacts/${cold}`, { title: 'Cold' });
    const started = Date.now();
    const list = await waitFor('the hot contact enrolled', w.id, (l) => l.some((e) => e.contactId === hot), 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(list.map((e) => e.contactId)).toEqual([hot]);
  });

  it('enrols a segment’s members on activation and the contacts that join or leave it', async () => {
    const seg = (await post('/api/segments', { name: `wf static ${++seq}`, type: 'static' })).body.segment;
    const [a, b] = [await createContact(app, auth, { name: 'A', email: uniqueEmail() }), await createContact(app, auth, { name: 'B', email: uniqueEmail() })];
    await post(`/api/segments/${seg.id}/contacts/batch`, { add: [a] });
    const entered = await workflow({ trigger: { type: 'segment_entered', segmentId: seg.id }, steps: [{ key: 'wait', type: 'wait', duration: '30d' }] });
    const exited = await workflow({ trigger: { type: 'segment_exited', segmentId: seg.id }, steps: [{ key: 'wait', type: 'wait', duration: '30d' }] });
    expect((await enrollmentsOf(entered.id)).map((e) => e.contactId)).toEqual([a]);
    await post(`/api/segments/${seg.id}/contacts/batch`, { add: [b] });
    expect((await enrollmentsOf(entered.id)).map((e) => e.contactId).sort()).toEqual([a, b].sort());
    await post(`/api/segments/${seg.id}/contacts/batch`, { remove: [a] });
    expect((await enrollmentsOf(exited.id)).map((e) => e.contactId)).toEqual([a]);
    const none = await workflow({ trigger: { type: 'segment_entered', segmentId: seg.id, enrollExisting: false }, steps: [{ key: 'e', type: 'exit' }] });
    expect(await enrollmentsOf(none.id)).toEqual([]);
  });

  it('enrols a segment’s members at each schedule tick', async () => {
    const seg = (await post('/api/segments', { name: `wf sched ${++seq}`, type: 'static' })).body.segment;
    const c = await createContact(app, auth, { name: 'S', email: uniqueEmail() });
    await post(`/api/segments/${seg.id}/contacts/batch`, { add: [c] });
    const w = await workflow({
      trigger: { type: 'schedule', cron: '0 9 * * *', segmentId: seg.id },
      settings: { timezone: 'Europe/Paris', reenrollment: 'afterExit' },
      steps: [{ key: 'e', type: 'exit' }],
    });
    expect(await enrollmentsOf(w.id)).toEqual([]);
    clock.travel(86_400_000 + 1000);
    await waitFor('the tick enrolled the member', w.id, (l) => l.length === 1 && l[0].contactId === c);
  });

  it('branches on a custom field, converts on a goal, and dry-runs the path with no effect', async () => {
    expect((await post('/api/fields/contact/new', { label: 'Tier', alias: 'wftier', type: 'text' })).status).toBe(201);
    const gold = await createContact(app, auth, { name: 'Gold', email: uniqueEmail(), fields: { wftier: 'gold' } });
    const w = await workflow({
      steps: [
        { key: 'check', type: 'branch', branches: [{ filter: 'fields.wftier[eq]:gold', next: 'vip' }], defaultNext: 'later' },
        { key: 'vip', type: 'update_contact', set: { title: 'VIP' }, next: 'later' },
        { key: 'later', type: 'wait', duration: '7d', next: 'nudge' },
        { key: 'nudge', type: 'update_contact', set: { title: 'nudged' } },
        { key: 'won', type: 'goal', filter: 'title[eq]:Customer' },
      ],
    });
    const dry = await post(`/api/workflows/${w.id}/dry-run`, { contactId: gold });
    expect(dry.status).toBe(200);
    expect(dry.body.path.map((p: { key: string }) => p.key)).toEqual(['check', 'vip', 'later', 'nudge']);
    expect(dry.body.path[0].decision).toContain('branch 0');
    expect(dry.body.path[2].dueAt).toBeTruthy();
    expect((await get(`/api/contacts/${gold}`)).body.contact.title).toBeNull();
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [gold] });
    await waitFor('waiting', w.id, (l) => l[0]?.status === 'waiting');
    expect((await get(`/api/contacts/${gold}`)).body.contact.title).toBe('VIP');
    await patch(`/api/contacts/${gold}`, { title: 'Customer' });
    await waitFor('converted', w.id, (l) => l[0]?.status === 'converted');
    const stats = (await get(`/api/workflows/${w.id}/stats`)).body;
    expect(stats).toMatchObject({ entered: 1, converted: 1, conversionRate: 1 });
    expect((await get(`/api/contacts/${gold}/workflows`)).body.workflows.map((x: { workflowId: number }) => x.workflowId)).toContain(w.id);
  });

  it('keeps enrollments on their version and migrates them; DELETE exits one; deleting needs force while some run', async () => {
    const [a, b] = [await createContact(app, auth, { name: 'V1', email: uniqueEmail() }), await createContact(app, auth, { name: 'V2', email: uniqueEmail() })];
    const w = await workflow({ steps: [{ key: 'w1', type: 'wait', duration: '3d' }] });
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [a, b] });
    await waitFor('both waiting', w.id, (l) => l.length === 2 && l.every((e) => e.status === 'waiting'));
    const v2 = await patch(`/api/workflows/${w.id}`, { steps: [{ key: 'w2', type: 'wait', duration: '3d' }] });
    expect(v2.body.workflow.version).toBe(2);
    expectError(await post(`/api/workflows/${w.id}/migrate`, { fromVersion: 1 }), 400, 'validation_failed');
    expect((await post(`/api/workflows/${w.id}/migrate`, { fromVersion: 1, map: { w1: 'w2' } })).body).toEqual({ migrated: 2, fromVersion: 1, toVersion: 2 });
    const list = await enrollmentsOf(w.id);
    expect(list.every((e) => e.version === 2 && e.stepKey === 'w2')).toBe(true);
    const first = await get(`/api/workflows/${w.id}/enrollments?limit=1&after=`);
    expect(first.body.enrollments).toHaveLength(1);
    const second = await get(`/api/workflows/${w.id}/enrollments?limit=1&after=${encodeURIComponent(first.body.next as string)}`);
    expect(second.body.enrollments[0].id).not.toBe(first.body.enrollments[0].id);
    expect((await del(`/api/workflows/${w.id}/enrollments/${list[0].id}`)).body.enrollment.status).toBe('exited');
    expectError(await del(`/api/workflows/${w.id}/enrollments/${list[0].id}`), 409, 'conflict');
    expectError(await del(`/api/workflows/${w.id}`), 409, 'conflict');
    expect((await del(`/api/workflows/${w.id}?force=true`)).status).toBe(200);
  });

  it('enrols one contact once under parallel enrolments; the others get a 409 naming the enrollment', async () => {
    const c = await createContact(app, auth, { name: 'Race', email: uniqueEmail() });
    const w = await workflow({ steps: [{ key: 'wait', type: 'wait', duration: '30d' }] });
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] })));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    const refused = answers.filter((r) => r.status === 409);
    expect(refused).toHaveLength(7);
    const list = await enrollmentsOf(w.id);
    expect(list).toHaveLength(1);
    expect(refused[0].body.error.details[0]).toMatchObject({ contactId: c, enrollmentId: list[0].id });
  });

  // The tracked events go through the real intake (the token as the write key); the tests below move the clock (run last).
  const track = (userId: string, event: string, properties: Record<string, unknown>) =>
    app.http
      .post('/api/ingest/v1/track')
      .set('Authorization', `Basic ${Buffer.from(`${auth.slice('Bearer '.length)}:`).toString('base64')}`)
      .send({ userId, event, properties });
  const trackedContact = async (name: string) => {
    const externalId = `wf-${name}-${++seq}-${Date.now()}`;
    return { id: await createContact(app, auth, { name, email: uniqueEmail(), externalId }), externalId };
  };
  const history = async (workflowId: number, id: number) =>
    (await get(`/api/workflows/${workflowId}/enrollments/${id}`)).body.enrollment.history as {
      stepKey: string;
      outcome: string;
      detail: Record<string, unknown>;
    }[];

  it('enrols on a tracked event whose properties match the filter, within seconds, once', async () => {
    const name = `Demo Requested ${seq}`;
    const w = await workflow({
      trigger: { type: 'tracked_event', name, filter: 'properties.seats[gte]:5' },
      steps: [{ key: 'tag', type: 'update_contact', set: { title: 'Demo' } }],
    });
    const big = await trackedContact('Big');
    const small = await trackedContact('Small');
    expect((await track(big.externalId, name, { seats: 10 })).status).toBe(200);
    expect((await track(small.externalId, name, { seats: 2 })).status).toBe(200);
    expect((await track(big.externalId, 'Other Event', { seats: 10 })).status).toBe(200);
    const [e] = await waitFor('the enrollment', w.id, (l) => l.length > 0 && l[0].status === 'completed', 5000);
    expect(e.contactId).toBe(big.id);
    expect((await get(`/api/contacts/${big.id}`)).body.contact.title).toBe('Demo');
    // A second matching event: reenrollment never, nothing more; the small contact's event a second time still does not match.
    expect((await track(big.externalId, name, { seats: 7 })).status).toBe(200);
    expect((await track(small.externalId, name, { seats: 1 })).status).toBe(200);
    const marker = await trackedContact('Marker');
    expect((await track(marker.externalId, name, { seats: 5 })).status).toBe(200);
    const all = await waitFor('the marker enrolled after the others', w.id, (l) => l.some((x) => x.contactId === marker.id));
    expect(all.map((x) => x.contactId).sort()).toEqual([big.id, marker.id].sort());
    const bad = await post('/api/workflows', {
      name: 'bad',
      trigger: { type: 'tracked_event', name, filter: 'title[eq]:x' },
      steps: [{ key: 'e', type: 'exit' }],
    });
    expectError(bad, 400, 'validation_failed');
    expect(bad.body.error.details[0].field).toBe('trigger.filter');
  });

  it('waits for a change event of the contact (not one from before the wait), or takes timeoutNext after the timeout', async () => {
    const w = await workflow({
      steps: [
        { key: 'ask', type: 'update_contact', set: { title: 'Asked' }, next: 'w' },
        { key: 'w', type: 'wait', untilEvent: { record: 'contact.updated' }, timeout: '2d', next: 'done', timeoutNext: 'late' },
        { key: 'done', type: 'add_points', points: 3 },
        { key: 'late', type: 'exit' },
      ],
    });
    const answers = await createContact(app, auth, { name: 'Answers', email: uniqueEmail() });
    const silent = await createContact(app, auth, { name: 'Silent', email: uniqueEmail() });
    const head = await feedHead(app, auth);
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [answers, silent] });
    await waitFor('both waiting', w.id, (l) => l.length === 2 && l.every((x) => x.status === 'waiting'));
    // Each contact's own contact.updated (the step's) is in the feed before its wait began: it wakes neither of them,
    // whenever the follower reads it; the answer, later in the feed, wakes only its contact.
    expect((await patch(`/api/contacts/${answers}`, { title: 'Answered' })).status).toBe(200);
    const done = await waitFor('the one that answered', w.id, (l) => l.some((x) => x.contactId === answers && x.status === 'completed'));
    expect(done.find((x) => x.contactId === silent)?.status).toBe('waiting');
    const e = done.find((x) => x.contactId === answers) as Enrollment;
    const updates = (await feedSince(app, auth, head, 'contact.updated')).filter((x) => x.data.id === answers) as unknown as { id: string }[];
    expect(updates).toHaveLength(2);
    const woke = (await history(w.id, e.id)).find((h) => h.stepKey === 'w' && h.outcome === 'completed');
    expect(woke?.detail.event).toMatchObject({ source: 'record', type: 'contact.updated', eventId: updates[1].id });
    expect((await get(`/api/contacts/${answers}`)).body.contact.points).toBe(3);
    clock.travel(2 * 86_400_000 + 1000);
    const late = await waitFor('the timeout', w.id, (l) => l.find((x) => x.contactId === silent)?.status === 'exited');
    const s = late.find((x) => x.contactId === silent) as Enrollment;
    expect((await history(w.id, s.id)).map((h) => [h.stepKey, h.outcome])).toEqual([
      ['ask', 'completed'],
      ['w', 'waiting'],
      ['w', 'completed'],
      ['late', 'exited'],
    ]);
  });

  it('waits for a tracked event whose properties match, through the intake; the timeout otherwise', async () => {
    const name = `Checkout ${seq}`;
    const w = await workflow({
      steps: [
        {
          key: 'w',
          type: 'wait',
          untilEvent: { tracked: name, filter: 'properties.total[gt]:0' },
          timeout: '3d',
          next: 'thanks',
          timeoutNext: 'nudge',
        },
        { key: 'thanks', type: 'update_contact', set: { title: 'Bought' } },
        { key: 'nudge', type: 'update_contact', set: { title: 'Nudged' } },
      ],
    });
    const buyer = await trackedContact('Buyer');
    const browser = await trackedContact('Browser');
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [buyer.id, browser.id] });
    await waitFor('both waiting', w.id, (l) => l.length === 2 && l.every((x) => x.status === 'waiting'));
    expect((await track(browser.externalId, name, { total: 0 })).status).toBe(200);
    expect((await track(buyer.externalId, name, { total: 49.5 })).status).toBe(200);
    const after = await waitFor('the buyer woken', w.id, (l) => l.some((x) => x.contactId === buyer.id && x.status === 'completed'), 5000);
    expect(after.find((x) => x.contactId === browser.id)?.status).toBe('waiting');
    expect((await get(`/api/contacts/${buyer.id}`)).body.contact.title).toBe('Bought');
    const e = after.find((x) => x.contactId === buyer.id) as Enrollment;
    expect((await history(w.id, e.id)).find((h) => h.stepKey === 'w' && h.outcome === 'completed')?.detail.event).toMatchObject({
      source: 'tracked',
      name,
      properties: { total: 49.5 },
    });
    clock.travel(3 * 86_400_000 + 1000);
    await waitFor('the timeout', w.id, (l) => l.find((x) => x.contactId === browser.id)?.status === 'completed');
    expect((await get(`/api/contacts/${browser.id}`)).body.contact.title).toBe('Nudged');
  });
});

describe('workflows in the embedded mode (PGlite, no Redis)', () => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    app = await startApp({ embedded: true, env: { WORKFLOW_POLL_INTERVAL_MS: '200' } });
    auth = await adminToken(app);
  }, 180000);
  afterAll(async () => app?.stop());

  it('enrols, runs the steps and completes, as with PostgreSQL', async () => {
    const contact = await createContact(app, auth, { name: 'Embedded', email: uniqueEmail() });
    const created = await app.http
      .post('/api/workflows')
      .set('Authorization', auth)
      .send({
        name: 'Embedded',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'check', type: 'branch', branches: [{ filter: 'name[eq]:Embedded', next: 'mark' }] },
          { key: 'mark', type: 'update_contact', set: { title: 'embedded' } },
        ],
      });
    expect(created.status).toBe(201);
    const id = created.body.workflow.id as number;
    expect(
      (
        await app.http
          .post(`/api/workflows/${id}/enrollments`)
          .set('Authorization', auth)
          .send({ contactIds: [contact] })
      ).body.enrolled,
    ).toBe(1);
    await waitUntil(
      'completed',
      async () => {
        const list = (await app.http.get(`/api/workflows/${id}/enrollments`).set('Authorization', auth)).body.enrollments as { status: string }[];
        return list[0]?.status === 'completed';
      },
      20000,
    );
    expect((await app.http.get(`/api/contacts/${contact}`).set('Authorization', auth)).body.contact.title).toBe('embedded');
  });
});
