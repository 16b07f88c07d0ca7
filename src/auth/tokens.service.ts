import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { Principal } from '../common/request.js';
import type { NowOrLater } from '../common/request-check.js';
import { RedisService } from '../redis/redis.service.js';
import { AccessTokenRepository } from './access-token.repository.js';
import { ApiTokenRepository, type CredentialRow } from './api-token.repository.js';
import { outsideTransaction } from '../database/transactions.js';

export const API_TOKEN_PREFIX = 'sf_';
export const ACCESS_TOKEN_PREFIX = 'sfat_';
const CACHE_MAX = 20_000;
const LAST_USED_EVERY_MS = 60_000;
const REVOKE_CHANNEL = 'token-revoked';

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** Constant-time comparison of a presented secret with a stored SHA-256 hex hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash.trim(), 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface TokenSummary {
  id: number;
  userId: number;
  userEmail: string;
  name: string;
  prefix: string;
  permissions: string[];
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  createdAt: Date;
  state: 'active' | 'expired' | 'revoked';
}

/** A stored API token as a client of the OAuth token endpoint sees it (never its hash). */
export interface ClientToken {
  id: number;
  userId: number;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/** The credential a background job acts for, as stored with the job's record. */
export interface JobCredential {
  apiTokenId: number;
  accessTokenId: number | null;
}

/** The credential of a principal, to store with a job it starts (null for a console session: no token). */
export function jobCredentialOf(who: Principal): JobCredential | null {
  if (who.kind === 'session' || !who.apiTokenId) return null;
  return { apiTokenId: who.apiTokenId, accessTokenId: who.kind === 'access_token' ? (who.accessTokenId ?? null) : null };
}

/** How often a job's credential is read at most. */
const CREDENTIAL_CHECK_EVERY_MS = 1_000;

/** See TokensService.watch. */
export class CredentialWatch {
  private checkedAt = 0;
  private reason: string | null = null;

  constructor(
    private readonly credential: JobCredential | null,
    private readonly state: (c: JobCredential) => Promise<'active' | 'revoked' | 'expired' | 'deleted'>,
  ) {}

  /** Why the job must stop (its token is no longer valid), or null; null always for a job stored without a credential. */
  async ended(): Promise<string | null> {
    const c = this.credential;
    if (!c || this.reason !== null || Date.now() - this.checkedAt < CREDENTIAL_CHECK_EVERY_MS) return this.reason;
    const state = await this.state(c);
    this.checkedAt = Date.now();
    if (state !== 'active') {
      const which = c.accessTokenId !== null ? `the OAuth access token ${c.accessTokenId} (of API token ${c.apiTokenId})` : `API token ${c.apiTokenId}`;
      this.reason = `stopped: the token that started it (${which}) was ${state}`;
    }
    return this.reason;
  }
}

/** A hash that matches no secret: compared against when a client id is unknown, so timing tells nothing. */
const NO_SUCH_HASH = hashSecret('no such token: ' + randomBytes(16).toString('hex'));

interface CacheEntry {
  principal: Principal;
  cachedAt: number;
}

/**
 * Turns a presented bearer secret into a Principal. Look-ups are cached per instance for
 * TOKEN_CACHE_TTL_SECONDS so a request costs no database query; a revocation removes the entry
 * at once in this instance and, through Redis pub/sub, in every other instance.
 */
@Injectable()
export class TokensService implements OnModuleInit {
  private readonly logger = new Logger('Tokens');
  private readonly cache = new Map<string, CacheEntry>();
  private readonly lastUsedWritten = new Map<number, number>();
  /**
   * Bumped on every revocation seen by this instance. A look-up that started before a revocation
   * may have read the row before it changed; its result is then served once but not cached.
   */
  private revocations = 0;

  constructor(
    private readonly apiTokens: ApiTokenRepository,
    private readonly accessTokens: AccessTokenRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly redis: RedisService,
  ) {}

  onModuleInit(): void {
    this.redis.subscribe(REVOKE_CHANNEL, (message) => {
      // A malformed message must not throw inside the Redis client's event handler (it would crash the process).
      let msg: { apiTokenId?: unknown; hash?: unknown };
      try {
        msg = JSON.parse(message) as typeof msg;
      } catch {
        this.logger.warn({ msg: 'ignored a malformed token revocation message' });
        return;
      }
      this.dropFromCache({
        apiTokenId: typeof msg?.apiTokenId === 'number' ? msg.apiTokenId : undefined,
        hash: typeof msg?.hash === 'string' ? msg.hash : undefined,
      });
    });
  }

