import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Principal } from '../common/request.js';
import { type ServiceContext, startServiceContext } from '../../test/support/service-testing.js';
import { waitUntil } from '../../test/support/wait.js';
import { LOST_ATTEMPT, WebhookDeliveriesService } from './webhook-deliveries.service.js';
import { WebhooksService } from './webhooks.service.js';

const FIRST_DELAY_MS = 600_000;
/** WEBHOOK_TIMEOUT_MS below: a claim not renewed for this + 5 s is stale. */
const TIMEOUT_MS = 2_000;

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: { id: string };
}

interface DeliveryState {
  id: number;
  status: string;
  attempt_count: number;
  attempts: { code: number | null; error: string | null }[];
  last_error: string | null;
  next_attempt_at: Date | null;
  claim_token: string | null;
  completed_at: Date | null;
}

/**
 * Sending deliveries on a real database against a local receiver: the drain claims, sends and
 * records; a 410 disables the webhook; claims left by a run that died are settled as failed
 * attempts; two drains of one webhook never send a delivery twice. The dispatcher's own loop runs
 * once a minute here, so every drain below is the spec's own.
 */
describe('WebhookDeliveriesService', () => {
  let ctx: ServiceContext;
  let who: Principal;
  let server: Server;
  let base: string;
  let received: Received[] = [];
  let status = 200;
  let delayMs = 0;

  beforeAll(async () => {
    ctx = await startServiceContext({
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_FIRST_DELAY_MS: String(FIRST_DELAY_MS),
      WEBHOOK_DISPATCH_INTERVAL_MS: '60000',
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    });
    who = await ctx.principal();
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString('utf8')));
      req.on('end', () => {
        received.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(text) as { id: string } });
        setTimeout(() => {
          res.writeHead(status);
          res.end();
        }, delayMs);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await ctx?.close();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });
  beforeEach(() => {
    received = [];
    status = 200;
    delayMs = 0;
  });

  const svc = () => ctx.get(WebhookDeliveriesService);
  const webhook = async (path: string) => (await ctx.get(WebhooksService).create({ url: `${base}/${path}`, events: ['deal.lost'] }, who)).id;
  /** `n` due deliveries of a webhook (event ids and sequences fresh); answers their ids in order. */
  async function deliveries(webhookId: number, n: number): Promise<number[]> {
    const rows = await ctx.query<{ id: number }>(
      `INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, sequence, body)
       SELECT $1, e.id, 'deal.lost', s, json_build_object('id', e.id, 'type', 'deal.lost')::text
       FROM generate_series(1, $2::int) AS s, LATERAL (SELECT gen_random_uuid() AS id OFFSET 0 * s) e
       RETURNING id::int AS id`,
      [webhookId, n],
    );
    return rows.map((r) => r.id).sort((a, b) => a - b);
  }
  const states = (webhookId: number) =>
    ctx.query<DeliveryState>(
      `SELECT id::int AS id, status, attempt_count, attempts, last_error, next_attempt_at, claim_token, completed_at
       FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id`,
      [webhookId],
    );
  const webhookRow = async (id: number) =>
    (
      await ctx.query<{ is_active: boolean; disabled_reason: string | null; failing_since: Date | null }>(
        `SELECT is_active, disabled_reason, failing_since FROM webhooks WHERE id = $1`,
        [id],
      )
    )[0];

  it('a drain sends every due delivery once, signed, and records its success', async () => {
    const w = await webhook('ok');
    const ids = await deliveries(w, 3);
    await svc().drain(w);

    expect(received).toHaveLength(3);
    for (const r of received) {
      expect(r.path).toBe('/ok');
      expect(r.headers['webhook-signature']).toMatch(/^v1,/);
      expect(r.headers['webhook-id']).toBe(r.body.id);
    }
    const rows = await states(w);
    expect(rows.map((d) => d.id)).toEqual(ids);
    for (const d of rows) {
      expect(d).toMatchObject({ status: 'succeeded', attempt_count: 1, last_error: null, next_attempt_at: null, claim_token: null });
      expect(d.completed_at).not.toBeNull();
      expect(d.attempts.map((a) => a.code)).toEqual([200]);
    }
    // Nothing is due any more: a second drain sends nothing.
    await svc().drain(w);
    expect(received).toHaveLength(3);
  });

  it('a failed attempt is retried on the schedule and starts the failure clock', async () => {
    status = 500;
    const w = await webhook('fails');
    await deliveries(w, 1);
    const before = Date.now();
    await svc().drain(w);

    const [d] = await states(w);
    expect(d).toMatchObject({ status: 'failed', attempt_count: 1, last_error: 'HTTP 500', claim_token: null, completed_at: null });
    const next = new Date(d.next_attempt_at as Date).getTime();
    expect(next).toBeGreaterThanOrEqual(before + FIRST_DELAY_MS * 0.5);
    expect(next).toBeLessThanOrEqual(Date.now() + FIRST_DELAY_MS * 1.5);
    const row = await webhookRow(w);
    expect(row.is_active).toBe(true);
    expect(row.failing_since).not.toBeNull();
  });

  it('a 410 disables the webhook, notifies its owner, and the deliveries left unsent are dead', async () => {
    status = 410;
    const w = await webhook('gone');
    await deliveries(w, 20);
    await svc().drain(w);

    const row = await webhookRow(w);
    expect(row.is_active).toBe(false);
    expect(row.disabled_reason).toMatch(/410/);
    const notes = await ctx.query<{ details: { webhookId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'webhook_disabled'`, [
      who.userId,
    ]);
    expect(notes.map((n) => n.details.webhookId)).toContain(w);
    // At most one round of requests in flight was sent; every other delivery ends dead without an attempt.
    expect(received.length).toBeGreaterThan(0);
    expect(received.length).toBeLessThan(20);
    const rows = await states(w);
    const sent = rows.filter((d) => d.attempt_count === 1);
    const unsent = rows.filter((d) => d.attempt_count === 0);
    expect(sent).toHaveLength(received.length);
    expect(unsent).toHaveLength(20 - received.length);
    for (const d of rows) expect(d.status).toBe('dead');
    for (const d of unsent) expect(d.last_error).toBe('webhook disabled');
  });

  it("a disabled webhook's due deliveries end dead without a request", async () => {
    const w = await webhook('disabled');
    await deliveries(w, 2);
    await ctx.query(`UPDATE webhooks SET is_active = false WHERE id = $1`, [w]);
    await svc().drain(w);

    expect(received).toHaveLength(0);
    for (const d of await states(w)) expect(d).toMatchObject({ status: 'dead', attempt_count: 0, last_error: 'webhook disabled', claim_token: null });
  });

  it('a stale claim is settled as a failed attempt (dead past its 72 h window); a live claim and the failure clock are left alone', async () => {
    const w = await webhook('lost');
    const [lost, expired, live] = await deliveries(w, 3);
    await ctx.query(`UPDATE webhook_deliveries SET claim_token = gen_random_uuid(), claimed_at = now() - interval '1 hour' WHERE id = ANY($1::bigint[])`, [
      [lost, expired],
    ]);
    await ctx.query(`UPDATE webhook_deliveries SET window_started_at = now() - interval '73 hours' WHERE id = $1`, [expired]);
    await ctx.query(`UPDATE webhook_deliveries SET claim_token = gen_random_uuid(), claimed_at = now() WHERE id = $1`, [live]);

    expect(await svc().settleLost(w)).toBe(2);

    const byId = new Map((await states(w)).map((d) => [d.id, d]));
    expect(byId.get(lost)).toMatchObject({ status: 'failed', attempt_count: 1, claim_token: null, last_error: LOST_ATTEMPT });
    expect(byId.get(lost)?.attempts).toEqual([expect.objectContaining({ code: null, error: LOST_ATTEMPT })]);
    expect(byId.get(lost)?.next_attempt_at).not.toBeNull();
    expect(byId.get(expired)).toMatchObject({ status: 'dead', attempt_count: 1, claim_token: null, next_attempt_at: null });
    expect(byId.get(live)).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(byId.get(live)?.claim_token).not.toBeNull();
    expect((await webhookRow(w)).failing_since).toBeNull();
    // Settled once: nothing is stale any more.
    expect(await svc().settleLost(w)).toBe(0);
  });

  it('two drains of one webhook at once send each delivery exactly once', async () => {
    delayMs = 20;
    const w = await webhook('parallel');
    const ids = await deliveries(w, 150);
    await Promise.all([svc().drain(w), svc().drain(w)]);

    const sentIds = received.map((r) => r.body.id);
    expect(sentIds).toHaveLength(150);
    expect(new Set(sentIds).size).toBe(150);
    const rows = await states(w);
    expect(rows.map((d) => d.id)).toEqual(ids);
    for (const d of rows) expect(d).toMatchObject({ status: 'succeeded', attempt_count: 1 });
  });

  it('the sweep queues the drain of a webhook whose deliveries are due and unclaimed', async () => {
    const w = await webhook('swept');
    await deliveries(w, 1);
    expect(await svc().sweep(0)).toBeGreaterThanOrEqual(1);
    await waitUntil('the swept delivery', async () => (await states(w))[0].status === 'succeeded', 15_000);
    expect(received.map((r) => r.path)).toEqual(['/swept']);
  });

  describe("WebhooksService: a webhook's deliveries", () => {
    it('lists them with the list parameters: filter, order, limit', async () => {
      status = 500;
      const w = await webhook('listed');
      const [a, b, c] = await deliveries(w, 3);
      await ctx.query(`UPDATE webhook_deliveries SET status = 'dead' WHERE id = $1`, [b]);
      const hooks = ctx.get(WebhooksService);

      const all = await hooks.listDeliveries(w, {});
      expect(all.total).toBe(3);
      expect(all.deliveries.map((d) => d.id)).toEqual([c, b, a]); // newest first by default
      const pending = await hooks.listDeliveries(w, { status: 'pending', orderByDir: 'asc' });
      expect(pending.deliveries.map((d) => d.id)).toEqual([a, c]);
      const page = await hooks.listDeliveries(w, { limit: '1' });
      expect(page.deliveries.map((d) => d.id)).toEqual([c]);
      expect(page.total).toBe(3);
      expect((await ctx.failure(hooks.listDeliveries(w, { status: 'lost' }))).code).toBe('validation_failed');
      expect((await ctx.failure(hooks.listDeliveries(999_999, {}))).code).toBe('not_found');
    });

    it('redelivers one now with a fresh window: 404 for another webhook’s delivery, 409 while the webhook is disabled', async () => {
      const hooks = ctx.get(WebhooksService);
      const w = await webhook('redeliver');
      const other = await webhook('other');
      const [d] = await deliveries(w, 1);
      await ctx.query(
        `UPDATE webhook_deliveries SET status = 'dead', attempt_count = 3, next_attempt_at = NULL, completed_at = now(), window_started_at = now() - interval '80 hours' WHERE id = $1`,
        [d],
      );
      expect((await ctx.failure(hooks.retryDelivery(other, d))).code).toBe('not_found');
      await ctx.query(`UPDATE webhooks SET is_active = false WHERE id = $1`, [w]);
      expect((await ctx.failure(hooks.retryDelivery(w, d))).code).toBe('conflict');
      expect((await states(w))[0].status).toBe('dead');
      await ctx.query(`UPDATE webhooks SET is_active = true WHERE id = $1`, [w]);

      // Two redeliveries of one delivery at once: both answer it queued, and it is sent once more.
      const answers = await Promise.all([hooks.retryDelivery(w, d), hooks.retryDelivery(w, d)]);
      for (const r of answers) expect(r.id).toBe(d);
      await waitUntil('the redelivery', async () => (await states(w))[0].status === 'succeeded', 15_000);
      const [after] = await states(w);
      expect(after.attempt_count).toBe(4);
      const fresh = await ctx.query<{ fresh: boolean }>(
        `SELECT window_started_at > now() - interval '1 minute' AS fresh FROM webhook_deliveries WHERE id = $1`,
        [d],
      );
      expect(fresh[0].fresh).toBe(true);
      expect(received.filter((r) => r.path === '/redeliver')).toHaveLength(1);
    });
  });
});
