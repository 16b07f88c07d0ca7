import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import type { Tx } from '../database/transactions.js';

/**
 * Rows of an UPDATE/DELETE ... RETURNING: TypeORM's query() answers `[rows, affected]` for those
 * statements (and plain rows for the others).
 */
async function returning<T>(db: { query(sql: string, params?: unknown[]): Promise<unknown> }, sql: string, params: unknown[]): Promise<T[]> {
  const r: unknown = await db.query(sql, params);
  return (Array.isArray(r) && r.length === 2 && Array.isArray(r[0]) && typeof r[1] === 'number' ? r[0] : r) as T[];
}

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'dead'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One attempt as stored (and answered) in a delivery's `attempts`. */
export interface DeliveryAttempt {
  attempt: number;
  at: string;
  /** The receiver's status; null when it did not answer. */
  code: number | null;
  durationMs: number;
  error: string | null;
  /** The start of the receiver's answer. */
  response: string;
  /** When the next attempt is due; null when none follows. */
  nextAttemptAt: string | null;
}

export interface DeliveryRow {
  id: number;
  webhookId: number;
  eventId: string;
  eventType: string;
  sequence: number | null;
  body: string;
  status: DeliveryStatus;
  attemptCount: number;
  attempts: DeliveryAttempt[];
  nextAttemptAt: Date | null;
  windowStartedAt: Date;
  lastError: string | null;
  createdAt: Date;
  completedAt: Date | null;
}

export interface NewDelivery {
  webhookId: number;
  eventId: string;
  eventType: string;
  sequence: number;
  body: string;
}

const COLUMNS = `id::int AS "id", webhook_id AS "webhookId", event_id AS "eventId", event_type AS "eventType", sequence::float8 AS "sequence", body,
  status, attempt_count AS "attemptCount", attempts, next_attempt_at AS "nextAttemptAt", window_started_at AS "windowStartedAt",
  last_error AS "lastError", created_at AS "createdAt", completed_at AS "completedAt"`;