  /**
   * The principal of a secret, answered synchronously when it needs no database read (a malformed
   * secret, or a cache hit): the guard chain then runs without a promise hop. A miss answers a
   * promise of the token's database read (NowOrLater: the request path's contract for such answers).
   * Callers that do not count promise hops use authenticate().
   */
  authenticateNow(secret: string): NowOrLater<Principal | null> {
    if (!secret.startsWith(API_TOKEN_PREFIX) && !secret.startsWith(ACCESS_TOKEN_PREFIX)) return null;
    if (secret.length > 200) return null;
    const hash = hashSecret(secret);
    const now = Date.now();
    const hit = this.cache.get(hash);
    if (hit && now - hit.cachedAt < this.config.tokenCacheTtlSeconds * 1000) {
      if (hit.principal.expiresAt !== null && hit.principal.expiresAt <= now) {
        this.cache.delete(hash);
        return null;
      }
      this.touch(hit.principal.apiTokenId, now);
      return hit.principal;
    }
    return this.loadAndCache(secret, hash, now);
  }

  async authenticate(secret: string): Promise<Principal | null> {
    return this.authenticateNow(secret);
  }

  private async loadAndCache(secret: string, hash: string, now: number): Promise<Principal | null> {
    const epoch = this.revocations;
    const principal = await this.load(hash, secret.startsWith(ACCESS_TOKEN_PREFIX));
    if (!principal) {
      this.cache.delete(hash);
      return null;
    }
    if (this.config.tokenCacheTtlSeconds > 0 && epoch === this.revocations) {
      if (this.cache.size >= CACHE_MAX) {
        const oldest = this.cache.keys().next();
        if (!oldest.done) this.cache.delete(oldest.value);
      }
      this.cache.set(hash, { principal, cachedAt: now });
    }
    this.touch(principal.apiTokenId, now);
    return principal;
  }

  private async load(hash: string, isAccessToken: boolean): Promise<Principal | null> {
    const row: CredentialRow | null = isAccessToken ? await this.accessTokens.findActiveCredential(hash) : await this.apiTokens.findActiveCredential(hash);
    if (!row) return null;
    const expires = row.expires_at ? new Date(row.expires_at).getTime() : null;
    return {
      userId: row.user_id,
      userName: row.user_name,
      plan: row.plan,
      team: row.team,
      apiTokenId: row.token_id,
      ...(row.access_token_id !== undefined ? { accessTokenId: row.access_token_id } : {}),
      permissions: new Set(row.permissions),
      kind: isAccessToken ? 'access_token' : 'api_token',
      expiresAt: expires !== null && Number.isFinite(expires) ? expires : null,
    };
  }

  /** Records the token's last use, at most once a minute per token, off the request path. */
  private touch(apiTokenId: number, now: number): void {
    const last = this.lastUsedWritten.get(apiTokenId) ?? 0;
    if (now - last < LAST_USED_EVERY_MS) return;
    this.lastUsedWritten.set(apiTokenId, now);
    // Off the request path: on a connection of its own, whatever unit of work the caller is in.
    outsideTransaction(() => this.apiTokens.touchLastUsed(apiTokenId)).catch((e: unknown) =>
      this.logger.warn({ msg: 'could not record token use', err: e instanceof Error ? e.message : String(e) }),
    );
  }

  /**
   * Creates an API token for a user; returns the secret, which is never stored or shown again.
   * With `parentTokenId` (the token that asked for it), only while that token is active: null when
   * it was revoked or expired in the meantime.
   */
  async create(
    userId: number,
    name: string,
    permissions: string[],
    expiresAt: Date | null,
    parentTokenId: number | null = null,
  ): Promise<{ id: number; secret: string } | null> {
    const secret = newSecret(API_TOKEN_PREFIX);
    const id = await this.apiTokens.insert({
      userId,
      name,
      tokenHash: hashSecret(secret),
      tokenPrefix: secret.slice(0, API_TOKEN_PREFIX.length + 6),
      permissions: [...new Set(permissions)],
      expiresAt,
      parentTokenId,
    });
    return id === null ? null : { id, secret };
  }

  /** API tokens (never their secrets), all or one user's, oldest first. */
  async list(userId?: number): Promise<TokenSummary[]> {
    const rows = await this.apiTokens.listSummaries(userId);
    const now = Date.now();
    return rows.map((r) => ({
      ...r,
      state: r.revokedAt ? 'revoked' : r.expiresAt && new Date(r.expiresAt).getTime() <= now ? 'expired' : 'active',
    }));
  }

