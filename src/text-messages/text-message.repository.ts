import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { ListQuery, ListSpec } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import type { FailureCode, TextMessageStatus } from './text-message-state.js';
import { RECORD_JSON, RECORD_ROWS } from './text-message.columns.js';
import { TextMessage } from './text-message.entity.js';

/**
 * Whether a contact with the message's (`t`) recipient number is opted out of text messages: a
 * read of the contacts feature's table inside the claim statement, so the check and the claim are
 * one step (an opt-out committed before the claim always wins).
 */
export const OPTED_OUT_SQL = `EXISTS (SELECT 1 FROM contacts c WHERE c.phone = t.recipient AND c.dnc_sms_reason IS NOT NULL)`;

export type TextMessageChanges = Omit<Partial<TextMessage>, 'id' | 'createdAt'>;

/** What the worker needs of a message it claimed. */
export interface ClaimedMessage {
  id: number;
  content: string;
  recipient: string;
  createdBy: number | null;
  /** A contact with the recipient's number is opted out of text messages (read at claim time). */
  optedOut: boolean;
}

/** A message as a delivery report finds it (locked). */
export interface DeliveryTarget {
  id: number;
  status: TextMessageStatus;
  sendCount: number;
  claimToken: string | null;
  failureCode: FailureCode | null;
  createdBy: number | null;
  recipient: string;
}

/** Where a send stands, for a job that could not claim its message. */
export interface SendState {
  status: TextMessageStatus;
  sendCount: number;
  claimToken: string | null;
  claimAgeMs: number | null;
  waitMs: number | null;
  createdBy: number | null;
  recipient: string;
}

/**
 * Every query of the `text_messages` table: the CRUD of the API, and the conditional updates that
 * make a send happen at most once (claim, markSent, markFailed; see text-messages.processor.ts).
 * Writes take an optional transaction handle (the pool by default).
 */
