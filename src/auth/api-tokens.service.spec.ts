import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { ApiTokensService } from './api-tokens.service.js';
import { TokensService } from './tokens.service.js';

describe('ApiTokensService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let service: ApiTokensService;
  let tokens: TokensService;
  let userId: number;

  /** A real token of the spec's user, as the guard chain would hand it to the service. */
  async function caller(permissions: string[], expiresAt: Date | null = null): Promise<Principal> {
    const t = (await tokens.create(userId, 'caller', permissions, expiresAt))!;
    return (await tokens.authenticate(t.secret))!;
  }
  const code = (e: unknown) => (e instanceof AppError ? e.code : String(e));

  beforeAll(async () => {
    ctx = await startServiceContext();
    service = ctx.get(ApiTokensService);
    tokens = ctx.get(TokensService);
    userId = (await ctx.principal()).userId;
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it("creates a token within the caller's permissions, and refuses more (forbidden, naming them)", async () => {
    const who = await caller(['tokens:write', 'contacts:read']);
    const t = await service.create({ name: 'ok', permissions: ['contacts:read'] }, who);
    expect(t).toMatchObject({ name: 'ok', permissions: ['contacts:read'], state: 'active', expiresAt: null });
    expect(t.secret).toMatch(/^sf_/);
    const err = await service.create({ name: 'more', permissions: ['contacts:read', 'deals:write'] }, who).catch((e: unknown) => e);
    expect(code(err)).toBe('forbidden');
    expect((err as Error).message).toContain('deals:write');
    expect(code(await service.create({ name: 'all', permissions: ['*'] }, who).catch((e: unknown) => e))).toBe('forbidden');
  });

  it("caps a new token's expiry at the caller's", async () => {
    const limit = new Date(Date.now() + 10 * 60_000);
    const who = await caller(['*'], limit);
    for (const expiresAt of [undefined, null, new Date(Date.now() + 86_400_000).toISOString()]) {
      const t = await service.create({ name: 'child', permissions: ['contacts:read'], expiresAt }, who);
      expect(Math.abs(new Date(t.expiresAt!).getTime() - limit.getTime())).toBeLessThan(1000);
    }
    const earlier = new Date(Date.now() + 60_000);
    const t = await service.create({ name: 'earlier', permissions: ['contacts:read'], expiresAt: earlier.toISOString() }, who);
    expect(Math.abs(new Date(t.expiresAt!).getTime() - earlier.getTime())).toBeLessThan(1000);
  });

  it('refuses creation to an OAuth access token', async () => {
    const t = (await tokens.create(userId, 'oauth client', ['*'], null))!;
    const access = (await tokens.issueAccessToken(t.id, 60))!;
    const who = (await tokens.authenticate(access.secret))!;
    expect(who.kind).toBe('access_token');
    const err = await service.create({ name: 'from access token', permissions: ['contacts:read'] }, who).catch((e: unknown) => e);
    expect(code(err)).toBe('forbidden');
  });

  it('revoking the caller revokes what it created', async () => {
    const who = await caller(['*']);
    const child = await service.create({ name: 'child', permissions: ['contacts:read'] }, who);
    expect(await tokens.authenticate(child.secret)).not.toBeNull();
    await service.revoke(who.apiTokenId, await caller(['*']));
    expect(await tokens.authenticate(child.secret)).toBeNull();
    expect((await service.get(child.id, await caller(['*']))).state).toBe('revoked');
  });

  it('reading or revoking a token holding permissions the caller lacks is forbidden; the list leaves it out', async () => {
    const strong = await service.create({ name: 'strong', permissions: ['deals:delete', 'contacts:read'] }, await caller(['*']));
    const weak = await service.create({ name: 'weak', permissions: ['contacts:read'] }, await caller(['*']));
    const narrow = await caller(['tokens:read', 'tokens:delete', 'contacts:read']);
    expect(code(await service.get(strong.id, narrow).catch((e: unknown) => e))).toBe('forbidden');
    expect(code(await service.revoke(strong.id, narrow).catch((e: unknown) => e))).toBe('forbidden');
    expect(await tokens.authenticate(strong.secret)).not.toBeNull();
    expect((await service.get(weak.id, narrow)).id).toBe(weak.id);
    const list = await service.list({ limit: '200' }, narrow);
    const ids = list.tokens.map((t) => t.id);
    expect(ids).toContain(weak.id);
    expect(ids).not.toContain(strong.id);
    expect(list.total).toBe(list.tokens.length);
    expect((await service.revoke(weak.id, narrow)).state).toBe('active');
    expect(await tokens.authenticate(weak.secret)).toBeNull();
  });

  it("another user's token is not found", async () => {
    const t = await service.create({ name: 'mine', permissions: ['contacts:read'] }, await caller(['*']));
    const stranger = await ctx.principal();
    expect(code(await service.get(t.id, stranger).catch((e: unknown) => e))).toBe('not_found');
    expect(code(await service.revoke(t.id, stranger).catch((e: unknown) => e))).toBe('not_found');
  });
});