  /**
   * Revokes an API token, every token it created (transitively) and every access token issued
   * from any of them. With userId, only that user's token (and nothing at all when the token is
   * someone else's). True when the named token was active.
   */
  async revokeApiToken(id: number, userId?: number): Promise<boolean> {
    const revoked = await this.apiTokens.revokeTree(id, userId);
    for (const tokenId of revoked) await this.broadcastRevocation({ apiTokenId: tokenId });
    return revoked.includes(id);
  }

  /**
   * The API token a client id names, when `secret` is its secret (compared in constant time; an
   * unknown id costs the same comparison). Revoked and expired tokens are returned too: the caller
   * decides what they mean.
   */
  async verifyClient(clientId: number, secret: string): Promise<ClientToken | null> {
    const row = await this.apiTokens.findClient(clientId);
    const ok = secret.length <= 200 && secretMatches(secret, row?.tokenHash ?? NO_SUCH_HASH);
    if (!row || !ok) return null;
    return { id: row.id, userId: row.userId, expiresAt: row.expiresAt, revokedAt: row.revokedAt };
  }

  /** Which token a presented secret is (whatever its state), by its hash; null when unknown. */
  async identify(secret: string): Promise<{ kind: 'api_token' | 'access_token'; apiTokenId: number } | null> {
    if (secret.length > 200) return null;
    const hash = hashSecret(secret);
    if (secret.startsWith(ACCESS_TOKEN_PREFIX)) {
      const parent = await this.accessTokens.findParentIdByHash(hash);
      return parent !== null ? { kind: 'access_token', apiTokenId: parent } : null;
    }
    if (secret.startsWith(API_TOKEN_PREFIX)) {
      const id = await this.apiTokens.findIdByHash(hash);
      return id !== null ? { kind: 'api_token', apiTokenId: id } : null;
    }
    return null;
  }

  /** Revokes one access token by its secret. True when it was active. */
  async revokeAccessToken(secret: string): Promise<boolean> {
    const hash = hashSecret(secret);
    const revoked = await this.accessTokens.revokeByHash(hash);
    await this.broadcastRevocation({ hash });
    return revoked;
  }

  /**
   * Issues an OAuth access token for an API token; the caller has already checked the client.
   * Null when the parent was revoked (or expired) in the meantime: nothing is then inserted.
   */
  async issueAccessToken(apiTokenId: number, ttlSeconds: number): Promise<{ secret: string; expiresAt: Date } | null> {
    const secret = newSecret(ACCESS_TOKEN_PREFIX);
    const expiresAt = new Date(Date.now() + ttlSeconds * 1000);
    const inserted = await this.accessTokens.insertForActiveParent(apiTokenId, hashSecret(secret), expiresAt);
    return inserted ? { secret, expiresAt } : null;
  }

  /**
   * Watches the credential a background job acts for (an import, an export, a broadcast): `ended()`
   * answers why the job must stop — its token was revoked, deleted or expired (for an OAuth access
   * token, that token or its API token) — or null while it is active. It reads the token's row at
   * most once per CREDENTIAL_CHECK_EVERY_MS (one primary-key read), so a job can ask before every
   * chunk and still stops within about a second of a revocation.
   */
  watch(credential: JobCredential | null): CredentialWatch {
    return new CredentialWatch(credential, (c) => this.apiTokens.credentialState(c.apiTokenId, c.accessTokenId));
  }

  /** Drops cached entries locally and tells the other instances to do the same. */
  private async broadcastRevocation(msg: { apiTokenId?: number; hash?: string }): Promise<void> {
    this.dropFromCache(msg);
    try {
      await this.redis.publish(REVOKE_CHANNEL, JSON.stringify(msg));
    } catch (e) {
      this.logger.warn({ msg: 'could not broadcast a token revocation; other instances drop it within the cache TTL', err: (e as Error).message });
    }
  }

  private dropFromCache(msg: { apiTokenId?: number; hash?: string }): void {
    this.revocations++;
    if (msg.hash) this.cache.delete(msg.hash);
    if (msg.apiTokenId !== undefined) {
      for (const [hash, entry] of this.cache) if (entry.principal.apiTokenId === msg.apiTokenId) this.cache.delete(hash);
    }
  }
}
