/**
 * Idempotency-Key (docs/decisions/idempotency-keys.md) over HTTP against the real app: replays, parallel requests with
 * one key, mismatches, scoping, what is and is not recorded, expiry and crashed leases, bad keys,
 * and the key holding across two API instances (one of them without Redis) and with Redis stopped.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor, uniqueEmail } from './support/fixtures.js';
import { type PrivateRedis, startPrivateRedis } from './support/services.js';

type Res = { status: number; body: Record<string, unknown>; headers: Record<string, string> };

describe('Idempotency-Key', () => {
  let app: TestApp;
  let second: TestApp;
  let auth: string;
  let otherAuth: string;
  let basicAuth: string;
  let key = 0;
  const newKey = () => `k-${Date.now()}-${++key}:test_case`;

  beforeAll(async () => {
    app = await startApp({ env: { DATABASE_POOL_SIZE: '20', RATE_LIMIT_BASIC: '3' } });
    // A second instance on the same database, without Redis.
    second = await startApp({ databaseUrl: app.databaseUrl!, env: { DATABASE_POOL_SIZE: '20' } });
    auth = await adminToken(app);
    otherAuth = await tokenFor(app, '*', { user: 'other@example.com', plan: 'enterprise' });
    basicAuth = await tokenFor(app, '*', { user: 'basic@example.com', plan: 'basic' });
  }, 180000);
  afterAll(async () => {
    await second?.stop();
    await app?.stop();
  });

  const post = (target: TestApp, path: string, body: object, k: string | null, token = auth) => {
    const r = target.http.post(path).set('Authorization', token);
    if (k !== null) void r.set('Idempotency-Key', k);
    return r.send(body) as unknown as Promise<Res>;
  };
  const countEmail = async (email: string) => Number((await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE email = $1`, [email]))[0].n);
  const keyRows = (k: string) =>
    app.sql<{ state: string; response_status: number | null }>(`SELECT state, response_status FROM idempotency_keys WHERE key = $1`, [k]);

  it('replays a create: same status, body and Location, Idempotent-Replayed, and no second record', async () => {
    const k = newKey();
    const email = uniqueEmail('idem.test');
    const first = await post(app, '/api/contacts', { name: 'Once', email }, k);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post(app, '/api/contacts', { email, name: 'Once' }, k);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(again.headers.location).toBe(first.headers.location);
    // The replay still counts against the plan limit and carries this request's own rate-limit headers.
    expect(Number(again.headers['x-ratelimit-remaining'])).toBeLessThan(Number(first.headers['x-ratelimit-remaining']));
    expect(await countEmail(email)).toBe(1);
    expect(await keyRows(k)).toEqual([{ state: 'done', response_status: 201 }]);
  });

  it('20 parallel requests with one key create exactly one record; each answer is the replay or 409 in progress', async () => {
    const k = newKey();
    const email = uniqueEmail('idem.test');
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => post(i % 2 ? second : app, '/api/contacts', { name: 'Parallel', email }, k)));
    const created = answers.filter((a) => a.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    const originals = created.filter((a) => a.headers['idempotent-replayed'] === undefined);
    expect(originals).toHaveLength(1);
    for (const a of created) expect(a.body).toEqual(originals[0].body);
    for (const a of answers.filter((x) => x.status !== 201)) {
      expectError(a, 409, 'conflict');
      expect(a.headers['retry-after']).toBe('1');
    }
    expect(await countEmail(email)).toBe(1);
    // Once the first has finished, every retry is the replay.
    const later = await post(second, '/api/contacts', { name: 'Parallel', email }, k);
    expect(later.status).toBe(201);
    expect(later.body).toEqual(originals[0].body);
  });

  it('the same key with another body or query is 422 idempotency_key_mismatch', async () => {
    const k = newKey();
    const email = uniqueEmail('idem.test');
    expect((await post(app, '/api/contacts', { name: 'A', email }, k)).status).toBe(201);
    const other = await post(app, '/api/contacts', { name: 'B', email }, k);
    const e = expectError(other, 422, 'idempotency_key_mismatch');
    expect(e.details?.[0].field).toBe('Idempotency-Key');
    // The same body in another key order and spacing is the same request; another query string is not.
    const reordered = await app.http
      .post('/api/contacts')
      .set('Authorization', auth)
      .set('Idempotency-Key', k)
      .type('json')
      .send(`{ "email": "${email}",  "name": "A" }`);
    expect(reordered.status).toBe(201);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    expectError(await post(app, '/api/contacts?x=1', { name: 'A', email }, k), 422, 'idempotency_key_mismatch');
    expect(await countEmail(email)).toBe(1);
  });

  it('is scoped to the account, the method and the path', async () => {
    const k = newKey();
    const e1 = uniqueEmail('idem.test');
    const e2 = uniqueEmail('idem.test');
    const mine = await post(app, '/api/contacts', { name: 'Mine', email: e1 }, k);
    expect(mine.status).toBe(201);
    // Another account reuses the key freely (another body is no mismatch there).
    const theirs = await post(app, '/api/contacts', { name: 'Theirs', email: e2 }, k, otherAuth);
    expect(theirs.status).toBe(201);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    // Another path (the /new spelling is another path) and another method too.
    const e3 = uniqueEmail('idem.test');
    const otherPath = await post(app, '/api/contacts/new', { name: 'Other path', email: e3 }, k);
    expect(otherPath.status).toBe(201);
    expect(otherPath.headers['idempotent-replayed']).toBeUndefined();
    const id = (mine.body.contact as { id: number }).id;
    const patched = await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).set('Idempotency-Key', k).send({ name: 'Patched' });
    expect(patched.status).toBe(200);
    expect(patched.headers['idempotent-replayed']).toBeUndefined();
    expect(await countEmail(e1)).toBe(1);
    expect(await countEmail(e2)).toBe(1);
    expect(await countEmail(e3)).toBe(1);
  });

  it("replays only to the token that made the request, never a token's secret, and with the original's cache headers", async () => {
    // A * token of the admin, with its OAuth access token; and a tokens:write-only token of the same account.
    const parent = await post(app, '/api/account/tokens', { name: 'parent', permissions: ['*'] }, null);
    expect(parent.status).toBe(201);
    const { id: parentId, secret: parentSecret } = parent.body.token as { id: number; secret: string };
    const parentAuth = `Bearer ${parentSecret}`;
    const oauth = await app.http
      .post('/api/oauth/v2/token')
      .send({ grant_type: 'client_credentials', client_id: String(parentId), client_secret: parentSecret });
    expect(oauth.status).toBe(200);
    const accessAuth = `Bearer ${oauth.body.access_token as string}`;
    const writerOnly = await tokenFor(app, 'tokens:write', { plan: 'enterprise' });

    const k = newKey();
    const body = { name: 'deploy', permissions: ['*'] };
    const original = await post(app, '/api/account/tokens', body, k, parentAuth);
    expect(original.status).toBe(201);
    expect(original.headers['cache-control']).toBe('no-store');
    const secret = (original.body.token as { secret: string }).secret;
    expect(secret).toMatch(/^sf_/);

    // Another token of the account (which may not grant *), or the OAuth access token (which may not create tokens), gets no replay.
    for (const other of [writerOnly, accessAuth]) {
      const res = await post(app, '/api/account/tokens', body, k, other);
      expectError(res, 422, 'idempotency_key_mismatch');
      expect(JSON.stringify(res.body)).not.toContain(secret);
    }
    // Without the key, both are refused by the service's own checks, as a replay must not bypass.
    expectError(await post(app, '/api/account/tokens', body, null, writerOnly), 403, 'forbidden');
    expectError(await post(app, '/api/account/tokens', body, null, accessAuth), 403, 'forbidden');

    // The token that made it gets the record without its secret, a notice, and the original's Cache-Control.
    const replay = await post(app, '/api/account/tokens', body, k, parentAuth);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['cache-control']).toBe('no-store');
    expect(replay.headers.pragma).toBe('no-cache');
    expect(replay.body.token).toMatchObject({ id: (original.body.token as { id: number }).id, name: 'deploy', permissions: ['*'] });
    expect((replay.body.token as { secret?: string }).secret).toBeUndefined();
    expect(replay.body.notice).toMatch(/shown only in that answer/);
    expect(JSON.stringify(replay.body)).not.toContain(secret);

    // The secret is never in the database in plaintext.
    const stored = await app.sql<{ body: string; credential: string }>(
      `SELECT convert_from(response_body, 'UTF8') AS body, credential FROM idempotency_keys WHERE key = $1`,
      [k],
    );
    expect(stored).toHaveLength(1);
    expect(stored[0].body).not.toContain(secret);
    expect(stored[0].credential).toBe(`api_token:${parentId}`);
  });

  it('replays 4xx answers made by the exception filter (404, 409 with its details, 400)', async () => {
    const k404 = newKey();
    const missing = await app.http.patch('/api/contacts/2000000000').set('Authorization', auth).set('Idempotency-Key', k404).send({ name: 'x' });
    expectError(missing, 404, 'not_found');
    const missingAgain = await app.http.patch('/api/contacts/2000000000').set('Authorization', auth).set('Idempotency-Key', k404).send({ name: 'x' });
    expect(missingAgain.status).toBe(404);
    expect(missingAgain.body).toEqual(missing.body);
    expect(missingAgain.headers['idempotent-replayed']).toBe('true');

    const email = uniqueEmail('idem.test');
    expect((await post(app, '/api/contacts', { name: 'Taken', email }, null)).status).toBe(201);
    const k409 = newKey();
    const dup = await post(app, '/api/contacts', { name: 'Dup', email }, k409);
    const err = expectError(dup, 409, 'conflict');
    expect(err.details?.[0]).toMatchObject({ field: 'email' });
    // The holder is deleted: a rerun would now create, but the replay answers what was answered.
    await app.sql(`DELETE FROM contacts WHERE email = $1`, [email]);
    const dupAgain = await post(app, '/api/contacts', { name: 'Dup', email }, k409);
    expect(dupAgain.status).toBe(409);
    expect(dupAgain.body).toEqual(dup.body);
    expect(dupAgain.headers['idempotent-replayed']).toBe('true');
    expect(await countEmail(email)).toBe(0);

    const k400 = newKey();
    const bad = await post(app, '/api/contacts', { name: 'Bad', email: 'not-an-email' }, k400);
    expectError(bad, 400, 'validation_failed');
    const badAgain = await post(app, '/api/contacts', { name: 'Bad', email: 'not-an-email' }, k400);
    expect(badAgain.body).toEqual(bad.body);
    expect(badAgain.headers['idempotent-replayed']).toBe('true');
  });

  it('does not record 429 (refused before the route) and replays DELETE', async () => {
    const k = newKey();
    let last: Res | null = null;
    for (let i = 0; i < 5; i++) last = await post(app, '/api/contacts', { name: 'Limited', email: uniqueEmail('idem.test') }, `${k}-${i}`, basicAuth);
    expectError(last!, 429, 'rate_limited');
    expect(await keyRows(`${k}-4`)).toEqual([]);

    const email = uniqueEmail('idem.test');
    const id = ((await post(app, '/api/contacts', { name: 'Doomed', email }, null)).body.contact as { id: number }).id;
    const kd = newKey();
    const del = await app.http.delete(`/api/contacts/${id}`).set('Authorization', auth).set('Idempotency-Key', kd);
    expect(del.status).toBe(200);
    const delAgain = await second.http.delete(`/api/contacts/${id}`).set('Authorization', auth).set('Idempotency-Key', kd);
    expect(delAgain.status).toBe(200);
    expect(delAgain.body).toEqual(del.body);
    expect(delAgain.headers['idempotent-replayed']).toBe('true');
    // Without the key the same delete is a 404.
    expectError(await app.http.delete(`/api/contacts/${id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('forgets a key after its retention, and frees a crashed in-progress key after its lease', async () => {
    const k = newKey();
    const email = uniqueEmail('idem.test');
    expect((await post(app, '/api/contacts', { name: 'Old', email }, k)).status).toBe(201);
    await app.sql(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`, [k]);
    // Expired: the request runs again (here: a 409 since the contact exists), and another body is no mismatch.
    const rerun = await post(app, '/api/contacts', { name: 'Other', email }, k);
    expectError(rerun, 409, 'conflict');
    expect(rerun.headers['idempotent-replayed']).toBeUndefined();

    // A request that crashed left its key in progress: 409 while the lease runs, then the retry runs.
    const kc = newKey();
    const email2 = uniqueEmail('idem.test');
    const uid = (await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = 'admin@example.com'`))[0].id;
    await app.sql(
      `INSERT INTO idempotency_keys (user_id, scope, key, method, path, fingerprint, claim, state, lease_until, expires_at)
       VALUES ($1, encode(sha256(convert_to('POST /api/contacts', 'UTF8')), 'hex'), $2, 'POST', '/api/contacts', $3, gen_random_uuid(), 'running',
               now() + interval '1 hour', now() + interval '1 day')`,
      [uid, kc, '0'.repeat(64)],
    );
    const held = await post(app, '/api/contacts', { name: 'Crash', email: email2 }, kc);
    // The crashed request's body is unknown here (fingerprint differs): the key is refused as used for another request.
    expect([409, 422]).toContain(held.status);
    expect(await countEmail(email2)).toBe(0);
    await app.sql(`UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE key = $1`, [kc]);
    const retried = await post(app, '/api/contacts', { name: 'Crash', email: email2 }, kc);
    expect(retried.status).toBe(201);
    expect(await countEmail(email2)).toBe(1);
    expect(await keyRows(kc)).toEqual([{ state: 'done', response_status: 201 }]);
  });

  it('answers 409 with Retry-After while the same request is still running', async () => {
    const k = newKey();
    const email = uniqueEmail('idem.test');
    const body = { name: 'Running', email };
    // Fingerprint of the real request: claim the key by making the request, then mark it running again.
    expect((await post(app, '/api/contacts', body, k)).status).toBe(201);
    await app.sql(`UPDATE idempotency_keys SET state = 'running', lease_until = now() + interval '1 minute' WHERE key = $1`, [k]);
    const busy = await post(app, '/api/contacts', body, k);
    const e = expectError(busy, 409, 'conflict');
    expect(e.details?.[0].field).toBe('Idempotency-Key');
    expect(busy.headers['retry-after']).toBe('1');
  });

  it('refuses a malformed key with 400 naming the header, and ignores the header on reads and public routes', async () => {
    for (const bad of ['', 'has space', 'x'.repeat(256), 'ümlaut', 'a/b', 'a,b']) {
      const r = await app.http
        .post('/api/contacts')
        .set('Authorization', auth)
        .set('Idempotency-Key', bad)
        .send({ name: 'Bad key', email: uniqueEmail('idem.test') });
      const e = expectError(r, 400, 'validation_failed');
      expect(e.message).toContain('Idempotency-Key');
      expect(e.details?.[0].field).toBe('Idempotency-Key');
    }
    expect(
      (
        await app.http
          .post('/api/contacts')
          .set('Authorization', auth)
          .set('Idempotency-Key', 'x'.repeat(255))
          .send({ name: 'Long key', email: uniqueEmail('idem.test') })
      ).status,
    ).toBe(201);
    expect((await app.http.get('/api/contacts').set('Authorization', auth).set('Idempotency-Key', 'not valid!')).status).toBe(200);
    // Multipart uploads take a key and are matched by their size (their bytes are streamed, not fingerprinted).
    const key = newKey();
    const upload = (content: string) =>
      app.http.post('/api/assets').set('Authorization', auth).set('Idempotency-Key', key).field('title', 'x').attach('file', Buffer.from(content), 'a.txt');
    const up = await upload('hi');
    expect(up.status).toBe(201);
    const again = await upload('hi');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.asset.id).toBe(up.body.asset.id);
    expectError(await upload('a longer file'), 422, 'idempotency_key_mismatch');
  });
});

describe('Idempotency-Key with Redis stopped', () => {
  let redis: PrivateRedis;
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    const dbApp = await startApp({ noRedis: true });
    await dbApp.kill();
    app = await startApp({ databaseUrl: dbApp.databaseUrl!, redisUrl: redis.url });
    auth = await adminToken(app);
  }, 180000);
  afterAll(async () => {
    await app?.stop();
    await redis?.destroy();
  });

  it('replays from PostgreSQL while Redis is down, and does not record a 503', async () => {
    const report = await app.http.post('/api/reports').set('Authorization', auth).send({ name: 'Idem', type: 'marketing' });
    expect(report.status).toBe(201);
    await redis.stop();
    await new Promise((r) => setTimeout(r, 300));

    const email = uniqueEmail('idem.test');
    const k = `redis-down-${Date.now()}`;
    const first = await app.http.post('/api/contacts').set('Authorization', auth).set('Idempotency-Key', k).send({ name: 'No Redis', email });
    expect(first.status).toBe(201);
    const again = await app.http.post('/api/contacts').set('Authorization', auth).set('Idempotency-Key', k).send({ name: 'No Redis', email });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);

    // A 503 (the job queue is unreachable) is not kept: the retry runs again.
    const kr = `run-${Date.now()}`;
    const run = await app.http.post(`/api/reports/${report.body.report.id}/run`).set('Authorization', auth).set('Idempotency-Key', kr);
    expectError(run, 503, 'unavailable');
    expect(await app.sql(`SELECT 1 FROM idempotency_keys WHERE key = $1`, [kr])).toEqual([]);
    await redis.start();
    const deadline = Date.now() + 20000;
    let rerun = await app.http.post(`/api/reports/${report.body.report.id}/run`).set('Authorization', auth).set('Idempotency-Key', kr);
    while (rerun.status === 503 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300));
      rerun = await app.http.post(`/api/reports/${report.body.report.id}/run`).set('Authorization', auth).set('Idempotency-Key', kr);
    }
    expect(rerun.status).toBe(200);
    expect(rerun.headers['idempotent-replayed']).toBeUndefined();
  });
});
