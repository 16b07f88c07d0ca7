import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DataSource } from 'typeorm';
import { APP_CONFIG, type AppConfig, type Plan } from '../config/config.js';
import type { Principal } from '../common/request.js';
import { RedisService } from '../redis/redis.service.js';

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

/** A hash that matches no secret: compared against when a client id is unknown, so timing tells nothing. */
const NO_SUCH_HASH = hashSecret('no such token: ' + randomBytes(16).toString('hex'));

interface CacheEntry {
  principal: Principal;
  cachedAt: number;
}

interface TokenRow {
  token_id: number;
  access_id: number | null;
  permissions: string[];
  expires_at: Date | null;
  user_id: number;
  user_name: string;
  plan: Plan;
  team: string | null;
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
    @InjectDataSource() private readonly db: DataSource,
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

  async authenticate(secret: string): Promise<Principal | null> {
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
    const epoch = this.revocations;
    const principal = await this.load(hash, secret.startsWith(ACCESS_TOKEN_PREFIX));
    if (!principal) {
      this.cache.delete(hash);
      return null;
    }
    if (this.config.tokenCacheTtlSeconds > 0 && epoch === this.revocations) {
      if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(hash, { principal, cachedAt: now });
    }
    this.touch(principal.apiTokenId, now);
    return principal;
  }

