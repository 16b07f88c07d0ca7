import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { tokenFor, ISO, bearer } from './support/fixtures.js';

const BASE = '/api/account/tokens';

describe('account tokens', () => {
  let app: TestApp;
  let alice: string; // '*' token of alice
  let bob: string; // '*' token of bob

  beforeAll(async () => {
    app = await startApp();
    alice = await tokenFor(app, '*', { user: 'alice@example.com', plan: 'enterprise' });
    bob = await tokenFor(app, '*', { user: 'bob@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const create = (auth: string, body: object, path = BASE) => app.http.post(path).set('Authorization', auth).send(body);

  it('creates a token (201) with the secret shown once, and the token works with its permissions', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString().replace('Z', '+00:00');
    const res = await create(alice, { name: 'CRM sync', permissions: ['contacts:read', 'contacts:read'], expiresAt });
    expect(res.status).toBe(201);
    const t = res.body.token;
    expect(t).toEqual({
      id: expect.any(Number),
      name: 'CRM sync',
      prefix: expect.stringMatching(/^sf_.{6}$/),
      permissions: ['contacts:read'],
      expiresAt: expect.stringMatching(ISO),
      lastUsedAt: null,
      createdAt: expect.stringMatching(ISO),
      revokedAt: null,
      state: 'active',
      secret: expect.stringMatching(/^sf_[A-Za-z0-9_-]{43}$/),
    });
    expect(t.secret.startsWith(t.prefix)).toBe(true);
    expect(Math.abs(new Date(t.expiresAt).getTime() - new Date(expiresAt).getTime())).toBeLessThan(1000);

    expect((await app.http.get('/api/contacts').set('Authorization', bearer(t.secret))).status).toBe(200);
    expectError(await create(bearer(t.secret), { name: 'x', permissions: ['contacts:read'] }), 403, 'forbidden');

    // the secret is never shown again, and only its hash is stored
    const one = await app.http.get(`${BASE}/${t.id}`).set('Authorization', alice);
    expect(one.status).toBe(200);
    expect(one.body.token).not.toHaveProperty('secret');
    const list = await app.http.get(BASE).set('Authorization', alice);
    expect(JSON.stringify(list.body)).not.toContain(t.secret);
    const [row] = await app.sql<{ token_hash: string }>('SELECT token_hash FROM api_tokens WHERE id = $1', [t.id]);
    expect(row.token_hash).not.toContain(t.secret.slice(3));
  });

  it('creates through the /new spelling too, without expiry', async () => {
    const res = await create(alice, { name: 'no expiry', permissions: ['deals:read'], expiresAt: null }, `${BASE}/new`);
    expect(res.status).toBe(201);
    expect(res.body.token.expiresAt).toBeNull();
  });

  it('validates the body', async () => {
    const unknown = expectError(await create(alice, { name: 'x', permissions: ['contacts:read', 'contacts:admin'] }), 400, 'validation_failed');
    expect(unknown.details?.map((d) => d.field)).toEqual(['permissions']);
    expectError(await create(alice, { name: 'x', permissions: [] }), 400, 'validation_failed');
    expectError(await create(alice, { name: 'x', permissions: 'contacts:read' }), 400, 'validation_failed');
    expectError(await create(alice, { permissions: ['contacts:read'] }), 400, 'validation_failed');
    expectError(await create(alice, { name: '', permissions: ['contacts:read'] }), 400, 'validation_failed');
    const past = expectError(
      await create(alice, { name: 'x', permissions: ['contacts:read'], expiresAt: '2020-01-01T00:00:00+00:00' }),
      400,
      'validation_failed',
    );
    expect(past.details).toEqual([{ field: 'expiresAt', message: 'must be in the future' }]);
    expectError(await create(alice, { name: 'x', permissions: ['contacts:read'], expiresAt: '2099-01-01T00:00:00' }), 400, 'validation_failed');
    const extra = expectError(await create(alice, { name: 'x', permissions: ['contacts:read'], secret: 'sf_mine' }), 400, 'validation_failed');
    expect(extra.details?.map((d) => d.field)).toEqual(['secret']);
  });

  describe('no escalation', () => {
    let limited: string;

    beforeAll(async () => {
      const res = await create(alice, { name: 'token manager', permissions: ['tokens:read', 'tokens:write', 'tokens:delete', 'contacts:read'] });
      limited = bearer(res.body.token.secret);
    });

    it('refuses permissions the calling token lacks with 403, naming them', async () => {
      const err = expectError(await create(limited, { name: 'more', permissions: ['contacts:read', 'contacts:write', 'deals:delete'] }), 403, 'forbidden');
      expect(err.message).toContain('contacts:write');
      expect(err.message).toContain('deals:delete');
      expect(err.message).not.toContain('contacts:read,');
      expectError(await create(limited, { name: 'all', permissions: ['*'] }), 403, 'forbidden');
    });

    it('allows a subset of its own permissions', async () => {
      const res = await create(limited, { name: 'less', permissions: ['contacts:read', 'tokens:read'] });
      expect(res.status).toBe(201);
      expect(res.body.token.permissions).toEqual(['contacts:read', 'tokens:read']);
    });

    it('an OAuth access token cannot create API tokens at all, not even with fewer permissions (403)', async () => {
      const parent = await create(alice, { name: 'oauth parent', permissions: ['tokens:write', 'contacts:read'] });
      const grant = await app.http
        .post('/api/oauth/v2/token')
        .send({ grant_type: 'client_credentials', client_id: String(parent.body.token.id), client_secret: parent.body.token.secret });
      expect(grant.status).toBe(200);
      const at = bearer(grant.body.access_token);
      expectError(await create(at, { name: 'more', permissions: ['contacts:write'] }), 403, 'forbidden');
      const same = expectError(await create(at, { name: 'same', permissions: ['contacts:read'] }), 403, 'forbidden');
      expect(same.message).toMatch(/access token/);
      const [{ n }] = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM api_tokens WHERE name = 'same'`);
      expect(n).toBe(0);
    });

    it('needs tokens:read, tokens:write and tokens:delete for the routes', async () => {
      const reader = bearer((await create(alice, { name: 'reader', permissions: ['tokens:read'] })).body.token.secret);
      expect((await app.http.get(BASE).set('Authorization', reader)).status).toBe(200);
      expectError(await create(reader, { name: 'x', permissions: ['tokens:read'] }), 403, 'forbidden');
      expectError(await app.http.delete(`${BASE}/1`).set('Authorization', reader), 403, 'forbidden');
      const none = bearer((await create(alice, { name: 'none', permissions: ['contacts:read'] })).body.token.secret);
      expectError(await app.http.get(BASE).set('Authorization', none), 403, 'forbidden');
      expectError(await app.http.get(BASE), 401, 'unauthorized');
    });
  });

  describe('isolation between users', () => {
    it("a user never sees or touches another user's tokens (404)", async () => {
      const mine = (await create(alice, { name: 'alice private', permissions: ['contacts:read'] })).body.token;
      const grant = await app.http
        .post('/api/oauth/v2/token')
        .type('form')
        .send({ grant_type: 'client_credentials', client_id: String(mine.id), client_secret: mine.secret });
      const at = bearer(grant.body.access_token);

      const bobList = await app.http.get(`${BASE}?limit=200`).set('Authorization', bob);
      expect(bobList.status).toBe(200);
      expect(bobList.body.tokens.map((t: { id: number }) => t.id)).not.toContain(mine.id);
      expect(bobList.body.tokens.map((t: { name: string }) => t.name)).not.toContain('alice private');
      const [{ n }] = await app.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE u.email = 'bob@example.com'`,
      );
      expect(bobList.body.total).toBe(n);

      expectError(await app.http.get(`${BASE}/${mine.id}`).set('Authorization', bob), 404, 'not_found');
      expectError(await app.http.delete(`${BASE}/${mine.id}`).set('Authorization', bob), 404, 'not_found');
      expectError(await app.http.delete(`${BASE}/${mine.id}/delete`).set('Authorization', bob), 404, 'not_found');

      // neither the token nor the access tokens issued from it were touched
      expect((await app.http.get('/api/contacts').set('Authorization', bearer(mine.secret))).status).toBe(200);
      expect((await app.http.get('/api/contacts').set('Authorization', at)).status).toBe(200);
      const [row] = await app.sql<{ n: number }>('SELECT count(*)::int AS n FROM oauth_access_tokens WHERE api_token_id = $1 AND revoked_at IS NULL', [
        mine.id,
      ]);
      expect(row.n).toBe(1);
      expect((await app.http.get(`${BASE}/${mine.id}`).set('Authorization', alice)).body.token.state).toBe('active');
    });

    it('unknown and malformed ids are 404', async () => {
      expectError(await app.http.get(`${BASE}/999999`).set('Authorization', alice), 404, 'not_found');
      expectError(await app.http.get(`${BASE}/abc`).set('Authorization', alice), 404, 'not_found');
      expectError(await app.http.delete(`${BASE}/99999999999`).set('Authorization', alice), 404, 'not_found');
    });
  });

  describe('revocation', () => {
    it('revokes (both spellings), answers the token as it was, and the token and its access tokens get 401 at once', async () => {
      for (const suffix of ['', '/delete']) {
        const t = (await create(alice, { name: `to revoke${suffix}`, permissions: ['contacts:read'] })).body.token;
        const grant = await app.http.post('/api/oauth/v2/token').send({ grant_type: 'client_credentials', client_id: String(t.id), client_secret: t.secret });
        const at = bearer(grant.body.access_token);
        expect((await app.http.get('/api/contacts').set('Authorization', bearer(t.secret))).status).toBe(200);
        expect((await app.http.get('/api/contacts').set('Authorization', at)).status).toBe(200);

        const del = await app.http.delete(`${BASE}/${t.id}${suffix}`).set('Authorization', alice);
        expect(del.status).toBe(200);
        expect(del.body.token).toMatchObject({ id: t.id, name: `to revoke${suffix}`, state: 'active', revokedAt: null });
        expect(del.body.token).not.toHaveProperty('secret');

        expectError(await app.http.get('/api/contacts').set('Authorization', bearer(t.secret)), 401, 'unauthorized');
        expectError(await app.http.get('/api/contacts').set('Authorization', at), 401, 'unauthorized');

        const after = await app.http.get(`${BASE}/${t.id}`).set('Authorization', alice);
        expect(after.body.token).toMatchObject({ state: 'revoked', revokedAt: expect.stringMatching(ISO) });
        // again: nothing changes, the token is answered as it is
        const again = await app.http.delete(`${BASE}/${t.id}`).set('Authorization', alice);
        expect(again.status).toBe(200);
        expect(again.body.token.revokedAt).toBe(after.body.token.revokedAt);
      }
    });

    it('revoking the token you are calling with works and takes effect at once', async () => {
      const self = (await create(alice, { name: 'self', permissions: ['tokens:read', 'tokens:delete'] })).body.token;
      const auth = bearer(self.secret);
      expect((await app.http.get(BASE).set('Authorization', auth)).status).toBe(200);
      const del = await app.http.delete(`${BASE}/${self.id}`).set('Authorization', auth);
      expect(del.status).toBe(200);
      expect(del.body.token.state).toBe('active');
      expectError(await app.http.get(BASE).set('Authorization', auth), 401, 'unauthorized');
    });

    it('an access token revoking its own parent loses access at once', async () => {
      const parent = (await create(alice, { name: 'parent', permissions: ['tokens:delete', 'contacts:read'] })).body.token;
      const grant = await app.http
        .post('/api/oauth/v2/token')
        .send({ grant_type: 'client_credentials', client_id: String(parent.id), client_secret: parent.secret });
      const at = bearer(grant.body.access_token);
      expect((await app.http.delete(`${BASE}/${parent.id}`).set('Authorization', at)).status).toBe(200);
      expectError(await app.http.get('/api/contacts').set('Authorization', at), 401, 'unauthorized');
    });
  });

  describe("a token's children never outlive it", () => {
    const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString().replace('Z', '+00:00');

    it("caps a child's expiry at its creator's: omitted, null or later becomes the creator's; earlier stays", async () => {
      const parent = (await create(alice, { name: 'ten minutes', permissions: ['tokens:write', 'contacts:read'], expiresAt: inMinutes(10) })).body.token;
      const auth = bearer(parent.secret);
      const parentExpiry = new Date(parent.expiresAt).getTime();
      for (const expiresAt of [undefined, null, inMinutes(60 * 24 * 365)]) {
        const child = await create(auth, { name: 'child', permissions: ['contacts:read'], ...(expiresAt === undefined ? {} : { expiresAt }) });
        expect(child.status).toBe(201);
        expect(new Date(child.body.token.expiresAt).getTime()).toBe(parentExpiry);
        const [row] = await app.sql<{ same: boolean }>(
          'SELECT c.expires_at = p.expires_at AS same FROM api_tokens c, api_tokens p WHERE c.id = $1 AND p.id = $2',
          [child.body.token.id, parent.id],
        );
        expect(row.same).toBe(true);
      }
      const earlier = await create(auth, { name: 'shorter', permissions: ['contacts:read'], expiresAt: inMinutes(5) });
      expect(new Date(earlier.body.token.expiresAt).getTime()).toBeLessThan(parentExpiry);
    });

    it('a token without expiry creates children without expiry', async () => {
      const parent = (await create(alice, { name: 'forever', permissions: ['tokens:write', 'contacts:read'] })).body.token;
      const child = await create(bearer(parent.secret), { name: 'child forever', permissions: ['contacts:read'] });
      expect(child.body.token.expiresAt).toBeNull();
    });

    it('revoking a token revokes the tokens it created, transitively, and their access tokens', async () => {
      const parent = (await create(alice, { name: 'root', permissions: ['tokens:write', 'contacts:read'] })).body.token;
      const child = (await create(bearer(parent.secret), { name: 'child', permissions: ['tokens:write', 'contacts:read'] })).body.token;
      const grandchild = (await create(bearer(child.secret), { name: 'grandchild', permissions: ['contacts:read'] })).body.token;
      const sibling = (await create(alice, { name: 'unrelated', permissions: ['contacts:read'] })).body.token;
      const grant = await app.http
        .post('/api/oauth/v2/token')
        .send({ grant_type: 'client_credentials', client_id: String(grandchild.id), client_secret: grandchild.secret });
      const at = bearer(grant.body.access_token);
      for (const t of [bearer(parent.secret), bearer(child.secret), bearer(grandchild.secret), at]) {
        expect((await app.http.get('/api/contacts').set('Authorization', t)).status).toBe(200);
      }

      expect((await app.http.delete(`${BASE}/${parent.id}`).set('Authorization', alice)).status).toBe(200);

      for (const t of [bearer(parent.secret), bearer(child.secret), bearer(grandchild.secret), at]) {
        expectError(await app.http.get('/api/contacts').set('Authorization', t), 401, 'unauthorized');
      }
      for (const t of [child, grandchild]) expect((await app.http.get(`${BASE}/${t.id}`).set('Authorization', alice)).body.token.state).toBe('revoked');
      expect((await app.http.get('/api/contacts').set('Authorization', bearer(sibling.secret))).status).toBe(200);
    });
  });

  describe('reading and revoking never reach beyond the caller', () => {
    it('revoking a token holding permissions the caller lacks is a 403, and the token keeps working', async () => {
      const deleter = bearer((await create(alice, { name: 'deleter', permissions: ['tokens:delete', 'tokens:read'] })).body.token.secret);
      const strong = (await create(alice, { name: 'strong', permissions: ['*'] })).body.token;
      const err = expectError(await app.http.delete(`${BASE}/${strong.id}`).set('Authorization', deleter), 403, 'forbidden');
      expect(err.message).toContain('*');
      expect((await app.http.get('/api/contacts').set('Authorization', bearer(strong.secret))).status).toBe(200);
      const weak = (await create(alice, { name: 'weak', permissions: ['tokens:read'] })).body.token;
      expect((await app.http.delete(`${BASE}/${weak.id}`).set('Authorization', deleter)).status).toBe(200);
    });

    it('reading a token holding permissions the caller lacks is a 403; the list leaves such tokens out', async () => {
      const reader = bearer((await create(alice, { name: 'narrow reader', permissions: ['tokens:read', 'contacts:read'] })).body.token.secret);
      const strong = (await create(alice, { name: 'strong sibling', permissions: ['deals:delete', 'contacts:read'] })).body.token;
      const weak = (await create(alice, { name: 'weak sibling', permissions: ['contacts:read'] })).body.token;
      const err = expectError(await app.http.get(`${BASE}/${strong.id}`).set('Authorization', reader), 403, 'forbidden');
      expect(err.message).toContain('deals:delete');
      expect((await app.http.get(`${BASE}/${weak.id}`).set('Authorization', reader)).body.token.permissions).toEqual(['contacts:read']);
      const list = await app.http.get(`${BASE}?limit=200`).set('Authorization', reader);
      const ids = list.body.tokens.map((t: { id: number }) => t.id);
      expect(ids).toContain(weak.id);
      expect(ids).not.toContain(strong.id);
      expect(list.body.tokens.every((t: { permissions: string[] }) => t.permissions.every((p) => p === 'tokens:read' || p === 'contacts:read'))).toBe(true);
      expect(list.body.total).toBe(list.body.tokens.length);
    });
  });

  it('sends the new secret with Cache-Control: no-store', async () => {
    const res = await create(alice, { name: 'uncached', permissions: ['contacts:read'] });
    expect(res.status).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['pragma']).toBe('no-cache');
  });

  describe('listing', () => {
    it("lists the caller's tokens with states, paging and ordering, never secrets", async () => {
      const expired = (await create(alice, { name: 'soon expired', permissions: ['contacts:read'] })).body.token;
      await app.sql(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
      const res = await app.http.get(`${BASE}?orderBy=name&orderByDir=desc&limit=200`).set('Authorization', alice);
      expect(res.status).toBe(200);
      const [{ n }] = await app.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE u.email = 'alice@example.com'`,
      );
      expect(res.body.total).toBe(n);
      expect(res.body.tokens).toHaveLength(n);
      const names = res.body.tokens.map((t: { name: string }) => t.name);
      expect(names).toEqual([...names].sort((a: string, b: string) => (a < b ? 1 : a > b ? -1 : 0)));
      for (const t of res.body.tokens)
        expect(Object.keys(t).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'permissions', 'prefix', 'revokedAt', 'state']);
      expect(res.body.tokens.find((t: { id: number }) => t.id === expired.id).state).toBe('expired');
      expect(new Set(res.body.tokens.map((t: { state: string }) => t.state))).toEqual(new Set(['active', 'expired', 'revoked']));

      const page = await app.http.get(`${BASE}?limit=1&page=2`).set('Authorization', alice);
      expect(page.body.total).toBe(n);
      expect(page.body.tokens).toHaveLength(1);
      expectError(await app.http.get(`${BASE}?orderBy=token_hash`).set('Authorization', alice), 400, 'validation_failed');
      expectError(await app.http.get(`${BASE}?search=x`).set('Authorization', alice), 400, 'validation_failed');
    });

    it('records when a token was last used', async () => {
      const t = (await create(alice, { name: 'used', permissions: ['contacts:read'] })).body.token;
      expect((await app.http.get('/api/contacts').set('Authorization', bearer(t.secret))).status).toBe(200);
      let lastUsedAt: string | null = null;
      for (let i = 0; i < 20 && !lastUsedAt; i++) {
        lastUsedAt = (await app.http.get(`${BASE}/${t.id}`).set('Authorization', alice)).body.token.lastUsedAt;
        if (!lastUsedAt) await new Promise((r) => setTimeout(r, 100));
      }
      expect(lastUsedAt).toMatch(ISO);
    });
  });
});
