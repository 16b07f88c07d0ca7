import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { isUniqueViolation } from '../database/constraints.js';
import { TokensService } from './tokens.service.js';
import { UsersRepository } from './user.repository.js';
import { UsersService } from './users.service.js';

describe('TokensService and UsersService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let tokens: TokensService;
  let userId: number;

  beforeAll(async () => {
    ctx = await startServiceContext();
    tokens = ctx.get(TokensService);
    userId = (await ctx.principal()).userId;
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('creates a token whose secret authenticates as its user with its permissions; only the hash is stored', async () => {
    const t = (await tokens.create(userId, 'spec', ['contacts:read', 'contacts:read'], null))!;
    const p = await tokens.authenticate(t.secret);
    expect(p).toMatchObject({ userId, apiTokenId: t.id, kind: 'api_token', expiresAt: null });
    expect([...p!.permissions]).toEqual(['contacts:read']);
    const [row] = await ctx.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens WHERE id = $1', [t.id]);
    expect(row.token_hash).not.toContain(t.secret.slice(3, 20));
    expect(await tokens.authenticate('sf_unknown')).toBeNull();
    expect(await tokens.authenticate('not-a-token')).toBeNull();
  });

  it('revoking a token revokes its children transitively and their access tokens, and drops them from the cache', async () => {
    const root = (await tokens.create(userId, 'root', ['*'], null))!;
    const child = (await tokens.create(userId, 'child', ['contacts:read'], null, root.id))!;
    const grandchild = (await tokens.create(userId, 'grandchild', ['contacts:read'], null, child.id))!;
    const other = (await tokens.create(userId, 'other', ['contacts:read'], null))!;
    const access = (await tokens.issueAccessToken(grandchild.id, 60))!;
    for (const s of [root.secret, child.secret, grandchild.secret, access.secret]) expect(await tokens.authenticate(s)).not.toBeNull();

    expect(await tokens.revokeApiToken(root.id)).toBe(true);
    for (const s of [root.secret, child.secret, grandchild.secret, access.secret]) expect(await tokens.authenticate(s)).toBeNull();
    expect(await tokens.authenticate(other.secret)).not.toBeNull();
    // again: nothing was active any more
    expect(await tokens.revokeApiToken(root.id)).toBe(false);
  });

  it('revoking an access token by its secret says whether it was active (once true, then false)', async () => {
    const t = (await tokens.create(userId, 'oauth parent', ['contacts:read'], null))!;
    const access = (await tokens.issueAccessToken(t.id, 60))!;
    expect(await tokens.revokeAccessToken(access.secret)).toBe(true);
    expect(await tokens.authenticate(access.secret)).toBeNull();
    expect(await tokens.revokeAccessToken(access.secret)).toBe(false);
    expect(await tokens.revokeAccessToken('sf_at_unknown')).toBe(false);
  });

  it("revokes only the given user's token when a user is named", async () => {
    const t = (await tokens.create(userId, 'mine', ['contacts:read'], null))!;
    expect(await tokens.revokeApiToken(t.id, userId + 1000)).toBe(false);
    expect(await tokens.authenticate(t.secret)).not.toBeNull();
  });

  it('creates no child of a revoked or expired parent', async () => {
    const parent = (await tokens.create(userId, 'parent', ['*'], null))!;
    await tokens.revokeApiToken(parent.id);
    expect(await tokens.create(userId, 'orphan', ['contacts:read'], null, parent.id)).toBeNull();
    const expired = (await tokens.create(userId, 'expired parent', ['*'], new Date(Date.now() + 60_000)))!;
    await ctx.query(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    expect(await tokens.create(userId, 'orphan 2', ['contacts:read'], null, expired.id)).toBeNull();
  });

  it('a child created while its parent is being revoked never stays active', async () => {
    for (let round = 0; round < 15; round++) {
      const parent = (await tokens.create(userId, `race parent ${round}`, ['*'], null))!;
      const [child] = await Promise.all([tokens.create(userId, `race child ${round}`, ['contacts:read'], null, parent.id), tokens.revokeApiToken(parent.id)]);
      if (child) expect(await tokens.authenticate(child.secret)).toBeNull();
    }
  });

  it('issues no access token for a revoked API token', async () => {
    const t = (await tokens.create(userId, 'client', ['contacts:read'], null))!;
    await tokens.revokeApiToken(t.id);
    expect(await tokens.issueAccessToken(t.id, 60)).toBeNull();
  });

  it('verifies client secrets in constant time, for known and unknown ids alike', async () => {
    const t = (await tokens.create(userId, 'client 2', ['contacts:read'], null))!;
    expect(await tokens.verifyClient(t.id, t.secret)).toMatchObject({ id: t.id, userId, revokedAt: null });
    expect(await tokens.verifyClient(t.id, 'sf_wrong')).toBeNull();
    expect(await tokens.verifyClient(999_999, t.secret)).toBeNull();
    expect(await tokens.identify(t.secret)).toEqual({ kind: 'api_token', apiTokenId: t.id });
  });

  it('users: an email is taken whatever its case (users_email_lower_uq); names by ids', async () => {
    const users = ctx.get(UsersService);
    const u = await users.create({ name: 'Case', email: 'Case@Example.com' });
    const dup = await users.create({ name: 'Other', email: 'case@example.COM' }).catch((e: unknown) => e);
    expect(isUniqueViolation(dup, 'users_email_lower_uq')).toBe(true);
    expect((await users.findByEmail('CASE@example.com'))?.id).toBe(u.id);
    const updated = await users.update(u, { plan: 'professional' });
    expect(updated).toMatchObject({ id: u.id, plan: 'professional', modifiedAt: expect.any(Date) });
    const names = await ctx.get(UsersRepository).namesByIds([u.id, u.id, 987_654]);
    expect([...names]).toEqual([[u.id, 'Case']]);
  });
});