@Injectable()
export class TextMessageRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly transactions: Transactions,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(TextMessage);
  }

  list(q: ListQuery, spec: ListSpec): Promise<ListPage<TextMessage>> {
    return paginate(this.repo().createQueryBuilder('t'), q, spec);
  }

  findById(id: number, tx?: Tx): Promise<TextMessage | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until the transaction ends: concurrent edits, sends and deletes apply one after the other. */
  findForUpdate(id: number, tx: Tx): Promise<TextMessage | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  exists(id: number): Promise<boolean> {
    return this.repo().exists({ where: { id } });
  }

  async insert(values: TextMessageChanges, tx?: Tx): Promise<TextMessage> {
    return this.repo(tx).save(this.repo(tx).create(values));
  }

  async update(id: number, changes: TextMessageChanges, tx?: Tx): Promise<void> {
    const { id: _id, createdAt: _createdAt, ...columns } = changes as Partial<TextMessage>;
    await this.repo(tx).update({ id }, columns);
  }

  /** Deletes the message and answers it as it was, or null: of concurrent deletes exactly one finds it. */
  remove(id: number, tx?: Tx): Promise<TextMessage | null> {
    return this.transactions.run(async (t) => {
      const message = await this.findForUpdate(id, t);
      if (!message) return null;
      await this.repo(t).delete({ id });
      return message;
    }, tx);
  }

  /**
   * Names of the campaigns embedded in message records. A read of the campaigns feature's table
   * for the message list (one query per page); campaigns own the writes.
   */
  async campaignNames(ids: number[], tx?: Tx): Promise<Map<number, string>> {
    const names = new Map<number, string>();
    if (!ids.length) return names;
    const rows: { id: number; name: string }[] = await this.db(tx).query(`SELECT id, name FROM campaigns WHERE id = ANY($1)`, [ids]);
    for (const r of rows) names.set(r.id, r.name);
    return names;
  }

  /** The message a delivery report is about, by our id or by the gateway's message id, locked. */
  async findForDelivery(by: { id: number } | { providerMessageId: string }, tx: Tx): Promise<DeliveryTarget | null> {
    const columns = `id, status, send_count AS "sendCount", claim_token AS "claimToken", failure_code AS "failureCode", created_by AS "createdBy", recipient`;
    const rows: DeliveryTarget[] =
      'id' in by
        ? await tx.query(`SELECT ${columns} FROM text_messages WHERE id = $1 FOR UPDATE`, [by.id])
        : await tx.query(`SELECT ${columns} FROM text_messages WHERE provider = 'http' AND provider_message_id = $1 FOR UPDATE`, [by.providerMessageId]);
    return rows[0] ?? null;
  }

  /** `delivered` at `at` (sentAt filled when unknown), failure and claim cleared. */
  async markDelivered(id: number, at: Date, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `UPDATE text_messages SET status = 'delivered', delivered_at = $2, modified_at = now(), sent_at = coalesce(sent_at, $2),
         failed_at = NULL, failure_code = NULL, failure_reason = NULL, claim_token = NULL, claimed_at = NULL WHERE id = $1`,
      [id, at],
    );
  }

  /** `failed` by the gateway's delivery report (failure code delivery_failed). */
  async markDeliveryFailed(id: number, at: Date, reason: string, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `UPDATE text_messages SET status = 'failed', failed_at = $2, modified_at = now(), failure_code = 'delivery_failed', failure_reason = $3,
         claim_token = NULL, claimed_at = NULL WHERE id = $1`,
      [id, at, reason],
    );
  }

  /**
   * Claims a queued message for one send (generation) with a conditional UPDATE: only one run can
   * win, and only while the message is queued for that send, unclaimed and due.
   */
  async claim(id: number, generation: number, token: string): Promise<ClaimedMessage | null> {
    const rows = await returning<ClaimedMessage>(
      this.db(),
      `UPDATE text_messages t SET claim_token = $3, claimed_at = now()
       WHERE id = $1 AND send_count = $2 AND status = 'queued' AND claim_token IS NULL
         AND (scheduled_for IS NULL OR scheduled_for <= now() + interval '1 second')
       RETURNING id, content, recipient, created_by AS "createdBy", ${OPTED_OUT_SQL} AS "optedOut"`,
      [id, generation, token],
    );
    return rows[0] ?? null;
  }

  /** `canceled` (terminal) with a code and reason, while our claim holds; false when it no longer does. */
  async markCanceled(id: number, token: string, code: FailureCode, reason: string, tx?: Tx): Promise<boolean> {
    const rows = await returning(
      this.db(tx),
      `UPDATE text_messages SET status = 'canceled', canceled_at = now(), modified_at = now(), failure_code = $3, failure_reason = $4,
         claim_token = NULL, claimed_at = NULL
       WHERE id = $1 AND claim_token = $2 RETURNING id`,
      [id, token, code, reason],
    );
    return rows.length > 0;
  }

  /** Gives a claim back (the provider did not take the message; the job retries). */
  async releaseClaim(id: number, token: string): Promise<void> {
    await this.db().query(`UPDATE text_messages SET claim_token = NULL, claimed_at = NULL WHERE id = $1 AND claim_token = $2`, [id, token]);
  }

  /** `sent` with the provider's id, while our claim holds; false when it no longer does (a delivery report came first, or deleted). */
  async markSent(id: number, token: string, provider: string, providerMessageId: string | null, tx?: Tx): Promise<boolean> {
    const rows = await returning(
      this.db(tx),
      `UPDATE text_messages SET status = 'sent', sent_at = now(), modified_at = now(), provider = $3, provider_message_id = $4, claim_token = NULL, claimed_at = NULL
       WHERE id = $1 AND claim_token = $2 RETURNING id`,
      [id, token, provider, providerMessageId],
    );
    return rows.length > 0;
  }

  /** `failed` with a code and reason, while our claim holds; false when it no longer does. */
  async markFailed(id: number, token: string, code: FailureCode, reason: string, tx?: Tx): Promise<boolean> {
    const rows = await returning(
      this.db(tx),
      `UPDATE text_messages SET status = 'failed', failed_at = now(), modified_at = now(), failure_code = $3, failure_reason = $4, claim_token = NULL, claimed_at = NULL
       WHERE id = $1 AND claim_token = $2 RETURNING id`,
      [id, token, code, reason],
    );
    return rows.length > 0;
  }

  /** Where a send stands (claim age and time until scheduledFor measured by the database clock). */
  async sendState(id: number): Promise<SendState | null> {
    const rows: SendState[] = await this.db().query(
      `SELECT status, send_count AS "sendCount", claim_token AS "claimToken",
              (extract(epoch FROM now() - claimed_at) * 1000)::float8 AS "claimAgeMs",
              (extract(epoch FROM scheduled_for - now()) * 1000)::float8 AS "waitMs",
              created_by AS "createdBy", recipient
       FROM text_messages WHERE id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  /**
   * A page (by id, after `afterId`) of messages left `queued` (a broadcast's first send is resumed
   * by the broadcast's own jobs, not message by message): all of them, or only those overdue
   * by `overdue` (a PostgreSQL interval such as '2 minutes').
   */
  async queuedPage(afterId: number, overdue: string | null, limit: number): Promise<{ id: number; sendCount: number; scheduledFor: Date | null }[]> {
    return this.db().query(
      `SELECT id, send_count AS "sendCount", scheduled_for AS "scheduledFor" FROM text_messages
       WHERE status = 'queued' AND id > $1 AND (broadcast_id IS NULL OR send_count > 1)
         AND ($2::interval IS NULL OR (queued_at < now() - $2::interval AND (scheduled_for IS NULL OR scheduled_for < now() - $2::interval)))
       ORDER BY id LIMIT $3`,
      [afterId, overdue, limit],
    );
  }

  /**
   * Records the provider's acceptance of claimed messages (while the claim holds): `sent`, or
   * `delivered` at once when the provider said so; text_message.sent (and .delivered) per message.
   */
  async markSentMany(token: string, provider: string, items: { id: number; providerMessageId: string | null; delivered: boolean }[]): Promise<number> {
    if (!items.length) return 0;
    const rows: { n: number }[] = await this.db().query(
      `WITH d AS (SELECT * FROM unnest($2::int[], $3::text[], $4::boolean[]) AS d(id, pid, delivered)),
            u AS (UPDATE text_messages t SET status = CASE WHEN d.delivered THEN 'delivered' ELSE 'sent' END, sent_at = now(),
                         delivered_at = CASE WHEN d.delivered THEN now() END, modified_at = now(), provider = $5, provider_message_id = d.pid,
                         claim_token = NULL, claimed_at = NULL
                  FROM d WHERE t.id = ANY ($2::int[]) AND t.id = d.id AND t.claim_token = $1 RETURNING t.*),
            r AS (${RECORD_ROWS}),
            x AS (SELECT r.id, 1 AS k, 'text_message.sent' AS type, ${RECORD_JSON} || jsonb_build_object('status', 'sent', 'deliveredAt', NULL) AS data,
                         '{"status":"queued"}'::jsonb AS previous FROM r
                  UNION ALL
                  SELECT r.id, 2, 'text_message.delivered', ${RECORD_JSON}, '{"status":"sent"}'::jsonb FROM r WHERE r.status = 'delivered'),
            e AS (${outboxInsertSql('type', 'data', 'previous', 'FROM x ORDER BY id, k')})
       SELECT count(*)::int AS n FROM r`,
      [token, items.map((i) => i.id), items.map((i) => i.providerMessageId), items.map((i) => i.delivered), provider],
    );
    return rows[0].n;
  }
}
