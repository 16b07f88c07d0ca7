/**
 * A broadcast under faults, with the API and two workers as separate processes on a private Redis
 * (append-only, as in production) and a fake gateway that honours Idempotency-Key: Redis restarted
 * mid-broadcast under SMS_MAX_PER_SECOND (the shared rate timeline and the lanes' jobs live there).
 * The broadcast finishes without restarting anything, every recipient gets exactly one message (one
 * Idempotency-Key), and the cap still holds.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createContact, uniqueEmail, adminToken } from '../support/fixtures.js';
import { createDatabase, startApp, type TestApp } from '../support/app.js';
import { type PrivateRedis, startPrivateRedis } from '../support/services.js';
import { FakeGateway } from '../support/sms-gateway.js';
import { sleep, waitUntil } from '../support/wait.js';

const RATE = 10;
const N = 60;

describe('broadcast faults', () => {
  let redis: PrivateRedis;
  let db: Awaited<ReturnType<typeof createDatabase>>;
  let gateway: FakeGateway;
  let api: TestApp;
  let workers: TestApp[] = [];
  let auth: string;

  beforeAll(async () => {
    gateway = await new FakeGateway().start();
    redis = await startPrivateRedis();
    db = await createDatabase();
    const env = {
      JOB_LOCK_MS: '2000',
      RATE_LIMIT_ENTERPRISE: '1000000',
      SMS_PROVIDER: 'http',
      SMS_HTTP_URL: gateway.url,
      SMS_WEBHOOK_SECRET: 'whsec-broadcast-faults',
      SMS_HTTP_TIMEOUT_MS: '2000',
      SMS_MAX_PER_SECOND: String(RATE),
    };
    api = await startApp({ role: 'api', databaseUrl: db.url, redisUrl: redis.url, env });
    workers = [await startApp({ role: 'worker', shareWith: api, env }), await startApp({ role: 'worker', shareWith: api, env })];
    auth = await adminToken(api);
  });
  afterAll(async () => {
    for (const w of workers) await w.stop();
    await api?.stop();
    await db?.drop();
    await redis?.destroy();
    await gateway?.stop();
  });

  it('Redis restarted mid-broadcast: it completes by itself, each recipient gets exactly one message, and the cap holds', async () => {
    const ids: number[] = [];
    const phones: string[] = [];
    for (let i = 0; i < N; i++) {
      const phone = `+1415777${String(1000 + i)}`;
      phones.push(phone);
      ids.push(await createContact(api, auth, { name: 'Recipient', email: uniqueEmail('broadcast-faults.test'), phone }));
    }
    const created = await api.http
      .post('/api/text-messages/broadcasts')
      .set('Authorization', auth)
      .send({ content: 'Restart {{contact.phone}}', audience: { contactIds: ids } });
    expect(created.status).toBe(201);
    const id = created.body.broadcast.id as number;
    expect((await api.http.post(`/api/text-messages/broadcasts/${id}/send`).set('Authorization', auth)).status).toBe(202);
    await waitUntil('some messages at the gateway', async () => (gateway.messages.size >= 15 ? true : undefined), 30000);

    await redis.stop();
    expect(gateway.messages.size).toBeLessThan(N); // mid-broadcast
    await sleep(3000);
    await redis.start();

    const done = await waitUntil(
      'the broadcast to complete after the restart',
      async () => {
        const b = (await api.http.get(`/api/text-messages/broadcasts/${id}`).set('Authorization', auth)).body.broadcast;
        return b?.status === 'completed' ? b : undefined;
      },
      90000,
    );
    expect(done.counts.sent).toBe(N);
    for (const p of phones) {
      expect([p, new Set(gateway.requestsTo(p).map((r) => r.headers['idempotency-key'])).size]).toEqual([p, 1]);
      expect([p, gateway.messagesTo(p).length]).toEqual([p, 1]);
    }
    // SMS_MAX_PER_SECOND across the restart (the timeline is in Redis, append-only): any 800 ms window
    // holds at most RATE hand-offs (slots are 100 ms apart; 200 ms of slack for jitter on a loaded machine).
    const times = [...gateway.messages.values()]
      .filter((r) => phones.includes(r.body.to))
      .map((r) => r.at)
      .sort((a, b) => a - b);
    let worst = 0;
    for (let i = 0; i < times.length; i++) {
      let j = i;
      while (j < times.length && times[j] - times[i] < 800) j++;
      worst = Math.max(worst, j - i);
    }
    expect(worst).toBeLessThanOrEqual(RATE);
  });
});
