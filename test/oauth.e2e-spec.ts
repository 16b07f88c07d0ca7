import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as oidc from 'openid-client';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';

const TOKEN = '/api/oauth/v2/token';
const REVOKE = '/api/oauth/v2/revoke';

/** RFC 6749 §2.3.1: each part form-urlencoded, then base64 of "id:secret". */
const basic = (id: number | string, secret: string) =>
  'Basic ' + Buffer.from(`${encodeURIComponent(String(id))}:${encodeURIComponent(secret)}`).toString('base64');

interface Client {
  id: number;
  secret: string;
}

/** Creates an API token through the account API (the calling token needs tokens:write and the permissions). */
async function newClient(app: TestApp, admin: string, permissions: string[], extra: Record<string, unknown> = {}): Promise<Client> {
  const res = await app.http.post('/api/account/tokens').set('Authorization', admin).send({ name: 'oauth client', permissions, ...extra });
  if (res.status !== 201) throw new Error(`token create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.token.id, secret: res.body.token.secret };
}

async function accessToken(app: TestApp, c: Client): Promise<string> {
  const res = await app.http.post(TOKEN).type('form').send({ grant_type: 'client_credentials', client_id: String(c.id), client_secret: c.secret });
  if (res.status !== 200) throw new Error(`token grant failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.access_token;
}

const contacts = (app: TestApp, token: string) => app.http.get('/api/contacts').set('Authorization', `Bearer ${token}`);

/**
 * The revocation reaches another instance through Redis pub/sub: the message may be read a moment
 * after the revoking request has answered, so the other instance gets up to a second, far below the
 * token cache's 30 s (without the broadcast this still fails).
 */
async function refusedWithinASecond(app: TestApp, token: string): Promise<void> {
  const deadline = Date.now() + 1000;
  let res = await contacts(app, token);
  while (res.status === 200 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    res = await contacts(app, token);
  }
  expectError(res, 401, 'unauthorized');
}

describe('OAuth2 endpoints', () => {
  let app: TestApp;
  let admin: string;
  let client: Client;

  beforeAll(async () => {
    // A generous OAuth limit here: the limit itself is tested on its own instance below.
    app = await startApp({ env: { OAUTH_RATE_LIMIT_PER_MINUTE: '1000' } });
    admin = await adminToken(app);
    client = await newClient(app, admin, ['contacts:read']);
  });
  afterAll(async () => app?.stop());

  describe('client credentials grant', () => {
    function expectTokenResponse(res: { status: number; body: Record<string, unknown>; headers: Record<string, string> }, ttl = 3600) {
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ access_token: expect.stringMatching(/^sfat_[A-Za-z0-9_-]{40,}$/), token_type: 'Bearer', expires_in: ttl });
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['pragma']).toBe('no-cache');
      expect(res.headers['content-type']).toMatch(/^application\/json/);
    }

    it('issues a token for form-encoded credentials (client_secret_post)', async () => {
      const res = await app.http.post(TOKEN).type('form').send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret });
      expectTokenResponse(res);
    });

    it('issues a token for JSON credentials, with client_id as a string or a number', async () => {
      expectTokenResponse(await app.http.post(TOKEN).send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret }));
      expectTokenResponse(await app.http.post(TOKEN).send({ grant_type: 'client_credentials', client_id: client.id, client_secret: client.secret }));
    });

    it('issues a token for HTTP Basic credentials (client_secret_basic), also with client_id repeated in the body', async () => {
      expectTokenResponse(await app.http.post(TOKEN).set('Authorization', basic(client.id, client.secret)).type('form').send({ grant_type: 'client_credentials' }));
      expectTokenResponse(
        await app.http.post(TOKEN).set('Authorization', basic(client.id, client.secret)).type('form').send({ grant_type: 'client_credentials', client_id: String(client.id) }),
      );
    });

    it('accepts and ignores extension parameters such as scope and audience', async () => {
      const res = await app.http
        .post(TOKEN)
        .type('form')
        .send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret, scope: 'contacts:write everything', audience: 'x', resource: 'y' });
      expectTokenResponse(res);
      // scope does not widen the token: it still has only contacts:read
      const write = await app.http.post('/api/contacts').set('Authorization', `Bearer ${res.body.access_token}`).send({ name: 'X', email: 'scope@example.com' });
      expectError(write, 403, 'forbidden');
    });

    it('gives a Bearer token that acts as the API token: same user, same permissions, every route', async () => {
      const writer = await newClient(app, admin, ['contacts:read', 'contacts:write']);
      const at = await accessToken(app, writer);
      const list = await contacts(app, at);
      expect(list.status).toBe(200);
      expect(list.body).toEqual({ total: expect.any(Number), contacts: expect.any(Array) });
      expect(list.headers['x-ratelimit-limit']).toBe('10000'); // the owner's plan limit
      const created = await app.http.post('/api/contacts').set('Authorization', `Bearer ${at}`).send({ name: 'Via OAuth', email: 'via-oauth@example.com' });
      expect(created.status).toBe(201);
      const [owner] = await app.sql<{ user_id: number }>('SELECT user_id FROM api_tokens WHERE id = $1', [writer.id]);
      expect(created.body.contact.createdBy).toBe(owner.user_id);
      // and not more than the API token
      expectError(await app.http.delete(`/api/contacts/${created.body.contact.id}`).set('Authorization', `Bearer ${at}`), 403, 'forbidden');
      expectError(await app.http.get('/api/account/tokens').set('Authorization', `Bearer ${at}`), 403, 'forbidden');
    });

    it('stores only a hash of the access token, linked to its API token', async () => {
      const at = await accessToken(app, client);
      const rows = await app.sql<{ api_token_id: number; token_hash: string; ttl: number }>(
        `SELECT api_token_id, token_hash, extract(epoch FROM expires_at - created_at)::int AS ttl FROM oauth_access_tokens ORDER BY id DESC LIMIT 1`,
      );
      expect(rows[0].api_token_id).toBe(client.id);
      expect(rows[0].token_hash).not.toContain(at);
      expect(rows[0].ttl).toBeGreaterThanOrEqual(3599);
      expect(rows[0].ttl).toBeLessThanOrEqual(3601);
    });

    it('never lets an access token outlive its API token', async () => {
      const soon = new Date(Date.now() + 120_000).toISOString();
      const shortLived = await newClient(app, admin, ['contacts:read'], { expiresAt: soon });
      const res = await app.http.post(TOKEN).send({ grant_type: 'client_credentials', client_id: String(shortLived.id), client_secret: shortLived.secret });
      expect(res.status).toBe(200);
      expect(res.body.expires_in).toBeGreaterThan(100);
      expect(res.body.expires_in).toBeLessThanOrEqual(120);
    });
  });

  describe('RFC 6749 errors', () => {
    const form = () => app.http.post(TOKEN).type('form');

    it('unsupported_grant_type 400 for other grant types', async () => {
      for (const grant of ['password', 'authorization_code', 'refresh_token']) {
        const res = await form().send({ grant_type: grant, client_id: String(client.id), client_secret: client.secret });
        expectError(res, 400, 'unsupported_grant_type');
        expect(res.headers['cache-control']).toBe('no-store');
      }
    });

    it('invalid_request 400 for a missing grant_type, a repeated parameter, a lone secret, two auth methods or a malformed body', async () => {
      expectError(await form().send({ client_id: String(client.id), client_secret: client.secret }), 400, 'invalid_request');
      expectError(await form().send(`grant_type=client_credentials&grant_type=client_credentials&client_id=${client.id}&client_secret=${client.secret}`), 400, 'invalid_request');
      expectError(await form().send({ grant_type: 'client_credentials', client_secret: client.secret }), 400, 'invalid_request');
      expectError(
        await form().set('Authorization', basic(client.id, client.secret)).send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret }),
        400,
        'invalid_request',
      );
      expectError(await app.http.post(TOKEN).set('Content-Type', 'application/json').send('{"grant_type":'), 400, 'invalid_request');
      expectError(await app.http.post(TOKEN).send(['client_credentials']), 400, 'invalid_request');
      expectError(await app.http.post(TOKEN).send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: 42 }), 400, 'invalid_request');
    });

    it('invalid_client 401 with WWW-Authenticate for missing or wrong credentials', async () => {
      const cases = [
        form().send({ grant_type: 'client_credentials' }),
        form().send({ grant_type: 'client_credentials', client_id: String(client.id) }),
        form().send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret + 'x' }),
        form().send({ grant_type: 'client_credentials', client_id: '999999', client_secret: client.secret }),
        form().send({ grant_type: 'client_credentials', client_id: 'abc', client_secret: client.secret }),
        form().send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: 'sf_' + 'A'.repeat(43) }),
      ];
      for (const res of await Promise.all(cases)) {
        expectError(res, 401, 'invalid_client');
        expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
      }
    });

    it('invalid_client 401 with WWW-Authenticate: Basic for wrong or malformed Basic credentials', async () => {
      for (const header of [basic(client.id, client.secret + 'x'), basic(client.id + 1000, client.secret), 'Basic !!!', 'Basic ' + Buffer.from('no-colon').toString('base64')]) {
        const res = await form().set('Authorization', header).send({ grant_type: 'client_credentials' });
        expectError(res, 401, 'invalid_client');
        expect(res.headers['www-authenticate']).toMatch(/^Basic /);
      }
    });

    it('an access token is not a client secret', async () => {
      const at = await accessToken(app, client);
      expectError(await form().send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: at }), 401, 'invalid_client');
    });

    it('invalid_grant 400 for a revoked or expired API token with the right secret', async () => {
      const revoked = await newClient(app, admin, ['contacts:read']);
      expect((await app.http.delete(`/api/account/tokens/${revoked.id}`).set('Authorization', admin)).status).toBe(200);
      expectError(await form().send({ grant_type: 'client_credentials', client_id: String(revoked.id), client_secret: revoked.secret }), 400, 'invalid_grant');

      const expired = await newClient(app, admin, ['contacts:read']);
      await app.sql(`UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE id = $1`, [expired.id]);
      expectError(await form().send({ grant_type: 'client_credentials', client_id: String(expired.id), client_secret: expired.secret }), 400, 'invalid_grant');
    });

    it('415 for a body that is neither form nor JSON', async () => {
      expectError(await app.http.post(TOKEN).set('Content-Type', 'text/plain').send('grant_type=client_credentials'), 415, 'unsupported_media_type');
    });

    it('the token endpoint is POST only', async () => {
      expectError(await app.http.get(TOKEN), 405, 'method_not_allowed');
    });
  });

  describe('revocation (RFC 7009)', () => {
    it('revokes an access token by possession; it gets 401 at once, sibling tokens keep working', async () => {
      const at = await accessToken(app, client);
      const sibling = await accessToken(app, client);
      expect((await contacts(app, at)).status).toBe(200); // cached by now
      const res = await app.http.post(REVOKE).type('form').send({ token: at, token_type_hint: 'access_token' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({});
      expect(res.headers['cache-control']).toBe('no-store');
      expectError(await contacts(app, at), 401, 'unauthorized');
      expect((await contacts(app, sibling)).status).toBe(200);
      expect((await contacts(app, client.secret)).status).toBe(200);
    });

    it('revokes an API token (JSON body) with every access token issued from it', async () => {
      const parent = await newClient(app, admin, ['contacts:read']);
      const a1 = await accessToken(app, parent);
      const a2 = await accessToken(app, parent);
      for (const t of [parent.secret, a1, a2]) expect((await contacts(app, t)).status).toBe(200);
      const res = await app.http.post(REVOKE).send({ token: parent.secret });
      expect(res.status).toBe(200);
      for (const t of [parent.secret, a1, a2]) expectError(await contacts(app, t), 401, 'unauthorized');
      const rows = await app.sql<{ n: number }>('SELECT count(*)::int AS n FROM oauth_access_tokens WHERE api_token_id = $1 AND revoked_at IS NULL', [parent.id]);
      expect(rows[0].n).toBe(0);
      expectError(await app.http.post(TOKEN).send({ grant_type: 'client_credentials', client_id: String(parent.id), client_secret: parent.secret }), 400, 'invalid_grant');
    });

    it('answers 200 for unknown, malformed and already revoked tokens', async () => {
      for (const token of ['sfat_unknown', 'sf_unknown', 'not-a-token', 'x'.repeat(3000)]) {
        const res = await app.http.post(REVOKE).type('form').send({ token });
        expect(res.status).toBe(200);
        expect(res.body).toEqual({});
      }
      const at = await accessToken(app, client);
      expect((await app.http.post(REVOKE).send({ token: at })).status).toBe(200);
      expect((await app.http.post(REVOKE).send({ token: at })).status).toBe(200);
    });

    it('invalid_request 400 without token', async () => {
      expectError(await app.http.post(REVOKE).type('form').send({ token_type_hint: 'access_token' }), 400, 'invalid_request');
      expectError(await app.http.post(REVOKE), 400, 'invalid_request');
    });

    it('with client authentication: valid credentials revoke the client\'s own tokens, wrong ones are invalid_client, others\' tokens unauthorized_client', async () => {
      const other = await newClient(app, admin, ['contacts:read']);
      const mine = await accessToken(app, client);
      const theirs = await accessToken(app, other);

      const wrong = await app.http.post(REVOKE).set('Authorization', basic(client.id, 'sf_wrong')).type('form').send({ token: mine });
      expectError(wrong, 401, 'invalid_client');
      expect(wrong.headers['www-authenticate']).toMatch(/^Basic /);
      expect((await contacts(app, mine)).status).toBe(200);

      expectError(await app.http.post(REVOKE).set('Authorization', basic(client.id, client.secret)).type('form').send({ token: theirs }), 400, 'unauthorized_client');
      expect((await contacts(app, theirs)).status).toBe(200);

      const ok = await app.http.post(REVOKE).type('form').send({ token: mine, client_id: String(client.id), client_secret: client.secret });
      expect(ok.status).toBe(200);
      expectError(await contacts(app, mine), 401, 'unauthorized');
      // an unknown token with valid credentials is still a 200
      expect((await app.http.post(REVOKE).set('Authorization', basic(client.id, client.secret)).send({ token: 'sfat_nothing' })).status).toBe(200);
    });
  });

  describe('with a real OAuth2 client library (openid-client)', () => {
    function configuration(c: Client, auth: 'basic' | 'post') {
      const config = new oidc.Configuration(
        { issuer: app.url, token_endpoint: `${app.url}${TOKEN}`, revocation_endpoint: `${app.url}${REVOKE}` },
        String(c.id),
        undefined,
        auth === 'basic' ? oidc.ClientSecretBasic(c.secret) : oidc.ClientSecretPost(c.secret),
      );
      oidc.allowInsecureRequests(config); // plain HTTP on the loopback test server
      return config;
    }

    it.each(['basic', 'post'] as const)('obtains, uses and revokes a token (client_secret_%s)', async (auth) => {
      const config = configuration(client, auth);
      const tokens = await oidc.clientCredentialsGrant(config, { scope: 'contacts:read' });
      expect(tokens.token_type.toLowerCase()).toBe('bearer');
      expect(tokens.expiresIn()).toBeGreaterThan(3500);
      expect((await contacts(app, tokens.access_token)).status).toBe(200);
      await oidc.tokenRevocation(config, tokens.access_token, { token_type_hint: 'access_token' });
      expectError(await contacts(app, tokens.access_token), 401, 'unauthorized');
    });

    it('fails to obtain a token with a wrong secret', async () => {
      const config = configuration({ id: client.id, secret: client.secret + 'x' }, 'basic');
      await expect(oidc.clientCredentialsGrant(config)).rejects.toThrow();
    });
  });

  describe('a second API instance sharing the database and Redis', () => {
    let second: TestApp;

    beforeAll(async () => {
      second = await startApp({ shareWith: app, role: 'api', env: { OAUTH_RATE_LIMIT_PER_MINUTE: '1000' } });
    });
    afterAll(async () => second?.stop());

    it('sees an access token revoked on the first instance at once', async () => {
      const at = await accessToken(app, client);
      // Warm the second instance's token cache (TOKEN_CACHE_TTL_SECONDS defaults to 30 s).
      expect((await contacts(second, at)).status).toBe(200);
      expect((await contacts(second, at)).status).toBe(200);
      expect((await app.http.post(REVOKE).type('form').send({ token: at })).status).toBe(200);
      await refusedWithinASecond(second, at);
    });

    it('sees an API token revoked through the account API on the first instance at once, with its access tokens', async () => {
      const parent = await newClient(app, admin, ['contacts:read']);
      const at = await accessToken(second, parent);
      expect((await contacts(second, parent.secret)).status).toBe(200);
      expect((await contacts(second, at)).status).toBe(200);
      expect((await app.http.delete(`/api/account/tokens/${parent.id}/delete`).set('Authorization', admin)).status).toBe(200);
      await refusedWithinASecond(second, parent.secret);
      await refusedWithinASecond(second, at);
    });

    it('sees a parent revoked through the second instance\'s revocation endpoint on the first instance', async () => {
      const parent = await newClient(app, admin, ['contacts:read']);
      const at = await accessToken(app, parent);
      expect((await contacts(app, at)).status).toBe(200);
      expect((await second.http.post(REVOKE).send({ token: parent.secret })).status).toBe(200);
      await refusedWithinASecond(app, at);
      await refusedWithinASecond(app, parent.secret);
    });
  });
});