  private async load(hash: string, isAccessToken: boolean): Promise<Principal | null> {
    const rows: TokenRow[] = isAccessToken
      ? await this.db.query(
          `SELECT t.id AS token_id, a.id AS access_id, t.permissions,
                  LEAST(a.expires_at, COALESCE(t.expires_at, 'infinity')) AS expires_at,
                  u.id AS user_id, u.name AS user_name, u.plan, u.team
             FROM oauth_access_tokens a
             JOIN api_tokens t ON t.id = a.api_token_id
             JOIN users u ON u.id = t.user_id
            WHERE a.token_hash = $1 AND a.revoked_at IS NULL AND t.revoked_at IS NULL
              AND a.expires_at > now() AND (t.expires_at IS NULL OR t.expires_at > now())`,
          [hash],
        )
      : await this.db.query(
          `SELECT t.id AS token_id, NULL AS access_id, t.permissions, t.expires_at,
                  u.id AS user_id, u.name AS user_name, u.plan, u.team
             FROM api_tokens t JOIN users u ON u.id = t.user_id
            WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
          [hash],
        );
    const row = rows[0];
    if (!row) return null;
    const expires = row.expires_at ? new Date(row.expires_at).getTime() : null;
    return {
      userId: row.user_id,
      userName: row.user_name,
      plan: row.plan,
      team: row.team,
      apiTokenId: row.token_id,
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
    this.db
      .query(`UPDATE api_tokens SET last_used_at = now() WHERE id = $1`, [apiTokenId])
      .catch((e: Error) => this.logger.warn({ msg: 'could not record token use', err: e.message }));
  }

  /** Creates an API token for a user; returns the secret, which is never stored or shown again. */
  async create(userId: number, name: string, permissions: string[], expiresAt: Date | null): Promise<{ id: number; secret: string }> {
    const secret = newSecret(API_TOKEN_PREFIX);
    const rows: { id: number }[] = await this.db.query(
      `INSERT INTO api_tokens (user_id, name, token_hash, token_prefix, permissions, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [userId, name, hashSecret(secret), secret.slice(0, API_TOKEN_PREFIX.length + 6), [...new Set(permissions)], expiresAt],
    );
    return { id: rows[0].id, secret };
  }

  /** API tokens (never their secrets), all or one user's, oldest first. */
  async list(userId?: number): Promise<TokenSummary[]> {
    const rows: (Omit<TokenSummary, 'state'> & { revokedAt: Date | null })[] = await this.db.query(
      `SELECT t.id, t.user_id AS "userId", u.email AS "userEmail", t.name, t.token_prefix AS "prefix", t.permissions,
              t.expires_at AS "expiresAt", t.last_used_at AS "lastUsedAt", t.revoked_at AS "revokedAt", t.created_at AS "createdAt"
         FROM api_tokens t JOIN users u ON u.id = t.user_id
        ${userId !== undefined ? 'WHERE t.user_id = $1' : ''} ORDER BY t.id`,
      userId !== undefined ? [userId] : [],
    );
    const now = Date.now();
    return rows.map((r) => ({
      ...r,
      state: r.revokedAt ? 'revoked' : r.expiresAt && new Date(r.expiresAt).getTime() <= now ? 'expired' : 'active',
    }));
  }

  /**
   * Revokes an API token and every access token issued from it, in one statement. With userId,
   * only that user's token (and nothing at all when the token is someone else's). True when it was active.
   */
  async revokeApiToken(id: number, userId?: number): Promise<boolean> {
    const rows: { id: number }[] = await this.db.query(
      `WITH t AS (
         UPDATE api_tokens SET revoked_at = now()
          WHERE id = $1 AND revoked_at IS NULL ${userId !== undefined ? 'AND user_id = $2' : ''}
          RETURNING id),
       a AS (
         UPDATE oauth_access_tokens SET revoked_at = now()
          WHERE api_token_id IN (SELECT id FROM t) AND revoked_at IS NULL)
       SELECT id FROM t`,
      userId !== undefined ? [id, userId] : [id],
    );
    if (rows.length > 0) await this.broadcastRevocation({ apiTokenId: id });
    return rows.length > 0;
  }

  /**
   * The API token a client id names, when `secret` is its secret (compared in constant time; an
   * unknown id costs the same comparison). Revoked and expired tokens are returned too: the caller
   * decides what they mean.
   */
  async verifyClient(clientId: number, secret: string): Promise<ClientToken | null> {
    const rows: (ClientToken & { tokenHash: string })[] = await this.db.query(
      `SELECT id, user_id AS "userId", token_hash AS "tokenHash", expires_at AS "expiresAt", revoked_at AS "revokedAt"
         FROM api_tokens WHERE id = $1`,
      [clientId],
    );
    const row = rows[0];
    const ok = secret.length <= 200 && secretMatches(secret, row?.tokenHash ?? NO_SUCH_HASH);
    if (!row || !ok) return null;
    return { id: row.id, userId: row.userId, expiresAt: row.expiresAt, revokedAt: row.revokedAt };
  }

  /** Which token a presented secret is (whatever its state), by its hash; null when unknown. */
  async identify(secret: string): Promise<{ kind: 'api_token' | 'access_token'; apiTokenId: number } | null> {
    if (secret.length > 200) return null;
    const hash = hashSecret(secret);
    if (secret.startsWith(ACCESS_TOKEN_PREFIX)) {
      const rows: { api_token_id: number }[] = await this.db.query(`SELECT api_token_id FROM oauth_access_tokens WHERE token_hash = $1`, [hash]);
      return rows[0] ? { kind: 'access_token', apiTokenId: rows[0].api_token_id } : null;
    }
    if (secret.startsWith(API_TOKEN_PREFIX)) {
      const rows: { id: number }[] = await this.db.query(`SELECT id FROM api_tokens WHERE token_hash = $1`, [hash]);
      return rows[0] ? { kind: 'api_token', apiTokenId: rows[0].id } : null;
    }
    return null;
  }

  /** Revokes one access token by its secret. True when it was active. */
  async revokeAccessToken(secret: string): Promise<boolean> {
    const hash = hashSecret(secret);
    const rows: { id: number }[] = await this.db.query(
      `UPDATE oauth_access_tokens SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL RETURNING id`,
      [hash],
    );
    await this.broadcastRevocation({ hash });
    return rows.length > 0;
  }

  /**
   * Issues an OAuth access token for an API token; the caller has already checked the client.
   * Null when the parent was revoked (or expired) in the meantime: nothing is then inserted.
   */
  async issueAccessToken(apiTokenId: number, ttlSeconds: number): Promise<{ secret: string; expiresAt: Date } | null> {
    const secret = newSecret(ACCESS_TOKEN_PREFIX);
    const expiresAt = new Date(Date.now() + ttlSeconds * 1000);
    const rows: { id: number }[] = await this.db.query(
      `INSERT INTO oauth_access_tokens (api_token_id, token_hash, expires_at)
       SELECT id, $2, $3 FROM api_tokens WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
       RETURNING id`,
      [apiTokenId, hashSecret(secret), expiresAt],
    );
    return rows.length ? { secret, expiresAt } : null;
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
