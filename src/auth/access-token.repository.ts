import { Injectable } from '@nestjs/common';
import { type Db, returning, type Tx, Transactions } from '../database/transactions.js';
import type { CredentialRow } from './api-token.repository.js';

/** Every query of the oauth_access_tokens table. */
@Injectable()
export class AccessTokenRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /**
   * The active access token with this hash, as its parent API token's credential (valid until the
   * earlier of the two expiries). Runs when an access token is not in the per-instance cache.
   */
  async findActiveCredential(tokenHash: string): Promise<CredentialRow | null> {
    const rows: CredentialRow[] = await this.db().query(
      `SELECT t.id AS token_id, a.id AS access_token_id, t.permissions,
              LEAST(a.expires_at, COALESCE(t.expires_at, 'infinity')) AS expires_at,
              u.id AS user_id, u.name AS user_name, u.plan, u.team
         FROM oauth_access_tokens a
         JOIN api_tokens t ON t.id = a.api_token_id
         JOIN users u ON u.id = t.user_id
        WHERE a.token_hash = $1 AND a.revoked_at IS NULL AND t.revoked_at IS NULL
          AND a.expires_at > now() AND (t.expires_at IS NULL OR t.expires_at > now())`,
      [tokenHash],
    );
    return rows[0] ?? null;
  }

  /** The API token an access token was issued from, whatever its state. */
  async findParentIdByHash(tokenHash: string): Promise<number | null> {
    const rows: { api_token_id: number }[] = await this.db().query(`SELECT api_token_id FROM oauth_access_tokens WHERE token_hash = $1`, [tokenHash]);
    return rows[0]?.api_token_id ?? null;
  }

  /** Revokes one access token. True when it was active. */
  async revokeByHash(tokenHash: string, tx?: Tx): Promise<boolean> {
    const rows = await returning<{ id: number }>(
      this.db(tx),
      `UPDATE oauth_access_tokens SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL RETURNING id`,
      [tokenHash],
    );
    return rows.length > 0;
  }

  /**
   * Inserts an access token for an API token only while that token is active (one statement, so
   * a concurrent revocation either sees the new row or prevents it). False when nothing was inserted.
   */
  async insertForActiveParent(apiTokenId: number, tokenHash: string, expiresAt: Date, tx?: Tx): Promise<boolean> {
    const rows: { id: number }[] = await this.db(tx).query(
      `INSERT INTO oauth_access_tokens (api_token_id, token_hash, expires_at)
       SELECT id, $2, $3 FROM api_tokens WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
       RETURNING id`,
      [apiTokenId, tokenHash, expiresAt],
    );
    return rows.length > 0;
  }
}
