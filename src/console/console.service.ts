import { Inject, Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { AppError, fieldError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { outsideTransaction, Transactions } from '../database/transactions.js';
import { PERMISSIONS } from '../auth/permissions.js';
import { TokensService } from '../auth/tokens.service.js';
import { type UserAccount as User, UsersService } from '../auth/users.service.js';
import { ConsoleRepository } from './console.repository.js';
import { decoyHash, hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import { hashToken, INVITATION_TTL_MS, needsTouch, newOpaqueToken, sessionExpiry, sessionState, SIGN_IN_WINDOW_MS, signInWait } from './session.rules.js';

/** A signed-in console user, resolved from the session cookie by SessionGuard. */
export interface ConsoleSession {
  sessionId: number;
  csrfToken: string;
  user: User;
  /**
   * The user as the token services see them. Every resource permission; `*` only for a user an
   * administrator has given a `*` token (so the console never grants more than the CLI did).
   */
  principal: Principal;
}

export interface NewSession {
  /** The cookie value; only its SHA-256 is stored. */
  token: string;
}

const WRONG = 'The email or password is not correct';

/**
 * Sign-in, sessions, passwords and invitations of the account console. Sessions live in
 * PostgreSQL and are checked on every request, so signing out or a password change ends them at
 * once on every instance.
 */
@Injectable()
export class ConsoleService {
  private readonly logger = new Logger('Account');

  constructor(
    private readonly repo: ConsoleRepository,
    private readonly users: UsersService,
    private readonly tokens: TokensService,
    private readonly transactions: Transactions,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Checks an email and password. The answer is the same whether or not the email exists (the
   * password is hashed against a decoy then); failures are counted per account and per address,
   * and beyond the free attempts each try must wait (429 with Retry-After).
   */
  async signIn(email: string, password: string, meta: { ip: string | null; userAgent: string | null; previousToken?: string | null }): Promise<NewSession> {
    const keys = [`email:${email.trim().toLowerCase().slice(0, 320)}`, `ip:${meta.ip ?? 'unknown'}`];
    // Checked and provisionally counted as a failure under the rows' locks, so parallel attempts
    // cannot all pass the check before any of them is counted; a success takes it back.
    const wait = await this.transactions.run(async (tx) => {
      const at = this.clock.now();
      const counts = await this.repo.lockFailureCounts(keys, at, tx);
      const now = at.getTime();
      const w = Math.max(
        signInWait(counts.get(keys[0]) ?? null, this.config.account.signInFreeAttemptsPerAccount, now),
        signInWait(counts.get(keys[1]) ?? null, this.config.account.signInFreeAttemptsPerAddress, now),
      );
      if (w === 0) await this.repo.recordFailure(keys, SIGN_IN_WINDOW_MS, at, tx);
      return w;
    });
    if (wait > 0) {
      const seconds = Math.ceil(wait / 1000);
      throw new AppError('rate_limited', `Too many failed sign-ins; try again in ${seconds} s`, undefined, { 'Retry-After': String(seconds) });
    }
    const user = email.length <= 320 ? await this.users.findByEmail(email.trim()) : null;
    const stored = user ? await this.repo.passwordHash(user.id) : null;
    const ok = await verifyPassword(password, stored ?? (await decoyHash()));
    if (!user || !stored || !ok) {
      this.logger.warn({ msg: 'failed sign-in', ip: meta.ip });
      throw new AppError('unauthorized', WRONG);
    }
    await this.repo.clearFailures([keys[0]]);
    await this.repo.forgiveFailure([keys[1]]);
    // Rotation: a session cookie the browser already had is ended, and a new one is issued.
    if (meta.previousToken) await this.repo.revokeSession(hashToken(meta.previousToken));
    return this.openSession(user.id, meta);
  }

  private async openSession(userId: number, meta: { ip: string | null; userAgent: string | null }): Promise<NewSession> {
    const token = newOpaqueToken();
    const now = this.clock.now();
    await this.repo.insertSession({
      userId,
      tokenHash: hashToken(token),
      csrfToken: newOpaqueToken(),
      createdAt: now,
      expiresAt: sessionExpiry(now.getTime(), this.config.account.sessionAbsoluteSeconds),
      ip: meta.ip,
      userAgent: meta.userAgent?.slice(0, 300) ?? null,
    });
    // Fire and forget: on a connection of its own, whatever unit of work the caller is in.
    void outsideTransaction(() => this.repo.deleteStale(now)).catch((e: unknown) =>
      this.logger.warn({ msg: 'could not delete stale sessions', err: e instanceof Error ? e.message : String(e) }),
    );
    return { token };
  }

  /** The session a cookie names, when it is active (revoked, expired and idle sessions are null). */
  async resolve(token: string | undefined): Promise<ConsoleSession | null> {
    if (!token || token.length > 100) return null;
    const s = await this.repo.findSession(hashToken(token));
    const now = this.clock.nowMs();
    if (!s || sessionState(s, now, this.config.account.sessionIdleSeconds) !== 'active') return null;
    const user = await this.users.findById(s.userId);
    if (!user) return null;
    if (needsTouch(s.lastSeenAt, now, this.config.account.sessionIdleSeconds)) await this.repo.touchSession(s.id, new Date(now));
    return { sessionId: s.id, csrfToken: s.csrfToken, user, principal: await this.principalOf(user) };
  }

  private async principalOf(user: User): Promise<Principal> {
    const mayGrantAll = (await this.tokens.list(user.id)).some((t) => t.state === 'active' && t.permissions.includes('*'));
    return {
      userId: user.id,
      userName: user.name,
      plan: user.plan,
      team: user.team,
      apiTokenId: 0, // no API token stands behind a console session
      permissions: new Set(mayGrantAll ? PERMISSIONS : PERMISSIONS.filter((p) => p !== '*')),
      kind: 'session',
      expiresAt: null,
    };
  }

  async signOut(token: string | undefined): Promise<void> {
    if (token) await this.repo.revokeSession(hashToken(token));
  }

  /** Ends every session of the user (the "sign out everywhere" button). */
  async signOutEverywhere(userId: number): Promise<number> {
    return this.repo.revokeUserSessions(userId);
  }

  /** Sets a user's password (CLI); ends their open sessions. */
  async setPassword(email: string, password: string): Promise<User> {
    const user = await this.users.findByEmail(email);
    if (!user) throw new AppError('not_found', `No user with the email ${email}`);
    const problem = passwordProblem(password, user.email);
    if (problem) throw fieldError('password', problem);
    const hash = await hashPassword(password);
    await this.transactions.run(async (tx) => {
      await this.repo.setPassword(user.id, hash, tx);
      await this.repo.revokeUserSessions(user.id, tx);
    });
    return user;
  }

  /**
   * A one-time invitation to set a password, valid 72 hours. The secret is in the URL's fragment,
   * which browsers never send to the server, so it reaches no access log or Referer.
   */
  async invite(email: string): Promise<{ user: User; url: string; expiresAt: Date }> {
    const user = await this.users.findByEmail(email);
    if (!user) throw new AppError('not_found', `No user with the email ${email}`);
    const token = newOpaqueToken();
    const expiresAt = new Date(this.clock.nowMs() + INVITATION_TTL_MS);
    await this.repo.insertInvitation(user.id, hashToken(token), expiresAt);
    return { user, url: `${this.config.baseUrl}/account/invitation#${token}`, expiresAt };
  }

  /** Sets the password of an invitation's user, uses the invitation up and signs the user in. */
  async acceptInvitation(token: string, password: string, confirm: string, meta: { ip: string | null; userAgent: string | null }): Promise<NewSession> {
    const invalid = new AppError('not_found', 'This invitation link is unknown, used or expired; ask an administrator for a new one');
    if (!token || token.length > 100) throw invalid;
    const pending = await this.repo.findUsableInvitation(hashToken(token), this.clock.now());
    if (!pending) throw invalid;
    const user = await this.users.findById(pending.userId);
    if (!user) throw invalid;
    const problem = passwordProblem(password, user.email);
    if (problem) throw fieldError('password', problem);
    if (password !== confirm) throw fieldError('confirm', 'does not match the password');
    const hash = await hashPassword(password);
    await this.transactions.run(async (tx) => {
      if (!(await this.repo.claimInvitation(hashToken(token), this.clock.now(), tx))) throw invalid;
      await this.repo.setPassword(user.id, hash, tx);
      await this.repo.revokeUserSessions(user.id, tx);
    });
    return this.openSession(user.id, meta);
  }

  async invitationUsable(token: string): Promise<boolean> {
    return !!token && token.length <= 100 && (await this.repo.findUsableInvitation(hashToken(token), this.clock.now())) !== null;
  }
}
