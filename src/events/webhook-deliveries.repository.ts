import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { defineList, type ListQuery, type ListSpec } from '../lists/list-spec.js';
import { type ListPage, type PageLoader, paginate } from '../lists/list-sql.js';
import { storableText } from '../common/storable-text.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { WebhookDelivery } from './webhook-delivery.entity.js';

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
  /** The event's position in the feed; null for a delivery that is not a feed event (a tracked event, a workflow's webhook step). */
  sequence: number | null;
  body: string;
}

/**
 * A delivery that reached its end: succeeded, or dead (a refusal such as a 4xx, its retries
 * exhausted, its webhook disabled or deleted). Listeners (WebhooksService.onDeliveriesSettled)
 * learn of it in the transaction that settles it.
 */
export interface SettledDelivery {
  id: number;
  webhookId: number;
  eventId: string;
  eventType: string;
  body: string;
  status: 'succeeded' | 'dead';
}

/** Told of settled deliveries: `settled` in the settling transaction, `committed` once it committed. */
export interface DeliverySettledListener {
  settled(deliveries: readonly SettledDelivery[], tx: Tx): Promise<void>;
  committed?(): void;
}

/** Where one delivery stands, as a caller waiting for its outcome reads it (a workflow's webhook step). */
export interface DeliveryOutcome {
  /** pending: not attempted yet, or failed and retried later. */
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  /** The receiver's status at the last attempt (null: none, or no answer). */
  code: number | null;
  /** Why it failed (status and a short reason), null unless failed. */
  reason: string | null;
}

/** A delivery's next attempt time as answered: only while one is due (pending or failed). */
const NEXT_ATTEMPT_AT = `CASE WHEN d.status IN ('pending', 'failed') THEN d.next_attempt_at END`;

/**
 * A webhook's deliveries list (GET /api/webhooks/{id}/deliveries and its POST .../search twin):
 * newest first unless orderByDir says otherwise. The service names each webhook's list
 * (`webhook 5 deliveries`), so that a cursor of one webhook's list is refused by another's.
 */
export const WEBHOOK_DELIVERY_LIST_SPEC = defineList({
  name: 'webhook deliveries',
  defaultOrderByDir: 'DESC',
  sortable: ['id', 'eventType', 'sequence', 'status', 'attemptCount', 'nextAttemptAt', 'createdAt', 'completedAt'],
  searchExpression: `lower(d.event_type || ' ' || d.event_id::text || ' ' || coalesce(d.last_error, ''))`,
  filters: { status: { type: 'string', column: 'd.status', values: DELIVERY_STATUSES } },
  fields: {
    id: { type: 'id', sql: 'd.id' },
    eventId: { type: 'string', sql: 'd.event_id::text', description: 'the event (a UUID, as in the event feed)' },
    eventType: { type: 'string', sql: 'd.event_type' },
    sequence: { type: 'int', sql: 'd.sequence', description: "the event's position in the event feed" },
    status: { type: 'enum', sql: 'd.status', values: DELIVERY_STATUSES },
    attemptCount: { type: 'int', sql: 'd.attempt_count', description: 'the attempts made so far' },
    nextAttemptAt: { type: 'datetime', sql: NEXT_ATTEMPT_AT, description: 'when the next attempt is due (null unless pending or failed)' },
    lastError: { type: 'string', sql: 'd.last_error' },
    createdAt: { type: 'datetime', sql: 'd.created_at' },
    completedAt: { type: 'datetime', sql: 'd.completed_at' },
  },
  properties: [
    'id',
    'webhookId',
    'eventId',
    'eventType',
    'sequence',
    'status',
    'attemptCount',
    'attempts',
    'nextAttemptAt',
    'lastError',
    'createdAt',
    'completedAt',
  ],
});

const COLUMNS = `id::int AS "id", webhook_id AS "webhookId", event_id AS "eventId", event_type AS "eventType", sequence::float8 AS "sequence", body,
  status, attempt_count AS "attemptCount", attempts, next_attempt_at AS "nextAttemptAt", window_started_at AS "windowStartedAt",
  last_error AS "lastError", created_at AS "createdAt", completed_at AS "completedAt"`;

