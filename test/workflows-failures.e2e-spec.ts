/**
 * A failing step fails its enrollment, over HTTP against the built app (API and worker in one
 * process): a webhook step waits at its step until its delivery settles (status waiting, the history
 * naming the delivery), a 4xx from the target fails the enrollment with the status and the start of
 * the answer (no later step runs), counted in stats, once on the change feed and the contact's
 * timeline, while the workflow's other enrollments complete; a 503 then a 200 completes it once
 * (one delivery, retried, one success); redeliveries of the failed call in parallel, refused again or
 * then accepted, change nothing (no second failure, no resurrection). Every call is verified with
 * the standardwebhooks library. An SMS to an invalid number fails its enrollment the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { startApp, type TestApp } from './support/app.js';
import { adminToken, createContact, feedHead, feedSince, uniqueEmail } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

interface Enrollment {
  id: number;
  status: string;
  stepKey: string | null;
  contactId: number;
  error: string | null;
  history?: { stepKey: string; stepType: string; outcome: string; detail: Record<string, unknown> | null }[];
}

type Answer = { status: number; body?: string; headers?: Record<string, string> } | 'hold';

/** A webhook receiver answering by script, per the payload's `who` (default 200), recording every request. */
class Receiver {
  readonly got: { headers: IncomingMessage['headers']; body: string; who: string }[] = [];
  readonly scripts = new Map<string, Answer[]>();
  private held: ServerResponse[] = [];
  private server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let who = '';
      try {
        who = (JSON.parse(body) as { data?: { payload?: { who?: string } } }).data?.payload?.who ?? '';
      } catch {
        // not ours
      }
      this.got.push({ headers: req.headers, body, who });
      const a = this.scripts.get(who)?.shift() ?? { status: 200, body: 'ok' };
      if (a === 'hold') this.held.push(res);
      else res.writeHead(a.status, a.headers ?? {}).end(a.body ?? '');
    });
  });
  url = '';
  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }
  release(status = 200): void {
    for (const res of this.held.splice(0)) res.writeHead(status).end('released');
  }
  of(who: string) {
    return this.got.filter((g) => g.who === who);
  }
  close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('workflows: a failing step fails its enrollment', () => {
  let app: TestApp;
  let auth: string;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    app = await startApp({
      env: {
        WORKFLOW_POLL_INTERVAL_MS: '200',
        SMS_PROVIDER: 'log',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_DISPATCH_INTERVAL_MS: '100',
        WEBHOOK_RETRY_FIRST_DELAY_MS: '200',
      },
    });
    auth = await adminToken(app);
  }, 120000);
  afterAll(async () => {
    await app?.stop();
    await receiver?.close();
  });

  const post = (path: string, body: object) => app.http.post(path).set('Authorization', auth).send(body);
  const get = (path: string) => app.http.get(path).set('Authorization', auth);
  let seq = 0;
  const enrollmentsOf = async (workflowId: number): Promise<Enrollment[]> =>
    (await get(`/api/workflows/${workflowId}/enrollments?limit=200&orderBy=id`)).body.enrollments;
  const detailOf = async (workflowId: number, id: number): Promise<Enrollment> => (await get(`/api/workflows/${workflowId}/enrollments/${id}`)).body.enrollment;
  const waitFor = (what: string, workflowId: number, pred: (e: Enrollment[]) => boolean, ms = 20000) =>
    waitUntil(
      what,
      async () => {
        const list = await enrollmentsOf(workflowId);
        return pred(list) ? list : null;
      },
      ms,
    );
  /** A workflow calling the receiver (payload { who: contact name }), then marking the contact: the mark shows whether a later step ran. */
  const callingWorkflow = async () => {
    const r = await post('/api/workflows', {
      name: `calls ${++seq}`,
      status: 'active',
      trigger: { type: 'manual' },
      steps: [
        { key: 'call', type: 'webhook', url: `${receiver.url}/${seq}`, payload: { who: '{{contact.name}}' }, next: 'mark' },
        { key: 'mark', type: 'update_contact', set: { title: 'after the call' } },
      ],
    });
    expect(r.status).toBe(201);
    const w = r.body.workflow as { id: number; steps: { webhookId: number }[] };
    const hookId = w.steps[0].webhookId;
    const secret = (await post(`/api/webhooks/${hookId}/rotate-secret`, {})).body.webhook.secret as string;
    return { id: w.id, hookId, secret };
  };
  const person = (tag: string) => `${tag}-${Date.now()}-${++seq}`;
  const verify = (secret: string, g: { headers: IncomingMessage['headers']; body: string }) =>
    new StandardWebhook(secret).verify(g.body, g.headers as Record<string, string>) as { id: string; type: string; data: Record<string, unknown> };
  const deliveriesOf = async (hookId: number) =>
    (await get(`/api/webhooks/${hookId}/deliveries?limit=100`)).body.deliveries as { id: number; eventId: string; status: string; attemptCount: number }[];

  it('a 400 from the target fails the enrollment with the error, once, counted in stats; the other enrollments complete', async () => {
    const w = await callingWorkflow();
    const bad = person('refused');
    receiver.scripts.set(bad, [{ status: 400, body: '{"error":"unknown customer"}' }]);
    const okNames = [person('ok'), person('ok')];
    const badId = await createContact(app, auth, { name: bad, email: uniqueEmail() });
    const okIds = [];
    for (const n of okNames) okIds.push(await createContact(app, auth, { name: n, email: uniqueEmail() }));
    const head = await feedHead(app, auth);
    expect((await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [badId, ...okIds] })).body.enrolled).toBe(3);
    const list = await waitFor(
      'one failed, two completed',
      w.id,
      (l) => l.filter((e) => e.status === 'failed').length === 1 && l.filter((e) => e.status === 'completed').length === 2,
    );
    const failed = list.find((e) => e.status === 'failed') as Enrollment;
    expect(failed).toMatchObject({ contactId: badId, stepKey: 'call' });
    expect(failed.error).toContain('HTTP 400');
    expect(failed.error).toContain('unknown customer');
    // It waited at the call, then failed there; the later step never ran for it.
    const detail = await detailOf(w.id, failed.id);
    expect(detail.history?.map((h) => [h.stepKey, h.outcome])).toEqual([
      ['call', 'waiting'],
      ['call', 'failed'],
    ]);
    expect(detail.history?.[0].detail).toMatchObject({ reason: expect.stringContaining('webhook delivery') as unknown, webhookId: w.hookId });
    expect((await get(`/api/contacts/${badId}`)).body.contact.title).not.toBe('after the call');
    for (const id of okIds) expect((await get(`/api/contacts/${id}`)).body.contact.title).toBe('after the call');
    // The call was signed (standardwebhooks) and made once; the delivery is dead.
    const calls = receiver.of(bad);
    expect(calls).toHaveLength(1);
    const payload = verify(w.secret, calls[0]);
    expect(payload).toMatchObject({ type: 'workflow.webhook', data: { enrollmentId: failed.id, stepKey: 'call' } });
    const delivery = (await deliveriesOf(w.hookId)).find((d) => d.eventId === payload.id);
    expect(delivery).toMatchObject({ status: 'dead', attemptCount: 1 });
    // Stats count it, at the step where it failed.
    const stats = (await get(`/api/workflows/${w.id}/stats`)).body;
    expect(stats).toMatchObject({ entered: 3, completed: 2, failed: 1, active: 0 });
    expect(stats.steps).toEqual([
      { key: 'call', type: 'webhook', waiting: 0, completed: 2, failed: 1 },
      { key: 'mark', type: 'update_contact', waiting: 0, completed: 2, failed: 0 },
    ]);
    // One workflow.failed event on the feed, and on the contact's timeline.
    const events = await waitUntil(
      'the events numbered',
      async () => {
        const ev = await feedSince(app, auth, head, 'workflow.failed,workflow.completed');
        return ev.length >= 3 ? ev : null;
      },
      10000,
    );
    const failedEvents = events.filter((e) => e.type === 'workflow.failed');
    expect(failedEvents).toHaveLength(1);
    expect(failedEvents[0].data).toMatchObject({ id: failed.id, status: 'failed', contactId: badId, error: failed.error });
    expect(events.filter((e) => e.type === 'workflow.completed')).toHaveLength(2);
    const timeline = await waitUntil(
      'the failure on the timeline',
      async () => {
        const r = await get(`/api/contacts/${badId}/timeline?types=workflow.failed`);
        expect(r.status).toBe(200);
        const items = (r.body as { items: { kind: string; type: string }[] }).items;
        return items.length ? items : null;
      },
      10000,
    );
    expect(timeline).toHaveLength(1);

    // Redeliveries of the failed call, four at once, refused again: the enrollment failed once.
    receiver.scripts.set(
      bad,
      Array.from({ length: 8 }, () => ({ status: 400, body: 'still unknown' })),
    );
    const retries = await Promise.all(Array.from({ length: 4 }, () => post(`/api/webhooks/${w.hookId}/deliveries/${delivery!.id}/retry`, {})));
    expect(retries.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    await waitUntil(
      'the redelivery to settle',
      async () => {
        const d = (await deliveriesOf(w.hookId)).find((x) => x.id === delivery!.id);
        return d && d.status === 'dead' && d.attemptCount >= 2 ? d : null;
      },
      15000,
    );
    // Then accepted: the enrollment stays failed (an outcome lands once), no later step runs.
    receiver.scripts.set(bad, []);
    expect((await post(`/api/webhooks/${w.hookId}/deliveries/${delivery!.id}/retry`, {})).status).toBe(200);
    await waitUntil(
      'the accepted redelivery',
      async () => (await deliveriesOf(w.hookId)).find((x) => x.id === delivery!.id && x.status === 'succeeded'),
      15000,
    );
    // A pass of the runner after the settling (its poll interval is 200 ms).
    await new Promise((r) => setTimeout(r, 1000));
    const after = await detailOf(w.id, failed.id);
    expect(after).toMatchObject({ status: 'failed', error: failed.error });
    expect(after.history?.map((h) => h.outcome)).toEqual(['waiting', 'failed']);
    expect((await get(`/api/contacts/${badId}`)).body.contact.title).not.toBe('after the call');
    const again = await feedSince(app, auth, head, 'workflow.failed,workflow.completed,workflow.step_completed');
    expect(again.filter((e) => e.type === 'workflow.failed')).toHaveLength(1);
    expect(
      again.filter((e) => (e.data as { id?: number; enrollment?: { id: number } }).enrollment?.id === failed.id && e.type === 'workflow.step_completed'),
    ).toHaveLength(1);
    expect((await get(`/api/workflows/${w.id}/stats`)).body).toMatchObject({ completed: 2, failed: 1 });
  });

  it('waits at the call while the target holds it, retries a 503, and completes once on the 200', async () => {
    const w = await callingWorkflow();
    const name = person('flaky');
    receiver.scripts.set(name, ['hold']);
    const c = await createContact(app, auth, { name, email: uniqueEmail() });
    const head = await feedHead(app, auth);
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [c] });
    // Waiting at the call while the receiver has not answered: the next step has not run.
    const [e] = await waitFor('waiting at the call', w.id, (l) => l[0]?.status === 'waiting' && l[0].stepKey === 'call');
    await waitUntil('the held request', async () => receiver.of(name).length === 1, 10000);
    expect((await detailOf(w.id, e.id)).history?.map((h) => [h.stepKey, h.outcome])).toEqual([['call', 'waiting']]);
    expect((await get(`/api/contacts/${c}`)).body.contact.title).not.toBe('after the call');
    expect((await get(`/api/workflows/${w.id}/stats`)).body.steps[0]).toMatchObject({ key: 'call', waiting: 1, completed: 0 });
    // The held request answers 503 (retried), the retry gets 200.
    receiver.release(503);
    await waitFor('completed', w.id, (l) => l[0]?.status === 'completed');
    const calls = receiver.of(name);
    expect(calls).toHaveLength(2);
    const ids = calls.map((g) => verify(w.secret, g).id);
    expect(new Set(ids).size).toBe(1);
    const delivery = (await deliveriesOf(w.hookId)).find((d) => d.eventId === ids[0]);
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    const detail = await detailOf(w.id, e.id);
    expect(detail.history?.map((h) => [h.stepKey, h.outcome])).toEqual([
      ['call', 'waiting'],
      ['call', 'completed'],
      ['mark', 'completed'],
    ]);
    expect(detail.history?.[1].detail).toMatchObject({ delivered: true, status: 200, attempts: 2, webhookEventId: ids[0] });
    expect((await get(`/api/contacts/${c}`)).body.contact.title).toBe('after the call');
    const events = await waitUntil(
      'the event numbered',
      async () => {
        const ev = await feedSince(app, auth, head, 'workflow.completed,workflow.failed');
        return ev.length ? ev : null;
      },
      10000,
    );
    expect(events.filter((x) => (x.data as { id: number }).id === e.id).map((x) => x.type)).toEqual(['workflow.completed']);
    expect((await get(`/api/workflows/${w.id}/stats`)).body).toMatchObject({
      completed: 1,
      failed: 0,
      steps: [
        { key: 'call', waiting: 0, completed: 1, failed: 0 },
        { key: 'mark', waiting: 0, completed: 1, failed: 0 },
      ],
    });
  });

  it('an SMS to an invalid number fails its enrollment with the error; the others go on', async () => {
    const r = await post('/api/workflows', {
      name: `sms ${++seq}`,
      status: 'active',
      trigger: { type: 'manual' },
      steps: [
        { key: 'sms', type: 'send_sms', body: 'Hello {{contact.name}}', next: 'mark' },
        { key: 'mark', type: 'update_contact', set: { title: 'texted' } },
      ],
    });
    expect(r.status).toBe(201);
    const w = r.body.workflow as { id: number };
    const invalid = await createContact(app, auth, { name: 'Bad number', email: uniqueEmail(), phone: '12' });
    const valid = await createContact(app, auth, {
      name: 'Good number',
      email: uniqueEmail(),
      phone: `+1415557${String(1000 + (Date.now() % 9000)).slice(0, 4)}`,
    });
    const head = await feedHead(app, auth);
    await post(`/api/workflows/${w.id}/enrollments`, { contactIds: [invalid, valid] });
    const list = await waitFor('both ended', w.id, (l) => l.length === 2 && l.every((e) => e.status !== 'active' && e.status !== 'waiting'));
    const bad = list.find((e) => e.contactId === invalid) as Enrollment;
    expect(bad).toMatchObject({ status: 'failed', stepKey: 'sms' });
    expect(bad.error).toContain('no valid phone number');
    expect(list.find((e) => e.contactId === valid)?.status).toBe('completed');
    expect((await get(`/api/contacts/${invalid}`)).body.contact.title).not.toBe('texted');
    expect((await get(`/api/contacts/${valid}`)).body.contact.title).toBe('texted');
    expect((await get(`/api/workflows/${w.id}/stats`)).body).toMatchObject({
      failed: 1,
      completed: 1,
      steps: [
        { key: 'sms', failed: 1, completed: 1 },
        { key: 'mark', failed: 0, completed: 1 },
      ],
    });
    const events = await waitUntil(
      'the event numbered',
      async () => {
        const ev = await feedSince(app, auth, head, 'workflow.failed');
        return ev.length ? ev : null;
      },
      10000,
    );
    expect(events.map((e) => (e.data as { contactId: number }).contactId)).toEqual([invalid]);
  });
});
