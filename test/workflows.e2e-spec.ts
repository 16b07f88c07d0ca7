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

  it('answers a 400 naming the step key and field, and says which parts are not available yet', async () => {
    const bad = await post('/api/workflows', { name: 'bad', trigger: { type: 'manual' }, steps: [{ key: 'a', type: 'wait', duration: '1d', next: 'ghost' }] });
    expectError(bad, 400, 'validation_failed');
    expect(bad.body.error.details[0]).toMatchObject({ field: 'steps.0.next', stepKey: 'a' });
    const points = await post('/api/workflows', { name: 'p', trigger: { type: 'manual' }, steps: [{ key: 'p', type: 'add_points', points: 5 }] });
    expect(points.body.error.details[0].message).toContain('not available yet');
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
    expect(detail.history?.map((h) => h.stepKey)).toEqual(['sms', 'call']);
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