describe('OAuth2 with short lifetimes and a strict rate limit', () => {
  let app: TestApp;
  let admin: string;
  let client: Client;

  beforeAll(async () => {
    app = await startApp({ env: { OAUTH_ACCESS_TOKEN_TTL_SECONDS: '2', OAUTH_RATE_LIMIT_PER_MINUTE: '4', TRUST_PROXY: 'loopback' } });
    admin = await tokenFor(app, '*');
    client = await newClient(app, admin, ['contacts:read']);
  });
  afterAll(async () => app?.stop());

  it('an access token expires after expires_in seconds', async () => {
    const res = await app.http.post(TOKEN).set('X-Forwarded-For', '192.0.2.10').send({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret });
    expect(res.status).toBe(200);
    expect(res.body.expires_in).toBe(2);
    const at = res.body.access_token as string;
    expect((await contacts(app, at)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2300));
    expectError(await contacts(app, at), 401, 'unauthorized');
    // the API token itself is unaffected
    expect((await contacts(app, client.secret)).status).toBe(200);
  });

  it('limits the token endpoints per client address: 429 with Retry-After, shared by token and revoke', async () => {
    const from = (ip: string) => ({
      token: (body: object) => app.http.post(TOKEN).set('X-Forwarded-For', ip).type('form').send(body),
      revoke: (body: object) => app.http.post(REVOKE).set('X-Forwarded-For', ip).type('form').send(body),
    });
    const guesser = from('198.51.100.7');
    const first = await guesser.token({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: 'sf_guess0' });
    expectError(first, 401, 'invalid_client');
    expect(first.headers['x-ratelimit-limit']).toBe('4');
    expect(first.headers['x-ratelimit-remaining']).toBe('3');
    expect(Number(first.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
    for (let i = 1; i < 3; i++) expectError(await guesser.token({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: `sf_guess${i}` }), 401, 'invalid_client');
    expect((await guesser.revoke({ token: 'sfat_guess' })).status).toBe(200);

    // the fifth request in the minute is refused, even with the right secret
    const limited = await guesser.token({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret });
    expectError(limited, 429, 'rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['x-ratelimit-limit']).toBe('4');
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    expectError(await guesser.revoke({ token: 'sfat_guess' }), 429, 'rate_limited');

    // another address is unaffected, and so is the rest of the API for the same address
    expect((await from('198.51.100.8').token({ grant_type: 'client_credentials', client_id: String(client.id), client_secret: client.secret })).status).toBe(200);
    const api = await app.http.get('/api/contacts').set('X-Forwarded-For', '198.51.100.7').set('Authorization', `Bearer ${client.secret}`);
    expect(api.status).toBe(200);
    expect(api.headers['x-ratelimit-limit']).toBe('1000');
  });
});
