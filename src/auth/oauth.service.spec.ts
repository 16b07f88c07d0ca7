import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { AppError } from '../common/errors.js';
import { OAuthService } from './oauth.service.js';
import { TokensService } from './tokens.service.js';

describe('OAuthService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let oauth: OAuthService;
  let tokens: TokensService;
  let userId: number;
  const code = (e: unknown) => (e instanceof AppError ? e.code : String(e));
  const grant = (id: number, secret: string) => ({ grant_type: 'client_credentials', client_id: String(id), client_secret: secret });

  beforeAll(async () => {
    ctx = await startServiceContext({ OAUTH_ACCESS_TOKEN_TTL_SECONDS: '3600' });
    oauth = ctx.get(OAuthService);
    tokens = ctx.get(TokensService);
    userId = (await ctx.principal()).userId;
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it("issues an access token that acts as the API token, for at most the API token's remaining life", async () => {
    const t = (await tokens.create(userId, 'client', ['contacts:read'], null))!;
    const res = await oauth.token(grant(t.id, t.secret), undefined);
    expect(res).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    const p = await tokens.authenticate(res.access_token);
    expect(p).toMatchObject({ userId, apiTokenId: t.id, kind: 'access_token' });
    const short = (await tokens.create(userId, 'short', ['contacts:read'], new Date(Date.now() + 120_000)))!;
    const capped = await oauth
      .token(grant(short.id, short.secret), `Basic ${Buffer.from(`${short.id}:${short.secret}`).toString('base64')}`)
      .catch((e: unknown) => e);
    // both methods at once is refused (RFC 6749 §2.3)
    expect(code(capped)).toBe('invalid_request');
    const viaBasic = await oauth.token({ grant_type: 'client_credentials' }, `Basic ${Buffer.from(`${short.id}:${short.secret}`).toString('base64')}`);
    expect(viaBasic.expires_in).toBeLessThanOrEqual(120);
  });

  it('refuses wrong secrets (invalid_client) and revoked clients (invalid_grant)', async () => {
    const t = (await tokens.create(userId, 'client 2', ['contacts:read'], null))!;
    expect(code(await oauth.token(grant(t.id, 'sf_wrong'), undefined).catch((e: unknown) => e))).toBe('invalid_client');
    await tokens.revokeApiToken(t.id);
    expect(code(await oauth.token(grant(t.id, t.secret), undefined).catch((e: unknown) => e))).toBe('invalid_grant');
  });

  it('revokes an access token alone, or an API token with its children and access tokens', async () => {
    const t = (await tokens.create(userId, 'client 3', ['*'], null))!;
    const child = (await tokens.create(userId, 'child', ['contacts:read'], null, t.id))!;
    const a1 = (await oauth.token(grant(t.id, t.secret), undefined)).access_token;
    const a2 = (await oauth.token(grant(t.id, t.secret), undefined)).access_token;
    expect(await oauth.revoke({ token: a1 }, undefined)).toEqual({});
    expect(await tokens.authenticate(a1)).toBeNull();
    expect(await tokens.authenticate(a2)).not.toBeNull();
    expect(await oauth.revoke({ token: t.secret }, undefined)).toEqual({});
    for (const s of [t.secret, a2, child.secret]) expect(await tokens.authenticate(s)).toBeNull();
    // unknown tokens are answered the same way
    expect(await oauth.revoke({ token: 'sf_unknown' }, undefined)).toEqual({});
  });

  it('a client may revoke only its own tokens', async () => {
    const mine = (await tokens.create(userId, 'mine', ['contacts:read'], null))!;
    const theirs = (await tokens.create(userId, 'theirs', ['contacts:read'], null))!;
    const err = await oauth.revoke({ token: theirs.secret, client_id: String(mine.id), client_secret: mine.secret }, undefined).catch((e: unknown) => e);
    expect(code(err)).toBe('unauthorized_client');
    expect(await tokens.authenticate(theirs.secret)).not.toBeNull();
  });
});
