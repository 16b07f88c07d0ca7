import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import type { ListQuery, ListSpec } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, type Tx, Transactions } from '../database/transactions.js';
import type { Plan } from '../config/config.js';
import { ApiToken } from './api-token.entity.js';

/** What authenticating a secret needs: the token, its user and the validity of both (one row). */
export interface CredentialRow {
  token_id: number;
  /** The access token's own id (access tokens only). */
  access_token_id?: number;
  permissions: string[];
  expires_at: Date | null;
  user_id: number;
  user_name: string;
  plan: Plan;
  team: string | null;
}

/** An API token with its owner's email, for the CLI's listing. */
export interface TokenSummaryRow {
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
}

/** A token as the OAuth token endpoint checks it (with its hash, never leaving the service). */
export interface ClientRow {
  id: number;
  userId: number;
  tokenHash: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

export interface NewApiToken {
  userId: number;
  name: string;
  tokenHash: string;
  tokenPrefix: string;
  permissions: string[];
  expiresAt: Date | null;
  /** The API token that created this one (null: the CLI). */
  parentTokenId: number | null;
}

/** Every query of the api_tokens table. */
@Injectable()
export class ApiTokenRepository {
  constructor(
    private readonly transactions: Transactions,
    @InjectRepository(ApiToken) private readonly repo: Repository<ApiToken>,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /**
   * The active API token with this hash and its user. Runs on every request whose token is not in
   * the per-instance cache (bench: every authenticated row pays it once per TOKEN_CACHE_TTL_SECONDS).
   */
  async findActiveCredential(tokenHash: string): Promise<CredentialRow | null> {
    const rows: CredentialRow[] = await this.db().query(
      `SELECT t.id AS token_id, t.permissions, t.expires_at, u.id AS user_id, u.name AS user_name, u.plan, u.team
         FROM api_tokens t JOIN users u ON u.id = t.user_id
        WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
      [tokenHash],
    );
    return rows[0] ?? null;
  }

  /**
   * The state of the credential a job acts for: its API token (and, for an OAuth access token, that
   * access token): `deleted` when a row is gone, else `revoked` or `expired` when either is, else `active`.
   */
  async credentialState(apiTokenId: number, accessTokenId: number | null): Promise<'active' | 'revoked' | 'expired' | 'deleted'> {
    const rows: { revoked: boolean; expired: boolean; access_found: boolean; access_revoked: boolean; access_expired: boolean }[] = await this.db().query(
      `SELECT t.revoked_at IS NOT NULL AS revoked, coalesce(t.expires_at <= now(), false) AS expired,
              a.id IS NOT NULL AS access_found, a.revoked_at IS NOT NULL AS access_revoked, coalesce(a.expires_at <= now(), false) AS access_expired
         FROM api_tokens t LEFT JOIN oauth_access_tokens a ON a.id = $2 AND a.api_token_id = t.id
        WHERE t.id = $1`,
      [apiTokenId, accessTokenId],
    );
    const r = rows[0];
    if (!r || (accessTokenId !== null && !r.access_found)) return 'deleted';
    if (r.revoked || (accessTokenId !== null && r.access_revoked)) return 'revoked';
    if (r.expired || (accessTokenId !== null && r.access_expired)) return 'expired';
    return 'active';
  }

  async touchLastUsed(id: number): Promise<void> {
    await this.db().query(`UPDATE api_tokens SET last_used_at = now() WHERE id = $1`, [id]);
  }

  /**
   * Inserts a token. With a parent, only while the parent is active: the parent row is share-locked,
   * so a concurrent revocation of the parent either runs first (nothing is inserted: null) or waits
   * and then revokes the new token with it.
   */
  async insert(t: NewApiToken, tx?: Tx): Promise<number | null> {
    const values = [t.userId, t.name, t.tokenHash, t.tokenPrefix, t.permissions, t.expiresAt];
    const rows: { id: number }[] =
      t.parentTokenId === null
        ? await this.db(tx).query(
            `INSERT INTO api_tokens (user_id, name, token_hash, token_prefix, permissions, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
            values,
          )
        : await this.db(tx).query(
            `WITH parent AS (
               SELECT id FROM api_tokens WHERE id = $7 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) FOR SHARE)
             INSERT INTO api_tokens (user_id, name, token_hash, token_prefix, permissions, expires_at, parent_token_id)
             SELECT $1, $2, $3, $4, $5, $6, parent.id FROM parent RETURNING id`,
            [...values, t.parentTokenId],
          );
    return rows[0]?.id ?? null;
  }

  /** API tokens with their owners' emails, all or one user's, oldest first. */
  listSummaries(userId?: number): Promise<TokenSummaryRow[]> {
    return this.db().query(
      `SELECT t.id, t.user_id AS "userId", u.email AS "userEmail", t.name, t.token_prefix AS "prefix", t.permissions,
              t.expires_at AS "expiresAt", t.last_used_at AS "lastUsedAt", t.revoked_at AS "revokedAt", t.created_at AS "createdAt"
         FROM api_tokens t JOIN users u ON u.id = t.user_id
        ${userId !== undefined ? 'WHERE t.user_id = $1' : ''} ORDER BY t.id`,
      userId !== undefined ? [userId] : [],
    );
  }

  /** One user's token (null when it does not exist or is another user's). */
  findRecord(id: number, userId: number, tx?: Tx): Promise<ApiToken | null> {
    return this.transactions.manager(tx).getRepository(ApiToken).findOne({ where: { id, userId } });
  }

  /**
   * A page of one user's tokens. With `within` (the caller's permissions, when it lacks `*`), only
   * tokens holding nothing beyond them.
   */
  page(userId: number, q: ListQuery, spec: ListSpec, within: readonly string[] | null): Promise<ListPage<ApiToken>> {
    const qb = this.repo.createQueryBuilder('t').where('t.user_id = :userId', { userId });
    if (within) qb.andWhere('t.permissions <@ :within::text[]', { within: [...within] });
    return paginate(qb, q, spec);
  }

  /**
   * Revokes a token and, transitively, every token it created, with their access tokens. With
   * userId, only when the token is that user's. Returns the ids revoked now (tokens already revoked
   * are skipped; their children are still revoked). The tree is locked first, so a child being
   * created at the same moment is either refused (its parent is revoked) or revoked here too.
   */
  revokeTree(id: number, userId?: number, tx?: Tx): Promise<number[]> {
    const tree = `WITH RECURSIVE tree AS (
         SELECT id FROM api_tokens WHERE id = $1 ${userId !== undefined ? 'AND user_id = $2' : ''}
         UNION
         SELECT c.id FROM api_tokens c JOIN tree ON c.parent_token_id = tree.id)`;
    const params = userId !== undefined ? [id, userId] : [id];
    return this.transactions.run(async (t) => {
      await t.query(`${tree} SELECT id FROM api_tokens WHERE id IN (SELECT id FROM tree) ORDER BY id FOR UPDATE`, params);
      // A new statement, so a new snapshot: children committed while the lock was awaited are seen.
      const rows: { id: number }[] = await t.query(
        `${tree},
         t AS (UPDATE api_tokens SET revoked_at = now() WHERE id IN (SELECT id FROM tree) AND revoked_at IS NULL RETURNING id),
         a AS (UPDATE oauth_access_tokens SET revoked_at = now() WHERE api_token_id IN (SELECT id FROM tree) AND revoked_at IS NULL)
         SELECT id FROM t`,
        params,
      );
      return rows.map((r) => r.id);
    }, tx);
  }

  async findClient(id: number): Promise<ClientRow | null> {
    const rows: ClientRow[] = await this.db().query(
      `SELECT id, user_id AS "userId", token_hash AS "tokenHash", expires_at AS "expiresAt", revoked_at AS "revokedAt"
         FROM api_tokens WHERE id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  async findIdByHash(tokenHash: string): Promise<number | null> {
    const rows: { id: number }[] = await this.db().query(`SELECT id FROM api_tokens WHERE token_hash = $1`, [tokenHash]);
    return rows[0]?.id ?? null;
  }
}
