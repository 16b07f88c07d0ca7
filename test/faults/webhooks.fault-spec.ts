/**
 * Webhooks under faults, with the API and the worker as separate processes on a private Redis:
 * Redis stopped while records are written — the writes commit with their events, and the events
 * reach the receiver once Redis is back, without restarting anything.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestApp } from '../support/app.js';
import { type PrivateRedis, type SplitDeployment, startSplitDeployment, stopSplitDeployment } from '../support/services.js';
import { sleep, waitUntil } from '../support/wait.js';

const until = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60000) => waitUntil(what, probe, timeoutMs);

describe('webhook faults', () => {
  let redis: PrivateRedis;
  let db: SplitDeployment['db'];
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  let server: Server;
  let base: string;
  const received: { id: string; type: string; title: string }[] = [];
  const env = {
    JOB_LOCK_MS: '2000',
    RATE_LIMIT_ENTERPRISE: '1000000',
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_FIRST_DELAY_MS: '300',
    WEBHOOK_DISPATCH_INTERVAL_MS: '100',
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const e = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; type: string; data: { title: string } };
        received.push({ id: e.id, type: e.type, title: e.data.title });
        res.writeHead(204);
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    ({ redis, db, api, worker, auth } = await startSplitDeployment(env));
  });
  afterAll(async () => {
    await stopSplitDeployment({ redis, db, api, worker });
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  it('Redis down: writes commit with their events, and the webhook gets every one once Redis is back', async () => {
    const hook = await api.http
      .post('/api/webhooks')
      .set('Authorization', auth)
      .send({ url: `${base}/hook`, events: ['category.created'] });
    expect(hook.status).toBe(201);

    await redis.stop();
    await sleep(500);
    const titles = ['Outage 1', 'Outage 2', 'Outage 3'];
    for (const title of titles) {
      const res = await api.http.post('/api/categories').set('Authorization', auth).send({ title, bundle: 'global' });
      expect(res.status).toBe(201);
    }
    // The deliveries exist (the dispatcher needs only the database) but cannot be queued yet.
    await until('three pending deliveries', async () => {
      const [{ n }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`);
      return n === 3;
    });
    await sleep(1000);
    expect(received).toHaveLength(0);

    await redis.start();
    await until('every event delivered', async () => received.length >= 3);
    expect(received.map((r) => r.title).sort()).toEqual(titles);
    expect(new Set(received.map((r) => r.id)).size).toBe(3);
    await until('all succeeded', async () => {
      const rows = await api.sql<{ status: string }>(`SELECT status FROM webhook_deliveries`);
      return rows.length === 3 && rows.every((r) => r.status === 'succeeded');
    });
  });
});
