import { Injectable } from '@nestjs/common';
import { returning, Transactions } from '../database/transactions.js';

/** One hand-over to the log provider: its key, its message, and how many times it came in this statement. */
export interface LogHandOver {
  idempotencyKey: string;
  messageId: number;
  /** Hand-overs of this key in the statement (more than 1 only when a duplicate arrived while the first was being recorded). */
  count: number;
}

/** What the log provider's record says about a key after a hand-over. */
export interface LogSendRow {
  idempotencyKey: string;
  acceptedAt: Date;
  /** True when this statement recorded the key (the first hand-over); false when it was already there. */
  first: boolean;
  /** Duplicates refused for this key so far (this statement's included). */
  duplicates: number;
}

/** Every query of sms_log_sends: the Idempotency-Keys the log SMS provider has taken. */
@Injectable()
export class SmsLogSendsRepository {
  constructor(private readonly transactions: Transactions) {}

  /**
   * Records hand-overs, one statement for all of them: a key not seen before is inserted (its first
   * hand-over, accepted); a key already there gets its further hand-overs added to `duplicates`.
   * Two processes recording one key at once: one inserts, the other waits for it and counts a duplicate.
   */
  async record(handOvers: LogHandOver[]): Promise<LogSendRow[]> {
    const rows = await returning<{ idempotency_key: string; accepted_at: Date; inserted: boolean; duplicates: number }>(
      this.transactions.db,
      `INSERT INTO sms_log_sends AS s (idempotency_key, message_id, duplicates, last_duplicate_at)
       SELECT k, m, d, CASE WHEN d > 0 THEN now() END FROM unnest($1::text[], $2::int[], $3::int[]) AS h(k, m, d)
       ON CONFLICT (idempotency_key) DO UPDATE
          SET duplicates = s.duplicates + EXCLUDED.duplicates + 1, last_duplicate_at = now()
       RETURNING s.idempotency_key, s.accepted_at, (s.xmax = 0) AS inserted, s.duplicates`,
      [handOvers.map((h) => h.idempotencyKey), handOvers.map((h) => h.messageId), handOvers.map((h) => h.count - 1)],
    );
    return rows.map((r) => ({ idempotencyKey: r.idempotency_key, acceptedAt: new Date(r.accepted_at), first: r.inserted, duplicates: r.duplicates }));
  }

  /** Forgets keys taken before `days` days ago (no send is handed over again that late); answers how many. */
  async prune(days: number): Promise<number> {
    const rows = await this.transactions.db.query<{ n: string }[]>(
      `WITH gone AS (DELETE FROM sms_log_sends WHERE accepted_at < now() - make_interval(days => $1) RETURNING 1) SELECT count(*)::text AS n FROM gone`,
      [days],
    );
    return Number(rows[0]?.n ?? 0);
  }
}
