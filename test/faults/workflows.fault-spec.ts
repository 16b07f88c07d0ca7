/**
 * The workflow runner under SIGKILL: the API and a worker as separate processes on a private Redis,
 * FAULT_WORKFLOW_ENROLLMENTS (default 10,000, the number: about 3 minutes and 25 kills on a
 * 2-core machine; at 1,000 the batched engine ends before a second kill) contacts enrolled by hand in a workflow of an SMS (the
 * log provider, which records each Idempotency-Key it accepted) and a webhook step to a local
 * receiver, while the worker is killed with SIGKILL in a loop (a fresh one started each time, the
 * lease short so that the dead worker's claims are taken over). Every enrollment ends completed (its
 * webhook step waits for its delivery's outcome, so completed means the receiver answered 2xx);
 * each enrollment's SMS step wrote one text message, which the provider accepted once; each
 * enrollment's webhook step wrote one delivery with its stable Webhook-Id, and the receiver saw every
 * Webhook-Id (a delivery whose answer was lost to a kill may arrive twice with the same Webhook-Id:
 * the receiver's deduplication key, as Standard Webhooks intends).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from '../support/app.js';
import { type PrivateRedis, type SplitDeployment, startSplitDeployment, stopSplitDeployment } from '../support/services.js';
import { sleep, waitUntil } from '../support/wait.js';

const N = Number(process.env.FAULT_WORKFLOW_ENROLLMENTS ?? 10_000);
const KILL_EVERY_MS = 4_000;

describe('workflow runner faults', () => {
  let redis: PrivateRedis;
  let db: SplitDeployment['db'];
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  const received = new Map<string, number>();
  let server: Server;
  let url = '';
  const env = {
    SMS_PROVIDER: 'log',
    RATE_LIMIT_ENTERPRISE: '1000000000',
    JOB_LOCK_MS: '2000',
    WORKFLOW_LEASE_MS: '3000',
    WORKFLOW_POLL_INTERVAL_MS: '200',
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_DISPATCH_INTERVAL_MS: '200',
    // The webhook step waits for its delivery: a delivery whose attempt was lost to a kill is retried soon.
    WEBHOOK_RETRY_FIRST_DELAY_MS: '500',
    // The step's effect is the message queued with its key; the provider call follows. A send job lost
    // to two kills (BullMQ fails it) is queued again by the sweep, soon here.
    SMS_RECOVER_AFTER_MS: '3000',
    SMS_RECOVER_EVERY_MS: '2000',
    // Single sends are started at most SMS_RATE_LIMIT_PER_SECOND a second (100 by default): the faults, not that cap, are measured.
    SMS_RATE_LIMIT_PER_SECOND: '100000',
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        received.set(id, (received.get(id) ?? 0) + 1);
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    ({ redis, db, api, worker, auth } = await startSplitDeployment(env));
  }, 120000);
  afterAll(async () => {
    await stopSplitDeployment({ redis, db, api, worker });
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  it(`${N} enrollments through an SMS and a webhook while the worker is killed in a loop: each ends, each effect once`, async () => {
    await api.sql(
      `INSERT INTO contacts (name, email, phone) SELECT 'F' || i, 'f' || i || '@wf-faults.test', '+1415' || lpad(i::text, 7, '0') FROM generate_series(1, ${N}) i`,
    );
    const ids = (await api.sql<{ id: number }>(`SELECT id FROM contacts WHERE email LIKE '%@wf-faults.test' ORDER BY id`)).map((c) => c.id);
    const created = await api.http
      .post('/api/workflows')
      .set('Authorization', auth)
      .send({
        name: 'Faults',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'sms', type: 'send_sms', body: 'Fault {{contact.name}}', next: 'hook' },
          { key: 'hook', type: 'webhook', url, payload: { name: '{{contact.name}}' } },
        ],
      });
    expect(created.status).toBe(201);
    const id = created.body.workflow.id as number;
    for (let i = 0; i < ids.length; i += 10_000) {
      const r = await api.http
        .post(`/api/workflows/${id}/enrollments`)
        .set('Authorization', auth)
        .send({ contactIds: ids.slice(i, i + 10_000) });
      expect(r.status).toBe(200);
    }
    const ended = async () =>
      Number(
        (
          await api.sql<{ n: string }>(`SELECT count(*)::text AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status NOT IN ('active', 'waiting')`, [
            id,
          ])
        )[0].n,
      );
    let kills = 0;
    // Kill the worker every few seconds (the next one is started first) until every enrollment ended.
    while ((await ended()) < N && kills < 40) {
      await sleep(KILL_EVERY_MS);
      const next = await startApp({ role: 'worker', shareWith: api, env });
      await worker!.kill('SIGKILL');
      worker = next;
      kills++;
      process.stderr.write(`[workflows faults] kill ${kills}: ${await ended()} of ${N} ended\n`);
    }
    try {
      await waitUntil('every enrollment to end', async () => (await ended()) === N, 120000, 500);
    } finally {
      // Where the enrollments that did not end are (printed whether or not the wait succeeded).
      const open = await api.sql<{ status: string; step_key: string; n: string }>(
        `SELECT status, step_key, count(*)::text AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status IN ('active', 'waiting') GROUP BY 1, 2`,
        [id],
      );
      process.stderr.write(`[workflows faults] after ${kills} kills, not ended: ${JSON.stringify(open)}\n`);
    }
    expect(kills).toBeGreaterThan(0);
    const statuses = await api.sql<{ status: string; n: string }>(
      `SELECT status, count(*)::text AS n FROM workflow_enrollments WHERE workflow_id = $1 GROUP BY status`,
      [id],
    );
    expect(Object.fromEntries(statuses.map((s) => [s.status, Number(s.n)]))).toEqual({ completed: N });
    // Each step completed once per enrollment (the webhook step's run that began its wait for the delivery is not counted).
    const runs = await api.sql<{ step_key: string; n: string; enrollments: string }>(
      `SELECT r.step_key, count(*)::text AS n, count(DISTINCT r.enrollment_id)::text AS enrollments
         FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id WHERE e.workflow_id = $1 AND r.outcome <> 'waiting'
        GROUP BY r.step_key ORDER BY 1`,
      [id],
    );
    expect(runs.map((r) => [r.step_key, Number(r.n), Number(r.enrollments)])).toEqual([
      ['hook', N, N],
      ['sms', N, N],
    ]);
    // One text message per enrollment, each accepted once by the provider (repeated hand-overs are counted as
    // duplicates, not sent). The step queued the message; its send may still be running when the enrollment ends.
    const smsCounts = async () =>
      (
        await api.sql<{ messages: string; accepted: string }>(
          `SELECT count(DISTINCT t.id)::text AS messages, count(l.idempotency_key)::text AS accepted
             FROM text_messages t LEFT JOIN sms_log_sends l ON l.message_id = t.id WHERE t.content LIKE 'Fault %'`,
        )
      )[0];
    await waitUntil('every text message handed to the provider', async () => Number((await smsCounts()).accepted) >= N, 120000, 500);
    expect(await smsCounts()).toEqual({ messages: String(N), accepted: String(N) });
    // One delivery per enrollment and step, its Webhook-Id the step run's; the receiver saw each.
    const webhookId = (created.body.workflow.steps as { webhookId: number }[])[1].webhookId;
    const deliveries = await api.sql<{ event_id: string }>(`SELECT event_id FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);
    expect(deliveries).toHaveLength(N);
    await waitUntil('the receiver to see every delivery', async () => deliveries.every((d) => received.has(d.event_id)), 120000, 500);
    const repeated = [...received.values()].filter((n) => n > 1).length;
    process.stderr.write(`[workflows faults] ${N} enrollments, ${kills} kills, ${repeated} deliveries received more than once (same Webhook-Id)\n`);
  }, 600000);
});
