import { Injectable } from '@nestjs/common';
import { returning, Transactions } from '../database/transactions.js';

/** Where a key lives: the account, the method + path (hashed into `scope`) and the key itself; and who is using it. */
export interface IdempotencyScope {
  userId: number;
  scope: string;
  key: string;
  method: string;
  path: string;
  /** The credential making the request (its kind and API token id): only it is answered a replay. */
  credential: string;
}

export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer | null;
}

export interface IdempotencyRow {
  fingerprint: string;
  /** The credential that made the original request (null for keys recorded before credentials were kept). */
  credential: string | null;
  state: 'running' | 'done';
  /** Seconds until an in-progress claim lapses (negative once it has). */
  leaseLeft: number;
  /** Past its retention (waiting for the prune job): forgotten. */
  expired: boolean;
  answer: StoredAnswer | null;
}

interface Row {
  fingerprint: string;
  credential: string | null;
  state: 'running' | 'done';
  lease_left: string;
  expired: boolean;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Buffer | null;
}

/** Every query of the idempotency_keys table (PostgreSQL only, so it holds across instances and without Redis). */
@Injectable()
export class IdempotencyRepository {
  constructor(private readonly transactions: Transactions) {}

  /** Claims a key that nobody holds: true when this call inserted the in-progress row. */
  async claimNew(s: IdempotencyScope, fingerprint: string, claim: string, leaseSeconds: number, ttlHours: number): Promise<boolean> {
    const rows = await this.transactions.db.query<unknown[]>(
      `INSERT INTO idempotency_keys (user_id, scope, key, method, path, fingerprint, claim, state, lease_until, expires_at, credential)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', now() + make_interval(secs => $8), now() + make_interval(hours => $9), $10)
       ON CONFLICT DO NOTHING RETURNING 1`,
      [s.userId, s.scope, s.key, s.method, s.path, fingerprint, claim, leaseSeconds, ttlHours, s.credential],
    );
    return rows.length === 1;
  }

  /**
   * Takes over a key whose holder crashed (an in-progress row past its lease) or whose answer has
   * expired: true when this call now holds it. One statement, so two retries cannot both win.
   */
  async claimLapsed(s: IdempotencyScope, fingerprint: string, claim: string, leaseSeconds: number, ttlHours: number): Promise<boolean> {
    const rows = await returning(
      this.transactions.db,
      `UPDATE idempotency_keys
          SET fingerprint = $4, claim = $5, state = 'running', lease_until = now() + make_interval(secs => $6),
              expires_at = now() + make_interval(hours => $7), created_at = now(), credential = $8,
              response_status = NULL, response_headers = NULL, response_body = NULL
        WHERE user_id = $1 AND scope = $2 AND key = $3
          AND ((state = 'running' AND lease_until < now()) OR expires_at < now())
        RETURNING 1`,
      [s.userId, s.scope, s.key, fingerprint, claim, leaseSeconds, ttlHours, s.credential],
    );
    return rows.length === 1;
  }

  async find(s: IdempotencyScope): Promise<IdempotencyRow | null> {
    const rows = await this.transactions.db.query<Row[]>(
      `SELECT fingerprint, credential, state, EXTRACT(EPOCH FROM lease_until - now()) AS lease_left, expires_at < now() AS expired,
              response_status, response_headers, response_body
         FROM idempotency_keys WHERE user_id = $1 AND scope = $2 AND key = $3`,
      [s.userId, s.scope, s.key],
    );
    const r = rows[0];
    if (!r) return null;
    return {
      fingerprint: r.fingerprint,
      credential: r.credential,
      state: r.state,
      leaseLeft: Number(r.lease_left),
      expired: r.expired,
      answer: r.response_status === null ? null : { status: r.response_status, headers: r.response_headers ?? {}, body: r.response_body },
    };
  }

  /** Records the answer of the request holding `claim` (nothing when another request took the key over). */
  async complete(s: IdempotencyScope, claim: string, answer: StoredAnswer, ttlHours: number): Promise<void> {
    await this.transactions.db.query(
      `UPDATE idempotency_keys
          SET state = 'done', response_status = $5, response_headers = $6, response_body = $7,
              expires_at = now() + make_interval(hours => $8)
        WHERE user_id = $1 AND scope = $2 AND key = $3 AND claim = $4 AND state = 'running'`,
      [s.userId, s.scope, s.key, claim, answer.status, JSON.stringify(answer.headers), answer.body, ttlHours],
    );
  }

  /** Forgets an in-progress key (an answer that is not kept: 5xx, 429), so a retry runs the request again. */
  async release(s: IdempotencyScope, claim: string): Promise<void> {
    await this.transactions.db.query(`DELETE FROM idempotency_keys WHERE user_id = $1 AND scope = $2 AND key = $3 AND claim = $4 AND state = 'running'`, [
      s.userId,
      s.scope,
      s.key,
      claim,
    ]);
  }

  /** Deletes expired keys; answers how many. */
  async prune(): Promise<number> {
    const rows = await returning(this.transactions.db, `DELETE FROM idempotency_keys WHERE expires_at < now() RETURNING 1`, []);
    return rows.length;
  }
}
