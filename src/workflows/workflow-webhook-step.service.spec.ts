import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { WebhookDeliveriesService } from '../events/webhook-deliveries.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowRunner } from './workflow-runner.js';
import { WorkflowsService } from './workflows.service.js';

/**
 * The webhook step's outcomes the end-to-end suite cannot wait for, on the real database with a
 * local receiver answering 503: retries that run out of their 72 h window (the window moved back in
 * the row) fail the enrollment with the attempts and the last error; a webhook deleted while its
 * delivery is pending fails it too; a redelivery settling after the enrollment ended wakes nothing.
 * The drains and the runner's passes are the spec's own (long intervals).
 */
describe('the webhook step waits for its delivery (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let who: Principal;
  let server: Server;
  let url = '';
  let workflows: WorkflowsService;
  let enrolling: EnrollmentsService;
  let runner: WorkflowRunner;
  let deliveries: WebhookDeliveriesService;
  let webhooks: WebhooksService;
  let seq = 0;

  beforeAll(async () => {
    ctx = await startServiceContext({
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_FIRST_DELAY_MS: '600000',
      WEBHOOK_DISPATCH_INTERVAL_MS: '60000',
      WORKFLOW_POLL_INTERVAL_MS: '60000',
    });
    who = await ctx.principal();
    workflows = ctx.get(WorkflowsService);
    enrolling = ctx.get(EnrollmentsService);
    runner = ctx.get(WorkflowRunner);
    deliveries = ctx.get(WebhookDeliveriesService);
    webhooks = ctx.get(WebhooksService);
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(503).end('busy'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    await ctx?.close();
  });

  const state = async (workflowId: number) =>
    (
      await ctx.query<{ id: string; status: string; step_key: string; error: string | null }>(
        `SELECT id, status, step_key, error FROM workflow_enrollments WHERE workflow_id = $1`,
        [workflowId],
      )
    )[0];
  /** Runs due steps (the background loop, kicked by enrolments and wakes, may take some) until the enrollment is in `status`. */
  const runUntil = async (workflowId: number, status: string) => {
    for (let i = 0; i < 100; i++) {
      await runner.runDue();
      const e = await state(workflowId);
      if (e.status === status) return e;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the enrollment did not become ${status}`);
  };
  /** Drains the webhook (its queued drain job may be draining too) until the delivery is in `status` with `attempts` attempts. */
  const drainUntil = async (hookId: number, status: string, attempts: number) => {
    for (let i = 0; i < 100; i++) {
      await deliveries.drain(hookId);
      const [d] = await ctx.query<{ id: number; status: string; attempt_count: number }>(
        `SELECT id::int AS id, status, attempt_count FROM webhook_deliveries WHERE webhook_id = $1`,
        [hookId],
      );
      if (d.status === status && d.attempt_count === attempts) return d;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the delivery did not reach ${status} after ${attempts} attempts`);
  };
  /** A workflow calling the receiver then marking the contact, one contact enrolled and run to its wait at the call. */
  const waitingAtCall = async () => {
    const w = await workflows.create(
      {
        name: `hook ${++seq}`,
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'call', type: 'webhook', url: `${url}/${seq}`, next: 'mark' },
          { key: 'mark', type: 'update_contact', set: { title: 'called' } },
        ],
      },
      who,
    );
    const hookId = (w.steps[0] as { webhookId: number }).webhookId;
    const contactId = (await ctx.get(ContactsService).create({ name: 'Hook', email: `hook${seq}-${Date.now()}@svc.test` }, who)).id;
    await enrolling.enrolByHand(w.id, [contactId]);
    expect(await runUntil(w.id, 'waiting')).toMatchObject({ step_key: 'call' });
    return { workflowId: w.id, hookId, contactId };
  };

  it('fails the enrollment when the retries run out, with the attempts and the last error; a later redelivery changes nothing', async () => {
    const { workflowId, hookId, contactId } = await waitingAtCall();
    // 503: retried later; the enrollment still waits.
    const d = await drainUntil(hookId, 'failed', 1);
    await runner.runDue();
    expect(await state(workflowId)).toMatchObject({ status: 'waiting', step_key: 'call' });
    // The retry window ends before the next attempt: dead, and the enrollment fails.
    await ctx.query(`UPDATE webhook_deliveries SET window_started_at = now() - interval '72 hours', next_attempt_at = now() WHERE id = $1`, [d.id]);
    await drainUntil(hookId, 'dead', 2);
    const failed = await runUntil(workflowId, 'failed');
    expect(failed).toMatchObject({ status: 'failed', step_key: 'call' });
    expect(failed.error).toMatch(/^webhook call failed: no success after 2 attempts in the retry window \(last: .*503/);
    const contact = await ctx.get(ContactsService).get(contactId);
    expect(contact.title).not.toBe('called');
    const events = await ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'workflow.failed' AND (data->>'id')::bigint = $1`, [
      failed.id,
    ]);
    expect(events[0].n).toBe(1);
    // A redelivery (refused again) settles the delivery again: the ended enrollment is not touched.
    await webhooks.retryDelivery(hookId, d.id);
    await drainUntil(hookId, 'failed', 3);
    await ctx.query(`UPDATE webhook_deliveries SET window_started_at = now() - interval '72 hours', next_attempt_at = now() WHERE id = $1`, [d.id]);
    await drainUntil(hookId, 'dead', 4);
    await runner.runDue();
    expect(await state(workflowId)).toEqual(failed);
    const runs = await ctx.query<{ outcome: string }>(`SELECT outcome FROM workflow_step_runs WHERE enrollment_id = $1 ORDER BY seq`, [failed.id]);
    expect(runs.map((r) => r.outcome)).toEqual(['waiting', 'failed']);
  });

  it('fails the enrollment when its webhook is deleted while the delivery is pending', async () => {
    const { workflowId, hookId } = await waitingAtCall();
    await webhooks.remove(hookId);
    const failed = await runUntil(workflowId, 'failed');
    expect(failed).toMatchObject({ status: 'failed', step_key: 'call' });
    expect(failed.error).toContain(`its delivery is gone (webhook ${hookId} was deleted)`);
  });

  it('runs a batch of enrollments at the step together: one delivery each, and each outcome decides its own enrollment', async () => {
    const w = await workflows.create(
      {
        name: `hook ${++seq}`,
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'call', type: 'webhook', url: `${url}/${seq}`, payload: { hello: '{{contact.name}}' }, next: 'mark' },
          { key: 'mark', type: 'update_contact', set: { title: 'called' } },
        ],
      },
      who,
    );
    const hookId = (w.steps[0] as { webhookId: number }).webhookId;
    const contacts = ctx.get(ContactsService);
    const ids: number[] = [];
    for (const name of ['Ann', 'Bob', 'Cy']) ids.push((await contacts.create({ name, email: `${name}${seq}-${Date.now()}@svc.test` }, who)).id);
    await enrolling.enrolByHand(w.id, ids);
    const byContact = async () =>
      new Map(
        (
          await ctx.query<{ contact_id: number; status: string; step_key: string; error: string | null }>(
            `SELECT contact_id::int, status, step_key, error FROM workflow_enrollments WHERE workflow_id = $1`,
            [w.id],
          )
        ).map((r) => [r.contact_id, r]),
      );
    for (let i = 0; i < 100 && [...(await byContact()).values()].some((e) => e.status !== 'waiting'); i++) await runner.runDue();
    expect([...(await byContact()).values()].map((e) => [e.status, e.step_key])).toEqual([
      ['waiting', 'call'],
      ['waiting', 'call'],
      ['waiting', 'call'],
    ]);
    // One delivery per enrollment, its body rendered for its own contact.
    const rows = await ctx.query<{ event_id: string; body: string }>(`SELECT event_id, body FROM webhook_deliveries WHERE webhook_id = $1`, [hookId]);
    expect(rows).toHaveLength(3);
    const deliveryOf = new Map(rows.map((r) => [(JSON.parse(r.body) as { data: { contact: { id: number } } }).data.contact.id, r]));
    expect(ids.map((id) => (JSON.parse(deliveryOf.get(id)!.body) as { data: { payload: unknown } }).data.payload)).toEqual([
      { hello: 'Ann' },
      { hello: 'Bob' },
      { hello: 'Cy' },
    ]);
    // Each delivery attempted once (503: its retry is 10 minutes away), so no dispatch of the
    // background drain, kicked when they were queued, overwrites the outcomes set below.
    for (let i = 0; i < 100; i++) {
      await deliveries.drain(hookId);
      const [{ n }] = await ctx.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'failed' AND attempt_count = 1`,
        [hookId],
      );
      if (n === 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // Ann's delivery succeeded, Bob's died, Cy's is still pending; all three are woken at once.
    await ctx.query(`UPDATE webhook_deliveries SET status = 'succeeded', attempt_count = 1 WHERE event_id = $1`, [deliveryOf.get(ids[0])!.event_id]);
    await ctx.query(`UPDATE webhook_deliveries SET status = 'dead', attempt_count = 1, last_error = 'gave up' WHERE event_id = $1`, [
      deliveryOf.get(ids[1])!.event_id,
    ]);
    await ctx.query(`UPDATE workflow_enrollments SET next_at = now() WHERE workflow_id = $1`, [w.id]);
    // The spec's passes (a background pass may hold the batch: the next one finds what it did).
    let after = await byContact();
    for (let i = 0; i < 100 && (after.get(ids[0])?.status === 'waiting' || after.get(ids[1])?.status === 'waiting'); i++) {
      await runner.runDue();
      after = await byContact();
      if (after.get(ids[0])?.status === 'waiting') await new Promise((r) => setTimeout(r, 50));
    }
    expect(after.get(ids[0])).toMatchObject({ status: 'completed', step_key: 'mark' });
    expect(after.get(ids[1])).toMatchObject({ status: 'failed', step_key: 'call', error: 'webhook call failed: gave up' });
    expect(after.get(ids[2])).toMatchObject({ status: 'waiting', step_key: 'call' });
    expect((await contacts.get(ids[0])).title).toBe('called');
    expect((await contacts.get(ids[1])).title).not.toBe('called');
  });
});
