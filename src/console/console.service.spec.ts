import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { TokensService } from '../auth/tokens.service.js';
import { UsersService } from '../auth/users.service.js';
import { Clock } from '../common/clock.js';
import { ConsoleService } from './console.service.js';
import { hashToken } from './session.rules.js';

const PASSWORD = 'a sufficiently long password';
const meta = { ip: '192.0.2.1', userAgent: 'spec' };

describe('ConsoleService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let account: ConsoleService;
  let users: UsersService;

  beforeAll(async () => {
    ctx = await startServiceContext({ ACCOUNT_SESSION_IDLE_SECONDS: '600', ACCOUNT_SESSION_ABSOLUTE_SECONDS: '3600', ACCOUNT_SIGN_IN_FREE_ATTEMPTS: '3' });
    account = ctx.get(ConsoleService);
    users = ctx.get(UsersService);
  });
  afterAll(async () => ctx?.close());

  async function userWithPassword(email: string) {
    const u = await users.create({ name: email.split('@')[0], email });
    await account.setPassword(email, PASSWORD);
    return u;
  }

  it('a session resolves until it is revoked, idle for the idle lifetime, or past its absolute expiry', async () => {
    await userWithPassword('s1@example.com');
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push(await account.signIn('s1@example.com', PASSWORD, meta));
    for (const s of sessions) expect(await account.resolve(s.token)).not.toBeNull();
    const [a, b, c, d] = sessions;
    const byToken = `WHERE token_hash = $1`;
    await account.signOut(a.token);
    expect(await account.resolve(a.token)).toBeNull();
    // idle: last used 601 s ago (the idle lifetime is 600 s)
    await ctx.query(`UPDATE account_sessions SET last_seen_at = now() - interval '601 seconds' ${byToken}`, [hashToken(b.token)]);
    expect(await account.resolve(b.token)).toBeNull();
    // absolute: past its expiry although just used
    await ctx.query(`UPDATE account_sessions SET expires_at = now() - interval '1 second', last_seen_at = now() ${byToken}`, [hashToken(c.token)]);
    expect(await account.resolve(c.token)).toBeNull();
    // the absolute expiry is the configured lifetime after sign-in
    const [row] = await ctx.query<{ secs: number }>(`SELECT extract(epoch FROM expires_at - created_at)::int AS secs FROM account_sessions ${byToken}`, [
      hashToken(d.token),
    ]);
    expect(Math.abs(row.secs - 3600)).toBeLessThanOrEqual(1);
    expect(await account.resolve(d.token)).not.toBeNull();
    expect(await account.resolve(undefined)).toBeNull();
    expect(await account.resolve('x'.repeat(43))).toBeNull();
  });

  it('a password change ends every open session of the user', async () => {
    await userWithPassword('s2@example.com');
    const s = await account.signIn('s2@example.com', PASSWORD, meta);
    await account.setPassword('s2@example.com', 'another long password');
    expect(await account.resolve(s.token)).toBeNull();
    await expect(account.signIn('s2@example.com', PASSWORD, meta)).rejects.toMatchObject({ status: 401 });
    expect(await account.resolve((await account.signIn('s2@example.com', 'another long password', meta)).token)).not.toBeNull();
  });

  it('the console principal holds every resource permission, and * only for a user an administrator gave a * token', async () => {
    const u = await userWithPassword('s3@example.com');
    const s = await account.signIn('s3@example.com', PASSWORD, meta);
    const before = (await account.resolve(s.token))!.principal;
    expect(before.permissions.has('*')).toBe(false);
    expect(before.permissions.has('contacts:delete')).toBe(true);
    expect(before.kind).toBe('session');
    const star = (await ctx.get(TokensService).create(u.id, 'admin', ['*'], null))!;
    expect((await account.resolve(s.token))!.principal.permissions.has('*')).toBe(true);
    await ctx.get(TokensService).revokeApiToken(star.id);
    expect((await account.resolve(s.token))!.principal.permissions.has('*')).toBe(false);
  });

  it('parallel wrong attempts cannot all pass the throttle: only the free ones are checked, the rest wait (429)', async () => {
    await userWithPassword('s4@example.com');
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => account.signIn('s4@example.com', `wrong password ${i}`, { ...meta, ip: '192.0.2.44' })),
    );
    const statuses = results.map((r) => (r.status === 'rejected' ? (r.reason as { status: number }).status : 200)).sort();
    expect(statuses).toEqual([401, 401, 401, 429, 429, 429, 429, 429]);
    const [row] = await ctx.query<{ failures: number }>(`SELECT failures FROM account_sign_in_failures WHERE key = 'email:s4@example.com'`);
    expect(row.failures).toBe(3);
  });

  it('an invitation sets the password once, even when accepted twice at the same moment, and not after 72 hours', async () => {
    await users.create({ name: 'inv', email: 'inv@example.com' });
    const inv = await account.invite('inv@example.com');
    expect(inv.expiresAt.getTime() - Date.now()).toBeGreaterThan(72 * 3600_000 - 60_000);
    const token = new URL(inv.url).hash.slice(1);
    const results = await Promise.allSettled([
      account.acceptInvitation(token, 'first long password', 'first long password', meta),
      account.acceptInvitation(token, 'second long password', 'second long password', meta),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected').map((r) => r.reason.status)).toEqual([404]);

    const old = await account.invite('inv@example.com');
    await ctx.query(`UPDATE account_invitations SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`);
    await expect(account.acceptInvitation(new URL(old.url).hash.slice(1), 'third long password', 'third long password', meta)).rejects.toMatchObject({
      status: 404,
    });
  });

  it("sessions and invitations keep the Clock's time: a session used within its idle lifetime lives on, one idle past it ends; an invitation expires after 72 h", async () => {
    const clock = ctx.get(Clock);
    await userWithPassword('s5@example.com');
    await users.create({ name: 'inv5', email: 'inv5@example.com' });
    const s = await account.signIn('s5@example.com', PASSWORD, meta);
    const token = new URL((await account.invite('inv5@example.com')).url).hash.slice(1);
    let moved = 0;
    const travel = (ms: number) => {
      clock.travel(ms);
      moved += ms;
    };
    try {
      travel(599_000);
      expect(await account.resolve(s.token)).not.toBeNull();
      // The use above was stamped with the clock's time, so 599 s more is still within the 600 s idle lifetime.
      travel(599_000);
      expect(await account.resolve(s.token)).not.toBeNull();
      travel(601_000);
      expect(await account.resolve(s.token)).toBeNull();
      expect(await account.invitationUsable(token)).toBe(true);
      travel(72 * 3600_000);
      expect(await account.invitationUsable(token)).toBe(false);
    } finally {
      clock.travel(-moved);
    }
  });
});
