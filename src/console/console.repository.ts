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

/** A CSV uploaded in the console, waiting for its columns to be mapped (console_import_uploads). */
export interface UploadRow {
  id: number;
  userId: number;
  object: string;
  storageKey: string;
  fileName: string;
  fileSize: number;
  header: string[];
  starting: boolean;
  importId: number | null;
  createdAt: Date;
}

const UPLOAD_COLUMNS = `id::int AS id, user_id AS "userId", object, storage_key AS "storageKey", file_name AS "fileName", file_size::float8 AS "fileSize",
  header, starting, import_id AS "importId", created_at AS "createdAt"`;

/** Rows of an UPDATE or DELETE ... RETURNING, which TypeORM's query() answers as [rows, rowCount]. */
function returned<T>(raw: unknown): T[] {
  return (Array.isArray(raw) && raw.length === 2 && Array.isArray(raw[0]) && typeof raw[1] === 'number' ? raw[0] : raw) as T[];
}

/** Every statement on the account console's tables: passwords, invitations, sessions, sign-in failures, uploads waiting for a mapping. */
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
  async claimInvitation(tokenHash: string, now: Date, tx?: Tx): Promise<InvitationRow | null> {
    const rows = returned<InvitationRow>(
      await this.db(tx).query(
        `UPDATE account_invitations SET used_at = $2
          WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
          RETURNING id, user_id AS "userId", expires_at AS "expiresAt", used_at AS "usedAt"`,
        [tokenHash, now],
      ),
    );
    return rows[0] ?? null;
  }

  /** An invitation that could still be used (for showing the form). */
  async findUsableInvitation(tokenHash: string, now: Date): Promise<InvitationRow | null> {
    const rows: InvitationRow[] = await this.db().query(
      `SELECT id, user_id AS "userId", expires_at AS "expiresAt", used_at AS "usedAt"
         FROM account_invitations WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`,
      [tokenHash, now],
    );
    return rows[0] ?? null;
  }

  async insertSession(
    s: { userId: number; tokenHash: string; csrfToken: string; createdAt: Date; expiresAt: Date; ip: string | null; userAgent: string | null },
    tx?: Tx,
  ): Promise<number> {
    // bigserial: pg answers the id as a string.
    const rows: { id: string }[] = await this.db(tx).query(
      `INSERT INTO account_sessions (user_id, token_hash, csrf_token, created_at, last_seen_at, expires_at, ip, user_agent)
       VALUES ($1, $2, $3, $4, $4, $5, $6, $7) RETURNING id`,
      [s.userId, s.tokenHash, s.csrfToken, s.createdAt, s.expiresAt, s.ip, s.userAgent],
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

  async touchSession(id: number, now: Date): Promise<void> {
    await this.db().query(`UPDATE account_sessions SET last_seen_at = $2 WHERE id = $1 AND revoked_at IS NULL`, [id, now]);
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
  async deleteStale(now: Date): Promise<void> {
    await this.db().query(`DELETE FROM account_sessions WHERE COALESCE(revoked_at, expires_at) < $1::timestamptz - interval '1 day'`, [now]);
    await this.db().query(`DELETE FROM account_sign_in_failures WHERE last_at < $1::timestamptz - interval '1 day'`, [now]);
  }

  /**
   * The failure counts of these keys, locked until the transaction ends (rows are created when
   * missing, and locked in key order), so concurrent sign-ins of one account or address are
   * checked and counted one after the other.
   */
  async lockFailureCounts(keys: string[], now: Date, tx: Tx): Promise<Map<string, FailureCount>> {
    await tx.query(
      `INSERT INTO account_sign_in_failures (key, failures, first_at, last_at)
       SELECT k, 0, $2, $2 FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING`,
      [keys, now],
    );
    const rows: (FailureCount & { key: string })[] = await tx.query(
      `SELECT key, failures, first_at AS "firstAt", last_at AS "lastAt" FROM account_sign_in_failures WHERE key = ANY($1) ORDER BY key FOR UPDATE`,
      [keys],
    );
    return new Map(rows.map((r) => [r.key, { failures: r.failures, firstAt: r.firstAt, lastAt: r.lastAt }]));
  }

  /** Counts one failed sign-in for each key, in one statement; a count older than the window starts over. */
  async recordFailure(keys: string[], windowMs: number, now: Date, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `INSERT INTO account_sign_in_failures AS f (key, failures, first_at, last_at)
       SELECT k, 1, $3, $3 FROM unnest($1::text[]) AS k
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN f.first_at <= $3::timestamptz - make_interval(secs => $2::double precision / 1000) THEN 1 ELSE f.failures + 1 END,
         first_at = CASE WHEN f.first_at <= $3::timestamptz - make_interval(secs => $2::double precision / 1000) THEN $3 ELSE f.first_at END,
         last_at = $3`,
      [keys, windowMs, now],
    );
  }

  async clearFailures(keys: string[]): Promise<void> {
    await this.db().query(`DELETE FROM account_sign_in_failures WHERE key = ANY($1)`, [keys]);
  }

  /** Takes back one provisionally counted failure of each key (the attempt succeeded). */
  async forgiveFailure(keys: string[]): Promise<void> {
    await this.db().query(`UPDATE account_sign_in_failures SET failures = greatest(failures - 1, 0) WHERE key = ANY($1)`, [keys]);
  }

  async insertUpload(u: Omit<UploadRow, 'id' | 'starting' | 'importId'>): Promise<number> {
    const rows: { id: number }[] = await this.db().query(
      `INSERT INTO console_import_uploads (user_id, object, storage_key, file_name, file_size, header, created_at)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) RETURNING id::int AS id`,
      [u.userId, u.object, u.storageKey, u.fileName, u.fileSize, JSON.stringify(u.header), u.createdAt],
    );
    return rows[0].id;
  }

  /** An upload of this user (another user's is null, as a missing one). */
  async findUpload(id: number, userId: number): Promise<UploadRow | null> {
    const rows: UploadRow[] = await this.db().query(`SELECT ${UPLOAD_COLUMNS} FROM console_import_uploads WHERE id = $1 AND user_id = $2`, [id, userId]);
    return rows[0] ?? null;
  }

  /** Marks an upload of this user as being started, in one statement: of parallel posts of its form exactly one gets it. */
  async claimUpload(id: number, userId: number): Promise<UploadRow | null> {
    const rows = returned<UploadRow>(
      await this.db().query(
        `UPDATE console_import_uploads SET starting = true
          WHERE id = $1 AND user_id = $2 AND NOT starting AND import_id IS NULL
          RETURNING ${UPLOAD_COLUMNS}`,
        [id, userId],
      ),
    );
    return rows[0] ?? null;
  }

  /** The import was not started (the form was refused): the upload waits for its mapping again. */
  async releaseUpload(id: number): Promise<void> {
    await this.db().query(`UPDATE console_import_uploads SET starting = false WHERE id = $1 AND import_id IS NULL`, [id]);
  }

  async markUploadStarted(id: number, importId: number): Promise<void> {
    await this.db().query(`UPDATE console_import_uploads SET starting = false, import_id = $2 WHERE id = $1`, [id, importId]);
  }

  /** Deletes up to `limit` uploads made before `before` (none being started); answers them, for their files. */
  async deleteStaleUploads(before: Date, limit: number): Promise<{ storageKey: string; importId: number | null }[]> {
    return returned<{ storageKey: string; importId: number | null }>(
      await this.db().query(
        `DELETE FROM console_import_uploads WHERE id IN (
           SELECT id FROM console_import_uploads WHERE created_at < $1 AND NOT starting ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING storage_key AS "storageKey", import_id AS "importId"`,
        [before, limit],
      ),
    );
  }
}