/** Every query of webhook_deliveries. */
@Injectable()
export class WebhookDeliveriesRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  private db(tx?: Tx) {
    return tx ?? this.dataSource;
  }

  /** One row per (webhook, event); a pair already present is skipped. Answers the new rows' ids. */
  async insertMany(rows: readonly NewDelivery[], tx: Tx): Promise<number[]> {
    if (!rows.length) return [];
    const res: { id: number }[] = await tx.query(
      `INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, sequence, body)
       SELECT * FROM unnest($1::int[], $2::uuid[], $3::text[], $4::bigint[], $5::text[])
       ON CONFLICT ON CONSTRAINT webhook_deliveries_webhook_event_uq DO NOTHING
       RETURNING id::int AS id`,
      [rows.map((r) => r.webhookId), rows.map((r) => r.eventId), rows.map((r) => r.eventType), rows.map((r) => r.sequence), rows.map((r) => r.body)],
    );
    return res.map((r) => r.id);
  }

  async find(webhookId: number, id: number, tx?: Tx): Promise<DeliveryRow | null> {
    const rows: DeliveryRow[] = await this.db(tx).query(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2`, [id, webhookId]);
    return rows[0] ?? null;
  }

  async page(webhookId: number, status: DeliveryStatus | null, offset: number, limit: number): Promise<{ total: number; items: DeliveryRow[] }> {
    const [{ n }]: { n: number }[] = await this.db().query(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2)`,
      [webhookId, status],
    );
    const items: DeliveryRow[] = n
      ? await this.db().query(
          `SELECT ${COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2) ORDER BY id DESC OFFSET $3 LIMIT $4`,
          [webhookId, status, offset, limit],
        )
      : [];
    return { total: n, items };
  }

  /**
   * Takes a due delivery for one attempt: only one run wins; a claim older than `staleMs` belongs to
   * a worker that died mid-attempt and is taken over. A webhook has at most `perWebhook` attempts
   * in flight, so one slow receiver cannot take every worker slot. Answers the row, or null.
   */
  async claim(id: number, token: string, staleMs: number, perWebhook: number): Promise<DeliveryRow | null> {
    const rows: DeliveryRow[] = await returning(
      this.db(),
      `UPDATE webhook_deliveries d SET claim_token = $2, claimed_at = now()
       WHERE d.id = $1 AND d.status IN ('pending', 'failed') AND d.next_attempt_at <= now() + interval '1 second'
         AND (d.claim_token IS NULL OR d.claimed_at < now() - $3 * interval '1 millisecond')
         AND (SELECT count(*) FROM webhook_deliveries o
              WHERE o.webhook_id = d.webhook_id AND o.claim_token IS NOT NULL AND o.claimed_at >= now() - $3 * interval '1 millisecond') < $4
       RETURNING ${COLUMNS}`,
      [id, token, staleMs, perWebhook],
    );
    return rows[0] ?? null;
  }

  /** True when the delivery is due and free, so that only its webhook's in-flight limit kept it from being claimed. */
  async waitingForSlot(id: number, staleMs: number): Promise<boolean> {
    const rows: unknown[] = await this.db().query(
      `SELECT 1 FROM webhook_deliveries WHERE id = $1 AND status IN ('pending', 'failed') AND next_attempt_at <= now() + interval '1 second'
         AND (claim_token IS NULL OR claimed_at < now() - $2 * interval '1 millisecond')`,
      [id, staleMs],
    );
    return rows.length > 0;
  }

  /** Appends an attempt and sets the outcome, only while our claim holds; false when it no longer does. */
  async recordAttempt(id: number, token: string, attempt: DeliveryAttempt, status: DeliveryStatus, nextAttemptAt: Date | null, tx?: Tx): Promise<boolean> {
    const rows = await returning(
      this.db(tx),
      `UPDATE webhook_deliveries SET attempts = attempts || jsonb_build_array($3::jsonb), attempt_count = attempt_count + 1,
         status = $4, next_attempt_at = $5, last_error = $6, claim_token = NULL, claimed_at = NULL,
         completed_at = CASE WHEN $4 IN ('succeeded', 'dead') THEN now() END
       WHERE id = $1 AND claim_token = $2 RETURNING id`,
      [id, token, JSON.stringify(attempt), status, nextAttemptAt, attempt.error ?? (status === 'succeeded' ? null : `HTTP ${attempt.code}`)],
    );
    return rows.length > 0;
  }

  /** Ends a claimed delivery without an attempt (its webhook was disabled or deleted meanwhile). */
  async markDead(id: number, token: string, reason: string, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `UPDATE webhook_deliveries SET status = 'dead', last_error = $3, next_attempt_at = NULL, claim_token = NULL, claimed_at = NULL, completed_at = now()
       WHERE id = $1 AND claim_token = $2`,
      [id, token, reason],
    );
  }

  /** Queues a delivery again now, with a fresh 72 h window; answers its attempt count (the job's generation). */
  async requeue(webhookId: number, id: number, tx?: Tx): Promise<{ id: number; attemptCount: number } | null> {
    const rows: { id: number; attemptCount: number }[] = await returning(
      this.db(tx),
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), window_started_at = now(), completed_at = NULL,
         claim_token = NULL, claimed_at = NULL
       WHERE id = $1 AND webhook_id = $2 RETURNING id::int AS id, attempt_count AS "attemptCount"`,
      [id, webhookId],
    );
    return rows[0] ?? null;
  }

  /** Queues every dead delivery of a webhook again (on re-enabling it). */
  async requeueDead(webhookId: number, tx?: Tx): Promise<{ id: number; attemptCount: number }[]> {
    return returning(
      this.db(tx),
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), window_started_at = now(), completed_at = NULL,
         claim_token = NULL, claimed_at = NULL
       WHERE webhook_id = $1 AND status = 'dead' RETURNING id::int AS id, attempt_count AS "attemptCount"`,
      [webhookId],
    );
  }

  /**
   * Deliveries that are due and not being attempted (never queued because the broker was down, a
   * lost job, or a claim left by a worker that died): the recovery sweep queues them again.
   */
  due(staleMs: number, graceMs: number, limit: number): Promise<{ id: number; attemptCount: number; nextAttemptAt: Date }[]> {
    return this.db().query(
      `SELECT id::int AS id, attempt_count AS "attemptCount", next_attempt_at AS "nextAttemptAt" FROM webhook_deliveries
       WHERE status IN ('pending', 'failed') AND next_attempt_at <= now() - $2 * interval '1 millisecond'
         AND (claim_token IS NULL OR claimed_at < now() - $1 * interval '1 millisecond')
       ORDER BY next_attempt_at LIMIT $3`,
      [staleMs, graceMs, limit],
    );
  }
}