/** Every query of webhook_deliveries. */
@Injectable()
export class WebhookDeliveriesRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly transactions: Transactions,
  ) {}

  private db(tx?: Tx) {
    return this.transactions.handle(tx);
  }

  /** One row per (webhook, event); a pair already present is skipped. Answers the webhooks that got new rows. */
  async insertMany(rows: readonly NewDelivery[], tx: Tx): Promise<number[]> {
    if (!rows.length) return [];
    const res: { webhookId: number }[] = await tx.query(
      `INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, sequence, body)
       SELECT * FROM unnest($1::int[], $2::uuid[], $3::text[], $4::bigint[], $5::text[])
       ON CONFLICT ON CONSTRAINT webhook_deliveries_webhook_event_uq DO NOTHING
       RETURNING webhook_id AS "webhookId"`,
      [rows.map((r) => r.webhookId), rows.map((r) => r.eventId), rows.map((r) => r.eventType), rows.map((r) => r.sequence), rows.map((r) => r.body)],
    );
    return [...new Set(res.map((r) => r.webhookId))];
  }

  /** A webhook's delivery of one event (its Webhook-Id), by the (webhook, event) unique key. */
  async findByEvent(webhookId: number, eventId: string, tx?: Tx): Promise<DeliveryRow | null> {
    const rows: DeliveryRow[] = await this.db(tx).query(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 AND event_id = $2`, [
      webhookId,
      eventId,
    ]);
    return rows[0] ?? null;
  }

  /** findByEvent for many (webhook, event) keys in one statement; those that exist. */
  async findByEvents(keys: readonly { webhookId: number; eventId: string }[], tx?: Tx): Promise<DeliveryRow[]> {
    if (!keys.length) return [];
    return this.db(tx).query(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE (webhook_id, event_id) IN (SELECT * FROM unnest($1::int[], $2::uuid[]))`, [
      keys.map((k) => k.webhookId),
      keys.map((k) => k.eventId),
    ]);
  }

  async find(webhookId: number, id: number, tx?: Tx): Promise<DeliveryRow | null> {
    const rows: DeliveryRow[] = await this.db(tx).query(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2`, [id, webhookId]);
    return rows[0] ?? null;
  }

  /**
   * One page of a webhook's deliveries under the list parameters (`spec` names this webhook's list):
   * the filters, order and paging run on the (webhook_id, id) scope, the page's rows are read in
   * one statement of COLUMNS.
   */
  async page(webhookId: number, q: ListQuery, spec: ListSpec): Promise<ListPage<DeliveryRow>> {
    const qb = this.dataSource.getRepository(WebhookDelivery).createQueryBuilder('d').where('d.webhook_id = :webhookId', { webhookId });
    const load: PageLoader<DeliveryRow> = (where, params, order, page) =>
      this.db().query(
        `SELECT ${COLUMNS} FROM webhook_deliveries d WHERE ${where} ORDER BY ${order}${page ? ` LIMIT ${Math.trunc(page.limit)} OFFSET ${Math.trunc(page.offset)}` : ''}`,
        params,
      );
    const scopeCount = async () => {
      const [{ n }]: { n: number }[] = await this.db().query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);
      return n;
    };
    return paginate(qb, q, spec, { scoped: true, scopeCount, load });
  }

  /**
   * Takes up to `limit` due deliveries of one webhook that nobody holds, oldest first, under one
   * claim token, in one statement: rows another run holds are skipped. Answers the rows in
   * sequence order. (A claim left stale is never taken over here: see `claimStale`.)
   */
  async claimBatch(webhookId: number, token: string, limit: number): Promise<DeliveryRow[]> {
    const rows: DeliveryRow[] = await returning(
      this.db(),
      // The rows are picked once, in a materialized CTE: a LIMIT inside `IN (subquery)` may be re-run by the planner.
      `WITH picked AS MATERIALIZED (
         SELECT id AS picked_id FROM webhook_deliveries
         WHERE webhook_id = $1 AND status IN ('pending', 'failed') AND next_attempt_at <= now() + interval '200 milliseconds'
           AND claim_token IS NULL
         ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d SET claim_token = $2, claimed_at = now()
       FROM picked WHERE d.id = picked.picked_id
       RETURNING ${COLUMNS}`,
      [webhookId, token, limit],
    );
    return rows.sort((a, b) => a.id - b.id);
  }

  /**
   * Takes over, under a new token, up to `limit` claims of one webhook older than `staleMs` (not
   * renewed by `renewClaims`): their request was sent, or may have been, and its outcome was never
   * recorded (the worker died, or recording failed). The caller records each as a failed attempt,
   * under the webhook's row lock, in id order. Rows another run holds are skipped.
   */
  async claimStale(webhookId: number, token: string, staleMs: number, limit: number, tx: Tx): Promise<DeliveryRow[]> {
    const rows: DeliveryRow[] = await returning(
      tx,
      `WITH picked AS MATERIALIZED (
         SELECT id AS picked_id FROM webhook_deliveries
         WHERE webhook_id = $1 AND claim_token IS NOT NULL AND claimed_at < now() - $3 * interval '1 millisecond'
         ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d SET claim_token = $2, claimed_at = now()
       FROM picked WHERE d.id = picked.picked_id
       RETURNING ${COLUMNS}`,
      [webhookId, token, staleMs, limit],
    );
    return rows.sort((a, b) => a.id - b.id);
  }

  /**
   * Keeps a batch's claims live while its requests run (a claim not renewed goes stale). Rows locked
   * meanwhile (being recorded, or deleted with their webhook) are skipped rather than waited for, so
   * a renewal never waits in a lock cycle.
   */
  async renewClaims(webhookId: number, token: string): Promise<void> {
    await this.db().query(
      `WITH held AS MATERIALIZED (
         SELECT id AS held_id FROM webhook_deliveries WHERE webhook_id = $1 AND claim_token = $2 ORDER BY id FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d SET claimed_at = now() FROM held WHERE d.id = held.held_id`,
      [webhookId, token],
    );
  }

  /**
   * Appends one attempt to each delivery and sets its outcome, in one statement, only where our
   * claim still holds (a manual retry meanwhile released it); answers the ids recorded. The caller
   * holds the webhook's row lock (WebhooksRepository.lockForDeliveries); the rows are locked in id
   * order, as every statement that locks several deliveries does.
   */
  async recordAttempts(
    token: string,
    outcomes: readonly { id: number; attempt: DeliveryAttempt; status: DeliveryStatus; nextAttemptAt: Date | null }[],
    tx?: Tx,
  ): Promise<number[]> {
    if (!outcomes.length) return [];
    const rows: { id: number }[] = await returning(
      this.db(tx),
      `WITH held AS MATERIALIZED (SELECT id AS held_id FROM webhook_deliveries WHERE id = ANY($2::bigint[]) AND claim_token = $1 ORDER BY id FOR UPDATE)
       UPDATE webhook_deliveries d SET attempts = d.attempts || jsonb_build_array(u.attempt::jsonb), attempt_count = d.attempt_count + 1,
         status = u.status, next_attempt_at = u.next::timestamptz, last_error = u.error, claim_token = NULL, claimed_at = NULL,
         completed_at = CASE WHEN u.status IN ('succeeded', 'dead') THEN now() END
       FROM held, unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(id, attempt, status, next, error)
       WHERE d.id = held.held_id AND d.id = u.id AND d.claim_token = $1 RETURNING d.id::int AS id`,
      [
        token,
        outcomes.map((o) => o.id),
        // jsonb refuses NUL and unpaired surrogates: whatever the attempt carries is stored as text that fits.
        outcomes.map((o) =>
          JSON.stringify({ ...o.attempt, error: o.attempt.error === null ? null : storableText(o.attempt.error), response: storableText(o.attempt.response) }),
        ),
        outcomes.map((o) => o.status),
        outcomes.map((o) => (o.nextAttemptAt ? o.nextAttemptAt.toISOString() : null)),
        outcomes.map((o) => (o.attempt.error !== null ? storableText(o.attempt.error) : o.status === 'succeeded' ? null : `HTTP ${o.attempt.code}`)),
      ],
    );
    return rows.map((r) => r.id);
  }

  /**
   * When the next delivery of a webhook that nobody holds falls due (null: none waits): the drain
   * job is queued again for then.
   */
  async nextDue(webhookId: number): Promise<Date | null> {
    const rows: { at: Date | null }[] = await this.db().query(
      `SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE webhook_id = $1 AND status IN ('pending', 'failed') AND claim_token IS NULL`,
      [webhookId],
    );
    return rows[0]?.at ?? null;
  }

  /** Ends claimed deliveries without an attempt (their webhook was disabled or deleted meanwhile); answers the ids ended. */
  async markDead(token: string, ids: readonly number[], reason: string, tx?: Tx): Promise<number[]> {
    if (!ids.length) return [];
    const rows: { id: number }[] = await returning(
      this.db(tx),
      `WITH held AS MATERIALIZED (SELECT id AS held_id FROM webhook_deliveries WHERE id = ANY($2::bigint[]) AND claim_token = $1 ORDER BY id FOR UPDATE)
       UPDATE webhook_deliveries d SET status = 'dead', last_error = $3, next_attempt_at = NULL, claim_token = NULL, claimed_at = NULL, completed_at = now()
       FROM held WHERE d.id = held.held_id AND d.claim_token = $1 RETURNING d.id::int AS id`,
      [token, ids, reason],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Per webhook: its attempts since `since` and how many of them got a 2xx, and the last attempt of
   * its newest delivery that has one (the console's webhook list).
   */
  async attemptSummaries(
    webhookIds: readonly number[],
    since: Date,
  ): Promise<{ webhookId: number; attempts: number; succeeded: number; lastStatus: DeliveryStatus | null; lastAttempt: DeliveryAttempt | null }[]> {
    if (!webhookIds.length) return [];
    return this.db().query(
      `SELECT w.id AS "webhookId", coalesce(s.attempts, 0)::int AS attempts, coalesce(s.succeeded, 0)::int AS succeeded,
              l.status AS "lastStatus", l.last AS "lastAttempt"
         FROM unnest($1::int[]) AS w(id)
         LEFT JOIN LATERAL (
           SELECT count(*) AS attempts, count(*) FILTER (WHERE (a->>'code')::int BETWEEN 200 AND 299) AS succeeded
             FROM webhook_deliveries d CROSS JOIN LATERAL jsonb_array_elements(d.attempts) a
            WHERE d.webhook_id = w.id AND (a->>'at')::timestamptz >= $2
         ) s ON true
         LEFT JOIN LATERAL (
           SELECT d.status, d.attempts->-1 AS last FROM webhook_deliveries d
            WHERE d.webhook_id = w.id AND d.attempt_count > 0 ORDER BY d.id DESC LIMIT 1
         ) l ON true`,
      [webhookIds, since],
    );
  }

  /** Makes a delivery due again now, with a fresh 72 h window (a claim on it is released); false when absent. */
  async requeue(webhookId: number, id: number, staleMs: number, tx?: Tx): Promise<boolean> {
    // A delivery a drain holds (claimed less than staleMs ago) is being sent now: that attempt is the
    // redelivery, so its claim is left alone. Clearing it let a second drain claim and send the same
    // delivery while the first was still sending (two requests for one redelivery).
    const rows: { id: number; requeued: boolean }[] = await this.db(tx).query(
      `WITH d AS (SELECT id FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2),
            r AS (
              UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), window_started_at = now(), completed_at = NULL,
                claim_token = NULL, claimed_at = NULL
              WHERE id = $1 AND webhook_id = $2 AND (claim_token IS NULL OR claimed_at < now() - $3 * interval '1 millisecond')
              RETURNING id)
       SELECT d.id::int AS id, EXISTS (SELECT 1 FROM r) AS requeued FROM d`,
      [id, webhookId, staleMs],
    );
    return rows.length > 0;
  }

  /** Makes every dead delivery of a webhook due again (on re-enabling it, under its row lock); answers how many. */
  async requeueDead(webhookId: number, tx?: Tx): Promise<number> {
    const rows: { id: number }[] = await returning(
      this.db(tx),
      `WITH dead AS MATERIALIZED (SELECT id AS dead_id FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'dead' ORDER BY id FOR UPDATE)
       UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = now(), window_started_at = now(), completed_at = NULL,
         claim_token = NULL, claimed_at = NULL
       FROM dead WHERE d.id = dead.dead_id AND d.status = 'dead' RETURNING d.id::int AS id`,
      [webhookId],
    );
    return rows.length;
  }

  /**
   * Deletes every delivery of a webhook, locking them in id order; the caller holds the webhook's
   * row lock and deletes the webhook next (its ON DELETE CASCADE then finds nothing left to lock).
   * Answers the deliveries that had not settled yet (they end dead with their webhook).
   */
  async removeAllOf(webhookId: number, tx: Tx): Promise<SettledDelivery[]> {
    const rows: (Omit<SettledDelivery, 'status'> & { status: DeliveryStatus })[] = await returning(
      tx,
      `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id FOR UPDATE)
       RETURNING id::int AS id, webhook_id AS "webhookId", event_id AS "eventId", event_type AS "eventType", body, status`,
      [webhookId],
    );
    // Those still pending or retried end with their webhook (dead): the answer lists them as such.
    return rows.filter((r) => r.status === 'pending' || r.status === 'failed').map((r) => ({ ...r, status: 'dead' as const }));
  }

  /**
   * Webhooks with deliveries that are due and not being attempted (never queued because the broker
   * was down, a lost job, or a claim left by a worker that died): the recovery sweep queues their
   * drain jobs again.
   */
  dueWebhooks(staleMs: number, graceMs: number, limit: number): Promise<{ webhookId: number }[]> {
    return this.db().query(
      `SELECT DISTINCT webhook_id AS "webhookId" FROM webhook_deliveries
       WHERE status IN ('pending', 'failed') AND next_attempt_at <= now() - $2 * interval '1 millisecond'
         AND (claim_token IS NULL OR claimed_at < now() - $1 * interval '1 millisecond')
       LIMIT $3`,
      [staleMs, graceMs, limit],
    );
  }
}
