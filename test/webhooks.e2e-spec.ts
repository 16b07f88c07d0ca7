/**
 * Webhooks end to end: the API and a worker as separate processes (Redis/BullMQ), real local HTTP
 * receivers on 127.0.0.1 (so the suite runs with WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE; the
 * SSRF refusals are checked on processes started with the defaults). Events are written into the
 * outbox table the way a committed change writes them; the dispatcher picks them up from the feed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { expectError, freePort, startApp, type TestApp } from './support/app.js';
import { bearer, userId } from './support/fixtures.js';
import { sleep, waitUntil } from './support/wait.js';

const until = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 30000) => waitUntil(what, probe, timeoutMs);

interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Behaviour = (req: IncomingMessage, res: ServerResponse) => void;
const answer =
  (status: number, body = 'ok', headers: Record<string, string> = {}): Behaviour =>
  (_req, res) => {
    res.writeHead(status, headers);
    res.end(body);
  };

/** One local receiver: each path has its own queue of behaviours (the last one repeats) and its log. */
class Receiver {
  server: Server;
  port = 0;
  readonly log = new Map<string, Received[]>();
  readonly plans = new Map<string, Behaviour[]>();

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const entry = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
        this.log.set(path, [...(this.log.get(path) ?? []), entry]);
        const plan = this.plans.get(path) ?? [answer(200)];
        const b = plan.length > 1 ? plan.shift()! : plan[0];
        b(req, res);
      });
    });
  }

  async listen(port = 0): Promise<this> {
    await new Promise<void>((r) => this.server.listen(port, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string) {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  got(path: string): Received[] {
    return this.log.get(path) ?? [];
  }

  close() {
    this.server.closeAllConnections();
    return new Promise<void>((r) => this.server.close(() => r()));
  }
}

const ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_RETRY_FIRST_DELAY_MS: '300',
  WEBHOOK_DISPATCH_INTERVAL_MS: '100',
  JOB_LOCK_MS: '2000',
  RATE_LIMIT_ENTERPRISE: '1000000',
};

describe('webhooks', () => {
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  const rx = new Receiver();

  beforeAll(async () => {
    await rx.listen();
    api = await startApp({ role: 'api', env: ENV });
    worker = await startApp({ role: 'worker', shareWith: api, env: ENV });
    auth = bearer(await api.token('*', { plan: 'enterprise' }));
  });
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await rx.close();
  });

  /** Writes a committed event, as a change's transaction does. */
  const emit = async (type: string, data: object = {}) =>
    (await api.sql<{ id: string }>(`INSERT INTO events (type, data) VALUES ($1, $2) RETURNING id`, [type, JSON.stringify(data)]))[0].id;

  const create = async (body: object) => {
    const res = await api.http.post('/api/webhooks').set('Authorization', auth).send(body);
    expect(res.status).toBe(201);
    return res.body.webhook as { id: number; secret: string; url: string };
  };
  const deliveries = async (id: number, query = '') => {
    const res = await api.http.get(`/api/webhooks/${id}/deliveries${query}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    return res.body.deliveries as {
      id: number;
      eventId: string;
      status: string;
      sequence: number;
      attempts: { code: number | null; error: string | null; durationMs: number; nextAttemptAt: string | null; response: string }[];
    }[];
  };

  it('creates, reads, edits and deletes in both path styles; the secret is shown once', async () => {
    const a = await api.http
      .post('/api/webhooks/new')
      .set('Authorization', auth)
      .send({ url: rx.url('/crud'), events: ['contact.created'], description: 'crm mirror' });
    expect(a.status).toBe(201);
    expect(a.body.webhook).toMatchObject({ url: rx.url('/crud'), events: ['contact.created'], description: 'crm mirror', isActive: true });
    expect(a.body.webhook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = a.body.webhook.id;

    const got = await api.http.get(`/api/webhooks/${id}`).set('Authorization', auth);
    expect(got.status).toBe(200);
    expect(got.body.webhook.secret).toBeUndefined();
    const list = await api.http.get('/api/webhooks').set('Authorization', auth);
    expect(list.status).toBe(200);
    expect(list.body.webhooks.map((w: { id: number }) => w.id)).toContain(id);
    expect(JSON.stringify(list.body)).not.toContain('whsec_');

    const e1 = await api.http
      .patch(`/api/webhooks/${id}/edit`)
      .set('Authorization', auth)
      .send({ events: ['*'] });
    expect(e1.status).toBe(200);
    expect(e1.body.webhook.events).toEqual(['*']);
    const e2 = await api.http.patch(`/api/webhooks/${id}`).set('Authorization', auth).send({ isActive: false });
    expect(e2.body.webhook).toMatchObject({ isActive: false, events: ['*'], description: 'crm mirror' });

    const reader = bearer(await api.token('webhooks:read', { plan: 'enterprise' }));
    expectError(
      await api.http
        .post('/api/webhooks')
        .set('Authorization', reader)
        .send({ url: rx.url('/x'), events: ['*'] }),
      403,
      'forbidden',
    );
    expect((await api.http.get(`/api/webhooks/${id}`).set('Authorization', reader)).status).toBe(200);

    expect((await api.http.delete(`/api/webhooks/${id}/delete`).set('Authorization', auth)).status).toBe(200);
    expectError(await api.http.delete(`/api/webhooks/${id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await api.http.get(`/api/webhooks/${id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('subscribing to events needs the read permission of their resource (403 naming it); "*" needs every one', async () => {
    const writer = bearer(await api.token('webhooks:write', { plan: 'enterprise' }));
    const subscribe = (token: string, events: string[]) =>
      api.http
        .post('/api/webhooks')
        .set('Authorization', token)
        .send({ url: rx.url('/perm'), events });
    const refused = expectError(await subscribe(writer, ['contact.created']), 403, 'forbidden');
    expect(refused.message).toContain('contacts:read');
    expect(expectError(await subscribe(writer, ['*']), 403, 'forbidden').message).toMatch(/contacts:read.*deals:read/);
    const withContacts = bearer(await api.token('webhooks:write,contacts:read', { plan: 'enterprise' }));
    const ok = await subscribe(withContacts, ['contact.created', 'contact.updated']);
    expect(ok.status).toBe(201);
    // Widening a webhook by PATCH or PUT is held to the same rule.
    const id = ok.body.webhook.id as number;
    expect(
      expectError(
        await api.http
          .patch(`/api/webhooks/${id}`)
          .set('Authorization', withContacts)
          .send({ events: ['deal.won'] }),
        403,
        'forbidden',
      ).message,
    ).toContain('deals:read');
    expectError(
      await api.http
        .put(`/api/webhooks/${id}`)
        .set('Authorization', withContacts)
        .send({ url: rx.url('/perm'), events: ['*'] }),
      403,
      'forbidden',
    );
    expect(
      (
        await api.http
          .patch(`/api/webhooks/${id}`)
          .set('Authorization', withContacts)
          .send({ events: ['contact.deleted'] })
      ).status,
    ).toBe(200);
    // Nor can a token without contacts:read point an existing contact webhook elsewhere.
    const moved = await api.http
      .patch(`/api/webhooks/${id}`)
      .set('Authorization', writer)
      .send({ url: rx.url('/elsewhere') });
    expect(expectError(moved, 403, 'forbidden').message).toContain('contacts:read');
    expect((await api.http.get(`/api/webhooks/${id}`).set('Authorization', auth)).body.webhook.url).toBe(rx.url('/perm'));
    expect((await api.http.delete(`/api/webhooks/${id}`).set('Authorization', auth)).status).toBe(200);
  });

  it('answers carrying a secret are not cached, and an Idempotency-Key replay of them leaves the secret out (never stored)', async () => {
    const body = { url: rx.url('/secret'), events: ['contact.created'] };
    const first = await api.http.post('/api/webhooks').set('Authorization', auth).set('Idempotency-Key', 'wh-secret-1').send(body);
    expect(first.status).toBe(201);
    expect(first.headers['cache-control']).toBe('no-store');
    const secret = first.body.webhook.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const replay = await api.http.post('/api/webhooks').set('Authorization', auth).set('Idempotency-Key', 'wh-secret-1').send(body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['cache-control']).toBe('no-store');
    expect(replay.body.webhook).toMatchObject({ id: first.body.webhook.id, url: body.url });
    expect(replay.body.webhook.secret).toBeUndefined();
    expect(replay.body.notice).toMatch(/shown only/);
    const id = first.body.webhook.id as number;

    const rotated = await api.http.post(`/api/webhooks/${id}/rotate-secret`).set('Authorization', auth).set('Idempotency-Key', 'wh-rotate-1').send();
    expect(rotated.status).toBe(200);
    expect(rotated.headers['cache-control']).toBe('no-store');
    expect(rotated.body.webhook.secret).toMatch(/^whsec_/);
    const rotatedAgain = await api.http.post(`/api/webhooks/${id}/rotate-secret`).set('Authorization', auth).set('Idempotency-Key', 'wh-rotate-1').send();
    expect(rotatedAgain.headers['idempotent-replayed']).toBe('true');
    expect(rotatedAgain.headers['cache-control']).toBe('no-store');
    expect(rotatedAgain.body.webhook.secret).toBeUndefined();
    const created = await api.http.put('/api/webhooks/999999').set('Authorization', auth).send(body);
    expect(created.status).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');

    const stored = await api.sql<{ body: string }>(`SELECT convert_from(response_body, 'UTF8') AS body FROM idempotency_keys WHERE key LIKE 'wh-%'`);
    expect(stored).toHaveLength(2);
    for (const r of stored) expect(r.body).not.toContain('whsec_');
  });

  it('PUT replaces a webhook (200, secret kept) or creates one for an unknown id (201, new id, secret once); parallel PUTs lose nothing', async () => {
    const w = await create({ url: rx.url('/put-a'), events: ['contact.created'], description: 'before', isActive: false });
    const r = await api.http
      .put(`/api/webhooks/${w.id}/edit`)
      .set('Authorization', auth)
      .send({ url: rx.url('/put-b'), events: ['deal.created', 'deal.won'] });
    expect(r.status).toBe(200);
    // Full replace: the omitted description and isActive go back to their defaults.
    expect(r.body.webhook).toMatchObject({ id: w.id, url: rx.url('/put-b'), events: ['deal.created', 'deal.won'], description: null, isActive: true });
    expect(r.body.webhook.secret).toBeUndefined();
    // The secret is kept: a delivery made after the replace verifies with the secret from creation.
    const eventId = await emit('deal.won', { id: 7 });
    const [got] = await until('the delivery after PUT', async () => rx.got('/put-b').length >= 1 && rx.got('/put-b'));
    expect(new StandardWebhook(w.secret).verify(got.body, got.headers as Record<string, string>)).toMatchObject({ id: eventId });

    const missing = 2_000_000_000;
    const c = await api.http
      .put(`/api/webhooks/${missing}`)
      .set('Authorization', auth)
      .send({ url: rx.url('/put-c'), events: ['*'] });
    expect(c.status).toBe(201);
    expect(c.body.webhook.id).not.toBe(missing);
    expect(c.body.webhook.secret).toMatch(/^whsec_/);
    expectError(
      await api.http
        .put(`/api/webhooks/${w.id}`)
        .set('Authorization', auth)
        .send({ url: rx.url('/x') }),
      400,
      'validation_failed',
    );
    expectError(
      await api.http
        .put(`/api/webhooks/${w.id}`)
        .set('Authorization', auth)
        .send({ url: rx.url('/x'), events: ['no.such'] }),
      400,
      'validation_failed',
    );

    // Parallel replaces of one webhook: every one answers 200 and the stored webhook is one of them, whole.
    const bodies = Array.from({ length: 10 }, (_, i) => ({ url: rx.url(`/put-p${i}`), events: ['activity.created'], description: `d${i}` }));
    const answers = await Promise.all(bodies.map((b) => api.http.put(`/api/webhooks/${w.id}`).set('Authorization', auth).send(b)));
    expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 200));
    const final = (await api.http.get(`/api/webhooks/${w.id}`).set('Authorization', auth)).body.webhook as { url: string; description: string };
    const i = Number(final.description.slice(1));
    expect(final.url).toBe(rx.url(`/put-p${i}`));
  });

  it('a new webhook receives the events that occur after it was created, not the backlog before it', async () => {
    const w = await create({ url: rx.url('/fresh'), events: ['category.deleted'] });
    // An event that occurred before the webhook existed but is committed (and so numbered) only now,
    // as a transaction that began earlier would: it is not the new webhook's.
    await api.sql(`INSERT INTO events (type, data, occurred_at) VALUES ('category.deleted', '{"id":100}', now() - interval '1 minute')`);
    const after = await emit('category.deleted', { id: 101 });
    await until('the event after creation', async () => rx.got('/fresh').length >= 1);
    await sleep(500);
    expect(rx.got('/fresh').map((x) => (JSON.parse(x.body) as { id: string }).id)).toEqual([after]);
    expect((await deliveries(w.id)).map((d) => d.eventId)).toEqual([after]);
  });

  it('answers bad input with 400s in the error shape', async () => {
    const post = (body: object) => api.http.post('/api/webhooks').set('Authorization', auth).send(body);
    const unknown = await post({ url: rx.url('/bad'), events: ['contact.created', 'contact.exploded'] });
    expectError(unknown, 400, 'validation_failed');
    expect(unknown.body.error.message).toContain('contact.exploded');
    expect(unknown.body.error.message).toContain('deal.won'); // names the allowed types
    expectError(await post({ url: rx.url('/bad'), events: ['*', 'deal.won'] }), 400, 'validation_failed');
    expectError(await post({ url: rx.url('/bad'), events: [] }), 400, 'validation_failed');
    expectError(await post({ url: rx.url('/bad') }), 400, 'validation_failed');
    expectError(await post({ url: 'not a url', events: ['*'] }), 400, 'validation_failed');
    expectError(await post({ url: 'ftp://127.0.0.1/x', events: ['*'] }), 400, 'validation_failed');
    expectError(await post({ url: 'http://user:pw@127.0.0.1/x', events: ['*'] }), 400, 'validation_failed');
    expectError(await post({ url: rx.url('/bad'), events: ['*'], isActive: 'yes' }), 400, 'validation_failed');
    expectError(await post({ url: rx.url('/bad'), events: 'contact.created' }), 400, 'validation_failed');
    const w = await create({ url: rx.url('/bad'), events: ['deal.lost'] });
    expectError(await api.http.get(`/api/webhooks/${w.id}/deliveries?status=lost`).set('Authorization', auth), 400, 'validation_failed');
    expectError(await api.http.get(`/api/webhooks/${w.id}/deliveries?limit=0`).set('Authorization', auth), 400, 'validation_failed');
    expectError(
      await api.http
        .patch(`/api/webhooks/${w.id}`)
        .set('Authorization', auth)
        .send({ events: ['nope'] }),
      400,
      'validation_failed',
    );
    expectError(await api.http.patch(`/api/webhooks/${w.id}`).set('Authorization', auth).send({ url: null }), 400, 'validation_failed');
    expectError(await api.http.post(`/api/webhooks/${w.id}/deliveries/999999/retry`).set('Authorization', auth), 404, 'not_found');
    await api.http.delete(`/api/webhooks/${w.id}`).set('Authorization', auth);
  });

  it('the deliveries list takes the list parameters (filter, fields, search, orderBy, after cursor, count) and has a POST .../search twin', async () => {
    // Inactive webhooks: nothing is sent to them, their deliveries are the rows written here.
    const a = await create({ url: rx.url('/list-a'), events: ['deal.won', 'deal.lost'], isActive: false });
    const b = await create({ url: rx.url('/list-b'), events: ['deal.won'], isActive: false });
    const rows: [number, string, string, number, number][] = [
      // webhook, event type, status, attempts, minutes ago
      [a.id, 'deal.won', 'succeeded', 1, 70],
      [a.id, 'deal.lost', 'dead', 5, 60],
      [a.id, 'deal.won', 'dead', 3, 50],
      [a.id, 'deal.lost', 'succeeded', 2, 40],
      [a.id, 'deal.won', 'succeeded', 1, 30],
      [a.id, 'deal.lost', 'dead', 4, 20],
      [a.id, 'deal.won', 'succeeded', 1, 10],
      [b.id, 'deal.won', 'succeeded', 1, 5],
      [b.id, 'deal.won', 'succeeded', 1, 4],
    ];
    const inserted = await api.sql<{ id: number; eventId: string }>(
      `INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, sequence, body, status, attempt_count, next_attempt_at, created_at, completed_at, last_error)
       SELECT w, gen_random_uuid(), t, 1000 + n, '{}', s, c, NULL, now() - m * interval '1 minute', now() - m * interval '1 minute',
         CASE WHEN s = 'dead' THEN 'HTTP 503' END
       FROM unnest($1::int[], $2::text[], $3::text[], $4::int[], $5::int[]) WITH ORDINALITY AS r(w, t, s, c, m, n)
       ORDER BY n RETURNING id::int AS id, event_id::text AS "eventId"`,
      [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2]), rows.map((r) => r[3]), rows.map((r) => r[4])],
    );
    const aIds = inserted.slice(0, 7).map((r) => r.id);
    const newestFirst = [...aIds].reverse();
    const get = (id: number, query: string) => api.http.get(`/api/webhooks/${id}/deliveries${query}`).set('Authorization', auth);
    const ids = (res: { body: { deliveries: { id: number }[] } }) => res.body.deliveries.map((d) => d.id);

    // The default stays newest first, with total and deliveries (and no next without a cursor).
    const all = await get(a.id, '');
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(7);
    expect(ids(all)).toEqual(newestFirst);
    expect(all.body).not.toHaveProperty('next');
    // status= stays a simple filter.
    const dead = await get(a.id, '?status=dead');
    expect(dead.body.total).toBe(3);
    expect(ids(dead)).toEqual([aIds[5], aIds[2], aIds[1]]);
    expectError(await get(a.id, '?status=lost'), 400, 'validation_failed');

    // filter: status, eventType, eventId, attemptCount, createdAt, id.
    const f1 = await get(a.id, `?filter=${encodeURIComponent('and(status[in]:[dead,failed],attemptCount[gte]:4)')}`);
    expect(f1.status).toBe(200);
    expect(ids(f1)).toEqual([aIds[5], aIds[1]]);
    const f2 = await get(a.id, `?filter=${encodeURIComponent('eventType[eq]:deal.won,createdAt[lt]:now-45m')}`);
    expect(ids(f2)).toEqual([aIds[2], aIds[0]]);
    const f3 = await get(a.id, `?filter=${encodeURIComponent(`eventId[eq]:${inserted[3].eventId}`)}`);
    expect(ids(f3)).toEqual([aIds[3]]);
    const f4 = await get(a.id, `?filter=${encodeURIComponent(`id[gt]:${aIds[4]}`)}&orderByDir=asc`);
    expect(ids(f4)).toEqual([aIds[5], aIds[6]]);
    // Another webhook's delivery is not in this list, whatever the filter.
    expect(ids(await get(a.id, `?filter=${encodeURIComponent(`id[eq]:${inserted[7].id}`)}`))).toEqual([]);
    expectError(await get(a.id, `?filter=${encodeURIComponent('attemptCount[contains]:x')}`), 400, 'validation_failed');
    expectError(await get(a.id, `?filter=${encodeURIComponent('secret[eq]:x')}`), 400, 'validation_failed');

    // search, orderBy, fields.
    expect(ids(await get(a.id, '?search=HTTP%20503&orderBy=createdAt&orderByDir=asc'))).toEqual([aIds[1], aIds[2], aIds[5]]);
    expect(ids(await get(a.id, '?orderBy=attemptCount&orderByDir=desc&limit=2'))).toEqual([aIds[1], aIds[5]]);
    const sparse = await get(a.id, '?fields=status,eventType&limit=1');
    expect(sparse.status).toBe(200);
    expect(sparse.body.deliveries).toEqual([{ id: aIds[6], status: 'succeeded', eventType: 'deal.won' }]);
    expectError(await get(a.id, '?fields=secret'), 400, 'validation_failed');
    expectError(await get(a.id, '?orderBy=body'), 400, 'validation_failed');

    // A cursor walk of 3 a page visits every delivery once, newest first; count=false answers total -1.
    const walked: number[] = [];
    let after = '';
    for (let i = 0; i < 5; i++) {
      const page = await get(a.id, `?limit=3&after=${encodeURIComponent(after)}`);
      expect(page.status).toBe(200);
      walked.push(...ids(page));
      if (page.body.next === null) break;
      after = page.body.next as string;
    }
    expect(walked).toEqual(newestFirst);
    const uncounted = await get(a.id, '?limit=3&count=false');
    expect(uncounted.body.total).toBe(-1);
    expect(typeof uncounted.body.next).toBe('string');

    // A cursor of webhook B's list, or of the webhooks list, is refused by A's list.
    const bCursor = (await get(b.id, '?limit=1&after=')).body.next as string;
    expect(typeof bCursor).toBe('string');
    const refused = await get(a.id, `?limit=1&after=${encodeURIComponent(bCursor)}`);
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.message).toContain('after');
    const hooksCursor = (await api.http.get('/api/webhooks?limit=1&after=').set('Authorization', auth)).body.next as string;
    expectError(await get(a.id, `?limit=1&after=${encodeURIComponent(hooksCursor)}`), 400, 'validation_failed');
    // B's own cursor still works on B's list.
    const bNext = await get(b.id, `?limit=1&after=${encodeURIComponent(bCursor)}`);
    expect(ids(bNext)).toEqual([inserted[7].id]);

    // POST .../search: the same parameters as JSON, filter in its JSON form, answering what GET answers.
    const search = (id: number, body: object) => api.http.post(`/api/webhooks/${id}/deliveries/search`).set('Authorization', auth).send(body);
    const s1 = await search(a.id, {
      filter: {
        and: [
          { field: 'status', op: 'eq', value: 'dead' },
          { field: 'eventType', op: 'eq', value: 'deal.lost' },
        ],
      },
      fields: ['status'],
    });
    expect(s1.status).toBe(200);
    expect(s1.body).toEqual({
      total: 2,
      deliveries: [
        { id: aIds[5], status: 'dead' },
        { id: aIds[1], status: 'dead' },
      ],
    });
    const s2 = await search(a.id, { filter: 'attemptCount[eq]:1', limit: 2, after: '' });
    expect(s2.status).toBe(200);
    expect(ids(s2)).toEqual([aIds[6], aIds[4]]);
    const s3 = await search(a.id, { filter: 'attemptCount[eq]:1', limit: 2, after: s2.body.next as string });
    expect(ids(s3)).toEqual([aIds[0]]);
    expect(s3.body.next).toBeNull();
    expectError(await search(a.id, { limit: 2, after: bCursor }), 400, 'validation_failed');
    expectError(await search(a.id, { limit: 'many' }), 400, 'validation_failed');
    expectError(await search(a.id, { nope: 1 }), 400, 'validation_failed');
    expectError(await search(999999, {}), 404, 'not_found');
    expectError(await get(999999, ''), 404, 'not_found');

    await api.http.delete(`/api/webhooks/${a.id}`).set('Authorization', auth);
    await api.http.delete(`/api/webhooks/${b.id}`).set('Authorization', auth);
  });

  it('signs deliveries so that the standardwebhooks library verifies them; the body carries the sequence', async () => {
    const w = await create({ url: rx.url('/signed'), events: ['category.created'] });
    const eventId = await emit('category.created', { id: 41, title: 'Signed' });
    const [r] = await until('the signed delivery', async () => rx.got('/signed').length >= 1 && rx.got('/signed'));
    expect(r.headers['webhook-id']).toBe(eventId);
    expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const payload = new StandardWebhook(w.secret).verify(r.body, r.headers as Record<string, string>) as Record<string, unknown>;
    expect(payload).toMatchObject({ id: eventId, type: 'category.created', data: { id: 41, title: 'Signed' }, previous: null });
    expect(typeof payload.sequence).toBe('number');
    // Another secret does not verify.
    expect(() => new StandardWebhook('whsec_' + Buffer.alloc(32, 7).toString('base64')).verify(r.body, r.headers as Record<string, string>)).toThrow();
    const [d] = await until('succeeded', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    expect(d).toMatchObject({ eventId, sequence: payload.sequence, status: 'succeeded' });
  });

  it('a change made through the API reaches the webhook with the record as data', async () => {
    const w = await create({ url: rx.url('/api-change'), events: ['category.created', 'category.updated'] });
    const res = await api.http.post('/api/categories').set('Authorization', auth).send({ title: 'Hooked', bundle: 'global' });
    expect(res.status).toBe(201);
    const [r] = await until('the category event', async () => rx.got('/api-change').length >= 1 && rx.got('/api-change'));
    const event = new StandardWebhook(w.secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: { id: number; title: string } };
    expect(event).toMatchObject({ type: 'category.created', data: { id: res.body.category.id, title: 'Hooked' } });
    // A rolled-back change (a 409 on the taken alias) sends nothing.
    const dup = await api.http.post('/api/categories').set('Authorization', auth).send({ title: 'Again', alias: res.body.category.alias, bundle: 'global' });
    expect(dup.status).toBe(409);
    await api.http.patch(`/api/categories/${res.body.category.id}`).set('Authorization', auth).send({ title: 'Hooked 2' });
    await until('the update event', async () => rx.got('/api-change').length >= 2);
    await sleep(300);
    expect(rx.got('/api-change').map((x) => (JSON.parse(x.body) as { type: string }).type)).toEqual(['category.created', 'category.updated']);
  });

  it('500, 500, 200 leaves three attempts and one success, with the same Webhook-Id', async () => {
    rx.plans.set('/flaky', [answer(500, 'boom'), answer(503, 'busy'), answer(200)]);
    const w = await create({ url: rx.url('/flaky'), events: ['deal.created'] });
    const eventId = await emit('deal.created', { id: 1 });
    const [d] = await until('the third attempt to succeed', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    expect(d.attempts.map((a) => a.code)).toEqual([500, 503, 200]);
    expect(d.attempts[0].nextAttemptAt).not.toBeNull();
    expect(d.attempts[0].response).toBe('boom');
    expect(d.attempts[2].nextAttemptAt).toBeNull();
    expect(rx.got('/flaky').map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId, eventId]);
  });

  it('a receiver that is down for a while gets every event after it returns', async () => {
    const port = await freePort();
    const w = await create({ url: `http://127.0.0.1:${port}/late`, events: ['activity.created'] });
    const ids = [await emit('activity.created', { n: 1 }), await emit('activity.created', { n: 2 }), await emit('activity.created', { n: 3 })];
    await until('failed attempts while the receiver is down', async () => {
      const ds = await deliveries(w.id);
      return ds.length === 3 && ds.every((d) => d.status === 'failed' && d.attempts.length >= 1) && ds;
    });
    const ds = await deliveries(w.id);
    expect(ds[0].attempts[0].error).toMatch(/ECONNREFUSED/);
    const late = await new Receiver().listen(port);
    try {
      await until('every event after the return', async () => new Set(late.got('/late').map((r) => r.headers['webhook-id'])).size === 3, 30000);
      expect(new Set(late.got('/late').map((r) => r.headers['webhook-id']))).toEqual(new Set(ids));
      const seqs = late.got('/late').map((r) => (JSON.parse(r.body) as { sequence: number }).sequence);
      expect(seqs.every((s) => Number.isInteger(s))).toBe(true);
      await until('all succeeded', async () => (await deliveries(w.id)).every((d) => d.status === 'succeeded'));
    } finally {
      await late.close();
    }
  });

  it('a hanging receiver, a redirect and a 50 MB answer do not hold back another webhook', async () => {
    let hanging = 0;
    rx.plans.set('/hang', [
      () => {
        hanging++; // never answers
      },
    ]);
    rx.plans.set('/redirect', [answer(302, '', { location: 'http://127.0.0.1:1/elsewhere' })]);
    rx.plans.set('/huge', [
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = Buffer.alloc(1024 * 1024, 'x');
        let sent = 0;
        const more = () => {
          while (sent < 50 && res.write(chunk)) sent++;
          if (sent >= 50) res.end();
          else
            res.once('drain', () => {
              sent++;
              more();
            });
        };
        res.on('close', () => {
          sent = 50;
        });
        more();
      },
    ]);
    const events = ['deal.won'];
    // The hanging receiver also has a backlog of its own, more than a worker runs at once.
    const hang = await create({ url: rx.url('/hang'), events: ['deal.won', 'deal.updated'] });
    const redirect = await create({ url: rx.url('/redirect'), events });
    const huge = await create({ url: rx.url('/huge'), events });
    await create({ url: rx.url('/good'), events });
    await api.sql(`INSERT INTO events (type, data) SELECT 'deal.updated', jsonb_build_object('i', i) FROM generate_series(1, 40) i`);
    await until('the backlog to reach the hanging receiver', async () => hanging >= 1, 10000);
    for (let i = 0; i < 5; i++) await emit('deal.won', { i });
    await until('the good receiver to get all five', async () => rx.got('/good').length >= 5, 10000);
    // Before the first request to the hanging receiver timed out (2 s): nothing waited behind it.
    const [{ n }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND attempt_count > 0`, [hang.id]);
    expect(n).toBe(0);
    await until('redirects dead', async () => {
      const ds = await deliveries(redirect.id);
      return ds.length === 5 && ds.every((d) => d.status === 'dead');
    });
    const [r] = await deliveries(redirect.id);
    expect(r.attempts).toHaveLength(1);
    expect(r.attempts[0]).toMatchObject({ code: 302 });
    expect(r.attempts[0].error).toContain('not followed');
    expect(rx.got('/elsewhere')).toHaveLength(0);
    await until('huge answers succeeded', async () => {
      const ds = await deliveries(huge.id);
      return ds.length === 5 && ds.every((d) => d.status === 'succeeded');
    });
    const [h] = await deliveries(huge.id);
    expect(h.attempts[0].response.length).toBeLessThanOrEqual(4096);
    const hs = await until('timeouts of the hanging receiver', async () => {
      const ds = await deliveries(hang.id);
      return ds.find((d) => d.attempts.length >= 1);
    });
    expect(hs.attempts[0].error).toMatch(/timed out/);
    expect(hs.attempts[0].code).toBeNull();
    await api.http.delete(`/api/webhooks/${hang.id}`).set('Authorization', auth);
  });

  it('410 disables the webhook and notifies its owner; re-enabling can re-queue its dead deliveries', async () => {
    rx.plans.set('/gone', [answer(410, 'gone'), answer(200)]);
    const w = await create({ url: rx.url('/gone'), events: ['field.created'] });
    await emit('field.created', { id: 5 });
    await until('the webhook disabled', async () => {
      const res = await api.http.get(`/api/webhooks/${w.id}`).set('Authorization', auth);
      return res.body.webhook.isActive === false && res.body.webhook;
    });
    const got = (await api.http.get(`/api/webhooks/${w.id}`).set('Authorization', auth)).body.webhook;
    expect(got.disabledReason).toContain('410');
    const [d] = await deliveries(w.id);
    expect(d.status).toBe('dead');
    const owner = await userId(api);
    const notes = await api.sql<{ type: string; details: { webhookId: number } }>(
      `SELECT type, details FROM notifications WHERE user_id = $1 AND type = 'webhook_disabled'`,
      [owner],
    );
    expect(notes.map((n) => n.details.webhookId)).toContain(w.id);
    // Disabled: new events are not delivered to it.
    await emit('field.created', { id: 6 });
    await sleep(800);
    expect(await deliveries(w.id)).toHaveLength(1);

    const res = await api.http.patch(`/api/webhooks/${w.id}`).set('Authorization', auth).send({ isActive: true, requeueDead: true });
    expect(res.status).toBe(200);
    expect(res.body.webhook).toMatchObject({ isActive: true, disabledReason: null });
    const [again] = await until('the dead delivery delivered', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    expect(again.attempts.map((a) => a.code)).toEqual([410, 200]);
  });

  it('rotate-secret: the old secret keeps signing beside the new one', async () => {
    const w = await create({ url: rx.url('/rotate'), events: ['point_group.created'] });
    const rot = await api.http.post(`/api/webhooks/${w.id}/rotate-secret`).set('Authorization', auth);
    expect(rot.status).toBe(200);
    const secret = rot.body.webhook.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(w.secret);
    expect(Date.parse(rot.body.webhook.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    await emit('point_group.created', { id: 9 });
    const [r] = await until('the delivery', async () => rx.got('/rotate').length >= 1 && rx.got('/rotate'));
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const headers = r.headers as Record<string, string>;
    expect(new StandardWebhook(secret).verify(r.body, headers)).toMatchObject({ type: 'point_group.created' });
    expect(new StandardWebhook(w.secret).verify(r.body, headers)).toMatchObject({ type: 'point_group.created' });
    expect((await api.http.get(`/api/webhooks/${w.id}`).set('Authorization', auth)).body.webhook.secret).toBeUndefined();
  });

  it('test delivery: a synchronous signed webhook.test answering the receiver status, duration and body', async () => {
    rx.plans.set('/probe', [answer(202, 'accepted by probe')]);
    const w = await create({ url: rx.url('/probe'), events: ['asset.created'] });
    const res = await api.http.post(`/api/webhooks/${w.id}/test`).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body.test).toMatchObject({ success: true, statusCode: 202, response: 'accepted by probe', error: null });
    expect(res.body.test.durationMs).toBeGreaterThanOrEqual(0);
    const [r] = rx.got('/probe');
    expect(new StandardWebhook(w.secret).verify(r.body, r.headers as Record<string, string>)).toMatchObject({
      type: 'webhook.test',
      id: res.body.test.eventId,
    });
    rx.plans.set('/probe', [answer(500, 'nope')]);
    const bad = await api.http.post(`/api/webhooks/${w.id}/test`).set('Authorization', auth);
    expect(bad.body.test).toMatchObject({ success: false, statusCode: 500, response: 'nope' });
  });

  it('retries a delivery on request', async () => {
    const w = await create({ url: rx.url('/again'), events: ['asset.deleted'] });
    await emit('asset.deleted', { id: 3 });
    const [d] = await until('delivered', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    const res = await api.http.post(`/api/webhooks/${w.id}/deliveries/${d.id}/retry`).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body.delivery.id).toBe(d.id);
    await until('delivered twice', async () => rx.got('/again').length === 2);
    const [after] = await until('two attempts', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.attempts.length === 2 && ds[0].status === 'succeeded' && ds;
    });
    expect(after.attempts.map((a) => a.code)).toEqual([200, 200]);
  });

  it('a worker killed (SIGKILL) in the middle of a delivery: the event is still delivered after restart', async () => {
    let first = true;
    rx.plans.set('/killed', [
      (_req, res) => {
        // The first request is held until the worker is dead; later ones succeed.
        if (first) first = false;
        else answer(200)(_req, res);
      },
      answer(200),
    ]);
    const w = await create({ url: rx.url('/killed'), events: ['asset.updated'] });
    const eventId = await emit('asset.updated', { id: 8 });
    await until('the first request to arrive', async () => rx.got('/killed').length >= 1);
    await worker!.kill('SIGKILL');
    worker = await startApp({ role: 'worker', shareWith: api, env: ENV });
    await until(
      'delivered after the restart',
      async () => {
        const ds = await deliveries(w.id);
        return ds[0]?.status === 'succeeded' && ds;
      },
      45000,
    );
    expect(rx.got('/killed').length).toBeGreaterThanOrEqual(2);
    expect(rx.got('/killed').every((r) => r.headers['webhook-id'] === eventId)).toBe(true);
  }, 90000);

  it('a batch where some events get 500 and others 200 at one webhook: only the failed ones are retried', async () => {
    const path = '/mixed';
    const firstAnswers = new Map<string, number>();
    rx.plans.set(path, [
      (_req, res) => {
        // The request just logged: events with data.fail get a 500 on their first attempt only.
        const e = JSON.parse(rx.got(path).at(-1)!.body) as { id: string; data: { fail: boolean } };
        const status = e.data.fail && !firstAnswers.has(e.id) ? 500 : 200;
        if (!firstAnswers.has(e.id)) firstAnswers.set(e.id, status);
        answer(status)(_req, res);
      },
    ]);
    const w = await create({ url: rx.url(path), events: ['activity.deleted'] });
    await api.sql(`INSERT INTO events (type, data) SELECT 'activity.deleted', jsonb_build_object('i', i, 'fail', i % 3 = 0) FROM generate_series(1, 30) i`);
    const ds = await until('every delivery succeeded', async () => {
      const all = await deliveries(w.id, '?limit=100');
      return all.length === 30 && all.every((d) => d.status === 'succeeded') && all;
    });
    const failing = ds.filter((d) => firstAnswers.get(d.eventId) === 500);
    expect(failing).toHaveLength(10);
    for (const d of failing) expect(d.attempts.map((a) => a.code)).toEqual([500, 200]);
    for (const d of ds.filter((x) => firstAnswers.get(x.eventId) === 200)) expect(d.attempts.map((a) => a.code)).toEqual([200]);
    // Each event that succeeded at once was sent once; each failed one twice.
    const sent = new Map<string, number>();
    for (const r of rx.got(path)) sent.set(String(r.headers['webhook-id']), (sent.get(String(r.headers['webhook-id'])) ?? 0) + 1);
    expect([...sent.values()].sort()).toEqual([...Array<number>(20).fill(1), ...Array<number>(10).fill(2)]);
  });

  it('a busy webhook with a 2,000-event backlog does not hold back a second webhook with one event', async () => {
    let busyGot = 0;
    rx.plans.set('/busy', [
      (_req, res) => {
        busyGot++;
        // 2,000 answers at 200 ms, 16 in flight: the backlog takes 25 s or more.
        setTimeout(() => answer(204, '')(_req, res), 200);
      },
    ]);
    const busy = await create({ url: rx.url('/busy'), events: ['point_group.updated'] });
    const quiet = await create({ url: rx.url('/quiet'), events: ['point_group.deleted'] });
    await api.sql(`INSERT INTO events (type, data) SELECT 'point_group.updated', jsonb_build_object('i', i) FROM generate_series(1, 2000) i`);
    await until('the backlog to start', async () => busyGot >= 1, 15000);
    const eventId = await emit('point_group.deleted', { id: 1 });
    await until('the second webhook to get its event', async () => rx.got('/quiet').length >= 1, 60000);
    const backlogLeft = 2000 - busyGot;
    expect(rx.got('/quiet')[0].headers['webhook-id']).toBe(eventId);
    // Delivered while the backlog was still being worked through, not after it (no wall-clock bound:
    // the order is the property, and it holds however loaded the machine is).
    expect(backlogLeft).toBeGreaterThan(0);
    await until(
      'the whole backlog delivered',
      async () => {
        const [{ n }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [
          busy.id,
        ]);
        return n === 2000;
      },
      90000,
    );
    expect(new Set(rx.got('/busy').map((r) => r.headers['webhook-id'])).size).toBe(2000);
    expect((await deliveries(quiet.id))[0].status).toBe('succeeded');
  }, 120000);

  it('a worker killed (SIGKILL) in the middle of a batch: every event of the batch is delivered after restart, none lost', async () => {
    let holding = true;
    const held: ServerResponse[] = [];
    rx.plans.set('/batch-killed', [
      (_req, res) => {
        if (holding)
          held.push(res); // held until the worker is dead
        else answer(200)(_req, res);
      },
    ]);
    const w = await create({ url: rx.url('/batch-killed'), events: ['text_message.sent'] });
    await api.sql(`INSERT INTO events (type, data) SELECT 'text_message.sent', jsonb_build_object('i', i) FROM generate_series(1, 40) i`);
    const ids = (await api.sql<{ id: string }>(`SELECT id::text AS id FROM events WHERE type = 'text_message.sent'`)).map((r) => r.id);
    expect(ids).toHaveLength(40);
    await until('requests of the batch in flight', async () => held.length >= 4);
    await worker!.kill('SIGKILL');
    holding = false;
    for (const res of held) res.destroy();
    worker = await startApp({ role: 'worker', shareWith: api, env: ENV });
    const ds = await until(
      'every delivery succeeded after the restart',
      async () => {
        const all = await deliveries(w.id, '?limit=100');
        return all.length === 40 && all.every((d) => d.status === 'succeeded') && all;
      },
      60000,
    );
    expect(new Set(ds.map((d) => d.eventId))).toEqual(new Set(ids));
    const delivered = new Set(
      rx
        .got('/batch-killed')
        .slice(held.length)
        .map((r) => String(r.headers['webhook-id'])),
    );
    expect(delivered).toEqual(new Set(ids));
  }, 120000);

  it('a receiver answering NUL and bytes that are not UTF-8 gets the event once; the attempt is recorded with U+FFFD', async () => {
    const binary: Behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0xc3, 0x21]));
    };
    rx.plans.set('/nul', [binary]);
    const w = await create({ url: rx.url('/nul'), events: ['segment.created'] });
    const eventId = await emit('segment.created', { id: 12 });
    const [d] = await until('the attempt recorded', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    expect(d.attempts).toHaveLength(1);
    expect(d.attempts[0]).toMatchObject({ code: 200, error: null, response: 'ok\ufffd\ufffd\ufffd!' });
    // Past the time after which an unrecorded claim is stale (2 s timeout + 5 s) and a sweep: sent once.
    await sleep(9000);
    expect(rx.got('/nul').map((r) => r.headers['webhook-id'])).toEqual([eventId]);
    const t = await api.http.post(`/api/webhooks/${w.id}/test`).set('Authorization', auth);
    expect(t.status).toBe(200);
    expect(t.body.test).toMatchObject({ success: true, statusCode: 200, response: 'ok\ufffd\ufffd\ufffd!' });
  }, 60000);

  it('attempts the database refuses to record are logged as errors and not sent again without limit; once it records again they count as failed attempts', async () => {
    const path = '/unrecordable';
    const w = await create({ url: rx.url(path), events: ['report.completed'] });
    // The database refuses every attempt of this webhook's deliveries (as it would a value it cannot store).
    await api.sql(`CREATE OR REPLACE FUNCTION test_refuse_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.webhook_id = ${w.id} AND NEW.attempt_count > OLD.attempt_count THEN
          RAISE EXCEPTION 'attempts of webhook % refused by the test', NEW.webhook_id;
        END IF;
        RETURN NEW;
      END $$`);
    await api.sql(`CREATE TRIGGER test_refuse_attempts BEFORE UPDATE ON webhook_deliveries FOR EACH ROW EXECUTE FUNCTION test_refuse_attempts()`);
    const logsBefore = worker!.logs.length;
    const eventId = await emit('report.completed', { id: 5 });
    try {
      await until('the event sent', async () => rx.got(path).length >= 1);
      await until('the failure to record logged as an error', async () =>
        worker!.logs.slice(logsBefore).join('').includes('could not record webhook attempts'),
      );
      // Well past the claim's staleness (2 s timeout + 5 s) and several sweeps: not sent again.
      await sleep(15000);
      expect(rx.got(path)).toHaveLength(1);
      const [d] = await deliveries(w.id);
      expect(d).toMatchObject({ status: 'pending', attempts: [] });
    } finally {
      await api.sql(`DROP TRIGGER test_refuse_attempts ON webhook_deliveries`);
      await api.sql(`DROP FUNCTION test_refuse_attempts()`);
    }
    const [d] = await until('delivered after the lost attempt was counted', async () => {
      const ds = await deliveries(w.id);
      return ds[0]?.status === 'succeeded' && ds;
    });
    expect(d.attempts.map((a) => a.code)).toEqual([null, 200]);
    expect(d.attempts[0].error).toMatch(/not recorded/);
    expect(rx.got(path).map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
  }, 90000);

  it('deleting a webhook while its deliveries drain never deadlocks: every delete answers 200, again and again', async () => {
    const logsBefore = worker!.logs.length;
    for (let round = 0; round < 8; round++) {
      const path = `/drain-delete-${round}`;
      const w = await create({ url: rx.url(path), events: ['company.updated'] });
      await api.sql(`INSERT INTO events (type, data) SELECT 'company.updated', jsonb_build_object('i', i) FROM generate_series(1, 600) i`);
      // Deleted while batches are being sent and recorded (at every round a little later into the drain).
      await until('the drain under way', async () => rx.got(path).length >= 20 + round * 15);
      const res = await api.http.delete(`/api/webhooks/${w.id}`).set('Authorization', auth);
      expect([round, res.status]).toEqual([round, 200]);
      const [{ n }] = await api.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1`, [w.id]);
      expect(n).toBe(0);
    }
    await sleep(1000);
    const logs = [...api.logs, ...worker!.logs.slice(logsBefore)].join('');
    expect(logs).not.toMatch(/deadlock detected/);
  }, 120000);

  describe('SSRF, with the default URL rules', () => {
    it('refuses private, loopback and link-local targets and plain http at creation', async () => {
      const strict = await startApp({ role: 'api', shareWith: api, env: { RATE_LIMIT_ENTERPRISE: '1000000' } });
      try {
        const post = (url: string) =>
          strict.http
            .post('/api/webhooks')
            .set('Authorization', auth)
            .send({ url, events: ['*'] });
        for (const url of [
          'https://127.0.0.1/hook',
          'https://localhost/hook',
          'https://169.254.169.254/latest/meta-data',
          'https://10.1.2.3/hook',
          'https://192.168.1.10/hook',
          'https://[::1]/hook',
          'https://[::ffff:127.0.0.1]/hook',
          'https://[::127.0.0.1]/hook',
          'https://[::ffff:0:127.0.0.1]/hook',
          'https://[2002:7f00:1::]/hook',
          'https://[2001::1]/hook',
          'https://[fd00::1]/hook',
          'https://0.0.0.0/hook',
        ]) {
          const res = await post(url);
          expectError(res, 400, 'validation_failed');
          expect(res.body.error.message).toMatch(/loopback, link-local or private/);
        }
        const http = await post('http://93.184.216.34/hook');
        expectError(http, 400, 'validation_failed');
        expect(http.body.error.message).toContain('https');
      } finally {
        await strict.kill('SIGTERM');
      }
    });

    it('checks the target again at delivery time', async () => {
      const w = await create({ url: rx.url('/ssrf'), events: ['category.deleted'] });
      // The rules changed (or the name now resolves elsewhere) after the webhook was created.
      await worker!.kill('SIGTERM');
      worker = await startApp({ role: 'worker', shareWith: api, env: { ...ENV, WEBHOOK_ALLOW_PRIVATE: 'false' } });
      await emit('category.deleted', { id: 77 });
      const [d] = await until('a refused attempt', async () => {
        const ds = await deliveries(w.id);
        return ds[0]?.attempts.length >= 1 && ds;
      });
      expect(d.attempts[0].code).toBeNull();
      expect(d.attempts[0].error).toMatch(/target refused: .*loopback, link-local or private/);
      expect(rx.got('/ssrf')).toHaveLength(0);
    });
  });
});
