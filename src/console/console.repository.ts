import { Injectable } from '@nestjs/common';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import type { FailureCount } from './session.rules.js';

export interface SessionRow {
  id: number;
  userId: number;
  csrfToken: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

export interface InvitationRow {
  id: number;
  userId: number;
  expiresAt: Date;
  usedAt: Date | null;
}

/** Rows of an UPDATE or DELETE ... RETURNING, which TypeORM's query() answers as [rows, rowCount]. */
function returned<T>(raw: unknown): T[] {
  return (Array.isArray(raw) && raw.length === 2 && Array.isArray(raw[0]) && typeof raw[1] === 'number' ? raw[0] : raw) as T[];
}

/** Every statement on the account console's tables: passwords, invitations, sessions, sign-in failures. */
@Injectable()
export class ConsoleRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  async passwordHash(userId: number): Promise<string | null> {
    const rows: { password_hash: string }[] = await this.db().query(`SELECT password_hash FROM user_passwords WHERE user_id = $1`, [userId]);
    return rows[0]?.password_hash ?? null;
  }

  async setPassword(userId: number, hash: string, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `INSERT INTO user_passwords (user_id, password_hash, updated_at) VALUES ($1, $2, now())
       ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()`,
      [userId, hash],
    );
  }

  async insertInvitation(userId: number, tokenHash: string, expiresAt: Date, tx?: Tx): Promise<void> {
    await this.db(tx).query(`INSERT INTO account_invitations (user_id, token_hash, expires_at) VALUES ($1, $2, $3)`, [userId, tokenHash, expiresAt]);
  }

  /** Marks an unused, unexpired invitation used, in one statement: exactly one caller gets it. */
  async claimInvitation(tokenHash: string, tx?: Tx): Promise<InvitationRow | null> {
    const rows = returned<InvitationRow>(
      await this.db(tx).query(
        `UPDATE account_invitations SET used_at = now()
          WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
          RETURNING id, user_id AS "userId", expires_at AS "expiresAt", used_at AS "usedAt"`,
        [tokenHash],
      ),
    );
    return rows[0] ?? null;
  }

  /** An invitation that could still be used (for showing the form). */
  async findUsableInvitation(tokenHash: string): Promise<InvitationRow | null> {
    const rows: InvitationRow[] = await this.db().query(
      `SELECT id, user_id AS "userId", expires_at AS "expiresAt", used_at AS "usedAt"
         FROM account_invitations WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`,
      [tokenHash],
    );
    return rows[0] ?? null;
  }

  async insertSession(
    s: { userId: number; tokenHash: string; csrfToken: string; expiresAt: Date; ip: string | null; userAgent: string | null },
    tx?: Tx,
  ): Promise<number> {
    // bigserial: pg answers the id as a string.
    const rows: { id: string }[] = await this.db(tx).query(
      `INSERT INTO account_sessions (user_id, token_hash, csrf_token, expires_at, ip, user_agent) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [s.userId, s.tokenHash, s.csrfToken, s.expiresAt, s.ip, s.userAgent],
    );
    return Number(rows[0].id);
  }

  async findSession(tokenHash: string): Promise<SessionRow | null> {
    // bigserial: pg answers the id as a string.
    const rows: (Omit<SessionRow, 'id'> & { id: string })[] = await this.db().query(
      `SELECT id, user_id AS "userId", csrf_token AS "csrfToken", created_at AS "createdAt", last_seen_at AS "lastSeenAt",
              expires_at AS "expiresAt", revoked_at AS "revokedAt"
         FROM account_sessions WHERE token_hash = $1`,
      [tokenHash],
    );
    const row = rows[0];
    return row ? { ...row, id: Number(row.id) } : null;
  }

  async touchSession(id: number): Promise<void> {
    await this.db().query(`UPDATE account_sessions SET last_seen_at = now() WHERE id = $1 AND revoked_at IS NULL`, [id]);
  }

  async revokeSession(tokenHash: string, tx?: Tx): Promise<boolean> {
    const rows = returned(
      await this.db(tx).query(`UPDATE account_sessions SET revoked_at = now() WHERE token_hash = $1 AND revoked_at IS NULL RETURNING id`, [tokenHash]),
    );
    return rows.length > 0;
  }

  /** Ends every open session of a user (password change, "sign out everywhere"); answers how many. */
  async revokeUserSessions(userId: number, tx?: Tx): Promise<number> {
    const rows = returned(
      await this.db(tx).query(`UPDATE account_sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL RETURNING id`, [userId]),
    );
    return rows.length;
  }

  /** Sessions ended a day ago, and failure counts a day old (the window is 15 minutes), are of no further use. */
  async deleteStale(): Promise<void> {
    await this.db().query(`DELETE FROM account_sessions WHERE COALESCE(revoked_at, expires_at) < now() - interval '1 day'`);
    await this.db().query(`DELETE FROM account_sign_in_failures WHERE last_at < now() - interval '1 day'`);
  }

  /**
   * The failure counts of these keys, locked until the transaction ends (rows are created when
   * missing, and locked in key order), so concurrent sign-ins of one account or address are
   * checked and counted one after the other.
   */
  async lockFailureCounts(keys: string[], tx: Tx): Promise<Map<string, FailureCount>> {
    await tx.query(
      `INSERT INTO account_sign_in_failures (key, failures, first_at, last_at)
       SELECT k, 0, now(), now() FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING`,
      [keys],
    );
    const rows: (FailureCount & { key: string })[] = await tx.query(
      `SELECT key, failures, first_at AS "firstAt", last_at AS "lastAt" FROM account_sign_in_failures WHERE key = ANY($1) ORDER BY key FOR UPDATE`,
      [keys],
    );
    return new Map(rows.map((r) => [r.key, { failures: r.failures, firstAt: r.firstAt, lastAt: r.lastAt }]));
  }

  /** Counts one failed sign-in for each key, in one statement; a count older than the window starts over. */
  async recordFailure(keys: string[], windowMs: number, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `INSERT INTO account_sign_in_failures AS f (key, failures, first_at, last_at)
       SELECT k, 1, now(), now() FROM unnest($1::text[]) AS k
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN f.first_at <= now() - make_interval(secs => $2::double precision / 1000) THEN 1 ELSE f.failures + 1 END,
         first_at = CASE WHEN f.first_at <= now() - make_interval(secs => $2::double precision / 1000) THEN now() ELSE f.first_at END,
         last_at = now()`,
      [keys, windowMs],
    );
  }

  async clearFailures(keys: string[]): Promise<void> {
    await this.db().query(`DELETE FROM account_sign_in_failures WHERE key = ANY($1)`, [keys]);
  }

  /** Takes back one provisionally counted failure of each key (the attempt succeeded). */
  async forgiveFailure(keys: string[]): Promise<void> {
    await this.db().query(`UPDATE account_sign_in_failures SET failures = greatest(failures - 1, 0) WHERE key = ANY($1)`, [keys]);
  }
}
