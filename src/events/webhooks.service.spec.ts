import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitUntil } from '../../test/support/wait.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Clock } from '../common/clock.js';
import type { Principal } from '../common/request.js';
import { type ServiceContext, startServiceContext } from '../../test/support/service-testing.js';
import { signingSecrets } from './webhook-deliveries.service.js';
import { WebhooksService } from './webhooks.service.js';

/**
 * The failure clock on a real database with the in-process job runner: a webhook is disabled (and
 * its owner notified) only once it has gone 72 h without a success, and a success stops the clock.
 */
describe('WebhooksService: disabling after 72 h without a success', () => {
  let ctx: ServiceContext;
  let who: Principal;
  let server: Server;
  let base: string;
  let status = 500;

  beforeAll(async () => {
    ctx = await startServiceContext({
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_FIRST_DELAY_MS: '60000',
      WEBHOOK_DISPATCH_INTERVAL_MS: '50',
    });
    who = await ctx.principal();
    server = createServer((_req, res) => {
      res.writeHead(status);
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await ctx?.close();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  const attempts = async (webhookId: number) =>
    (await ctx.query<{ n: number }>(`SELECT coalesce(sum(attempt_count), 0)::int AS n FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]))[0].n;
  const until = (probe: () => Promise<boolean>, what: string) => waitUntil(what, probe, 15000, 50);

  it('a failure after 72 h of failures disables the webhook and notifies its owner; one at 71 h does not', async () => {
    const svc = ctx.get(WebhooksService);
    const old = await svc.create({ url: `${base}/old`, events: ['deal.lost'] }, who);
    const young = await svc.create({ url: `${base}/young`, events: ['deal.lost'] }, who);
    await ctx.query(`UPDATE webhooks SET failing_since = now() - interval '73 hours' WHERE id = $1`, [old.id]);
    await ctx.query(`UPDATE webhooks SET failing_since = now() - interval '71 hours' WHERE id = $1`, [young.id]);
    await ctx.query(`INSERT INTO events (type, data) VALUES ('deal.lost', '{"id": 1}')`);
    await until(async () => (await attempts(old.id)) >= 1 && (await attempts(young.id)) >= 1, 'both attempts');

    const o = await svc.get(old.id);
    expect(o.isActive).toBe(false);
    expect(o.disabledReason).toMatch(/72 hours/);
    const y = await svc.get(young.id);
    expect(y.isActive).toBe(true);
    const notes = await ctx.query<{ details: { webhookId: number } }>(`SELECT details FROM notifications WHERE user_id = $1 AND type = 'webhook_disabled'`, [
      who.userId,
    ]);
    expect(notes.map((n) => n.details.webhookId)).toEqual([old.id]);
  });

  it('a success stops the failure clock', async () => {
    const svc = ctx.get(WebhooksService);
    status = 200;
    const w = await svc.create({ url: `${base}/ok`, events: ['deal.stage_changed'] }, who);
    await ctx.query(`UPDATE webhooks SET failing_since = now() - interval '80 hours' WHERE id = $1`, [w.id]);
    await ctx.query(`INSERT INTO events (type, data) VALUES ('deal.stage_changed', '{"id": 2}')`);
    await until(async () => (await attempts(w.id)) >= 1, 'the attempt');
    const got = await svc.get(w.id);
    expect(got).toMatchObject({ isActive: true, failingSince: null });
    expect(got.lastSuccessAt).not.toBeNull();
  });

  it("a rotated secret's predecessor keeps signing for 24 h of the Clock's time, and the record says so until then", async () => {
    const svc = ctx.get(WebhooksService);
    const clock = ctx.get(Clock);
    const w = await svc.create({ url: `${base}/rotated`, events: ['deal.won'] }, who);
    const rotated = await svc.rotateSecret(w.id, who);
    const expires = Date.parse(rotated.previousSecretExpiresAt!);
    expect(Math.abs(expires - (clock.nowMs() + 24 * 3600_000))).toBeLessThan(60_000);
    const stored = async () =>
      (
        await ctx.query<{ secret: string; previousSecret: string; previousSecretExpiresAt: Date }>(
          `SELECT secret, previous_secret AS "previousSecret", previous_secret_expires_at AS "previousSecretExpiresAt" FROM webhooks WHERE id = $1`,
          [w.id],
        )
      )[0];
    let moved = 0;
    try {
      clock.travel(23 * 3600_000);
      moved += 23 * 3600_000;
      expect((await svc.get(w.id)).previousSecretExpiresAt).toBe(rotated.previousSecretExpiresAt);
      expect(signingSecrets(await stored(), clock.now())).toHaveLength(2);
      clock.travel(2 * 3600_000);
      moved += 2 * 3600_000;
      expect((await svc.get(w.id)).previousSecretExpiresAt).toBeNull();
      expect(signingSecrets(await stored(), clock.now())).toEqual([rotated.secret]);
    } finally {
      clock.travel(-moved);
    }
  });
});
