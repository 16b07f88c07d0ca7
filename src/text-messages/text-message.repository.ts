import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { ListQuery, ListSpec } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, prepared, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import type { Principal } from '../common/request.js';
import type { FailureCode, TextMessageStatus } from './text-message-state.js';
import { RECORD_JSON, RECORD_ROWS, type TextMessageRow } from './text-message.columns.js';
import { SENDABLE_STATUSES } from './text-message-state.js';
import { TextMessage } from './text-message.entity.js';

/**
 * Whether a contact with the message's (`t`) recipient number is opted out of text messages: a
 * read of the contacts feature's table inside the claim statement, so the check and the claim are
 * one step (an opt-out committed before the claim always wins).
 */
const optedOutSql = (a: string) => `EXISTS (SELECT 1 FROM contacts c WHERE c.phone = ${a}.recipient AND c.dnc_sms_reason IS NOT NULL)`;
export const OPTED_OUT_SQL = optedOutSql('t');

/** What a claim answers of a message (ClaimedMessage). */
const CLAIMED_FIELDS = `t.id, t.content, t.recipient, t.created_by AS "createdBy", t.idempotent_handover AS "idempotentHandover", ${OPTED_OUT_SQL} AS "optedOut"`;

/** The claims of many sends (claimMany): each row by id, for its send (generation), with its own token. */
const CLAIM_MANY = prepared(`WITH d AS (SELECT * FROM unnest($1::int[], $2::int[], $3::uuid[]) AS d(id, gen, token))
  UPDATE text_messages t SET claim_token = d.token, claimed_at = now()
  FROM d WHERE t.id = ANY ($1::int[]) AND t.id = d.id AND t.send_count = d.gen AND t.status = 'queued' AND t.claim_token IS NULL
    AND (t.scheduled_for IS NULL OR t.scheduled_for <= now() + interval '1 second')
  RETURNING d.token, ${CLAIMED_FIELDS}`);

/**
 * Takes over a claim left by a dead worker (stale: older than the provider's longest call + a margin)
 * on a message handed over again with its Idempotency-Key (idempotent_handover): the old token is
 * replaced by ours only while it still holds and the send is the same.
 */
const TAKE_OVER = prepared(`UPDATE text_messages t SET claim_token = $4, claimed_at = now()
  WHERE t.id = $1 AND t.send_count = $2 AND t.status = 'queued' AND t.claim_token = $3 AND t.idempotent_handover
  RETURNING ${CLAIMED_FIELDS}`);

/**
 * `sent` (or `delivered` at once) for claimed messages, each while its own claim holds, with
 * text_message.sent (and .delivered) per message in the same statement (markSentEach).
 */
const MARK_SENT_EACH = prepared(`WITH d AS (SELECT * FROM unnest($1::int[], $2::uuid[], $3::text[], $4::boolean[]) AS d(id, token, pid, delivered)),
       u AS (UPDATE text_messages t SET status = CASE WHEN d.delivered THEN 'delivered' ELSE 'sent' END, sent_at = now(),
                    delivered_at = CASE WHEN d.delivered THEN now() END, modified_at = now(), provider = $5, provider_message_id = d.pid,
                    claim_token = NULL, claimed_at = NULL
             FROM d WHERE t.id = ANY ($1::int[]) AND t.id = d.id AND t.claim_token = d.token RETURNING t.*, d.token AS claimed_by),
       r AS (${RECORD_ROWS}),
       x AS (SELECT r.id, 1 AS k, 'text_message.sent' AS type, ${RECORD_JSON} || jsonb_build_object('status', 'sent', 'deliveredAt', NULL) AS data,
                    '{"status":"queued"}'::jsonb AS previous FROM r
             UNION ALL
             SELECT r.id, 2, 'text_message.delivered', ${RECORD_JSON}, '{"status":"sent"}'::jsonb FROM r WHERE r.status = 'delivered'),
       e AS (${outboxInsertSql('type', 'data', 'previous', 'FROM x ORDER BY id, k')})
  SELECT u.id, u.claimed_by AS token FROM u`);

/** What {@link TextMessageRepository.queueSend} found and did: the status before, the opt-out, and the queued row (null when not queued). */
export interface QueuedSend {
  previousStatus: TextMessageStatus;
  /** The message's recipient as the statement found it. */
  recipient: string;
  optedOut: boolean;
  /** The message as queued (with its campaign's name), or null when it was not (not sendable, or opted out). */
  row: (TextMessageRow & { sendCount: number }) | null;
}

/**
 * Bench row "send 10,000 text messages": POST /api/text-messages/{id}/send as one statement (one round
 * trip, no BEGIN/COMMIT): the row locked (o), the opt-out read (x), the conditional UPDATE that starts a
 * new send (u: only from draft or failed and not opted out; send_count + 1, the last send's outcome
 * and claim cleared), the record with its campaign's name (r) and the text_message.queued event (e).
 * The final row always names the status before and the opt-out, so a refusal needs no second read.
 * The job is added after the commit (TextMessagesService.send).
 */
const QUEUE_SEND = prepared(`WITH o AS (SELECT id, status, recipient FROM text_messages WHERE id = $1 FOR UPDATE),
       x AS (SELECT o.id, o.status, o.recipient, ${optedOutSql('o')} AS opted_out FROM o),
       u AS (UPDATE text_messages t SET status = 'queued', scheduled_for = NULL, send_count = t.send_count + 1, queued_at = now(),
                    sent_at = NULL, delivered_at = NULL, failed_at = NULL, canceled_at = NULL, failure_code = NULL, failure_reason = NULL,
                    claim_token = NULL, claimed_at = NULL, provider = NULL, provider_message_id = NULL, idempotent_handover = false,
                    modified_at = now(), modified_by = $2, modified_by_user = $3
             FROM x WHERE t.id = x.id AND x.status = ANY ('{${SENDABLE_STATUSES.join(',')}}'::text[]) AND NOT x.opted_out
             RETURNING t.*),
       r AS (${RECORD_ROWS}),
       e AS (${outboxInsertSql(`'text_message.queued'`, RECORD_JSON, `jsonb_build_object('status', x.status)`, 'FROM r, x')})
  SELECT x.status AS "previousStatus", x.recipient AS "recipientFound", x.opted_out AS "optedOut", (SELECT u.send_count FROM u) AS "sendCount", r.*
  FROM x LEFT JOIN r ON true`);

export type TextMessageChanges = Omit<Partial<TextMessage>, 'id' | 'createdAt'>;

/** What the worker needs of a message it claimed. */
export interface ClaimedMessage {
  id: number;
  content: string;
  recipient: string;
  createdBy: number | null;
  /** A contact with the recipient's number is opted out of text messages (read at claim time). */
  optedOut: boolean;
  /** Handed over again with the same Idempotency-Key after a worker death or an unknown outcome (a workflow step's message). */
  idempotentHandover: boolean;
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
  idempotentHandover: boolean;
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

  /** insert() for many new messages (a workflow step's batch); TypeORM writes them as one multi-row INSERT. */
  async insertMany(values: TextMessageChanges[], tx: Tx): Promise<TextMessage[]> {
    if (!values.length) return [];
    return this.repo(tx).save(values.map((v) => this.repo(tx).create(v)));
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

  /**
   * Starts a new send of the message now (QUEUE_SEND, one statement on the pool or in the current
   * unit of work): null when there is no such message.
   */
  async queueSend(id: number, who: Principal): Promise<QueuedSend | null> {
    type Found = TextMessageRow & { previousStatus: TextMessageStatus; recipientFound: string; optedOut: boolean; sendCount: number | null };
    const rows: Found[] = await this.db().query(QUEUE_SEND, [id, who.userId, who.userName]);
    const found = rows[0];
    if (!found) return null;
    const { previousStatus, recipientFound, optedOut, sendCount, ...row } = found;
    return { previousStatus, recipient: recipientFound, optedOut, row: sendCount === null ? null : { ...row, sendCount } };
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
    return (await this.claimMany([{ id, generation, token }]))[0];
  }

  /**
   * claim() for many sends in one statement (the single-send jobs running at once in a worker), each
   * with its own token and exactly claim's conditions; answers, in the items' order, the message each
   * claimed or null. Rows are locked in id order. Two items for one message: at most one wins (the
   * row is updated once), the other answers null.
   */
  async claimMany(items: { id: number; generation: number; token: string }[]): Promise<(ClaimedMessage | null)[]> {
    if (!items.length) return [];
    const sorted = [...items].sort((a, b) => a.id - b.id);
    const rows = await returning<ClaimedMessage & { token: string }>(this.db(), CLAIM_MANY, [
      sorted.map((i) => i.id),
      sorted.map((i) => i.generation),
      sorted.map((i) => i.token),
    ]);
    const byToken = new Map(rows.map(({ token, ...m }) => [token, m]));
    return items.map((i) => byToken.get(i.token) ?? null);
  }

  /** Takes over `staleToken`'s claim with `token` (TAKE_OVER); null when it no longer holds or the message is not handed over again. */
  async takeOver(id: number, generation: number, staleToken: string, token: string): Promise<ClaimedMessage | null> {
    return (await returning<ClaimedMessage>(this.db(), TAKE_OVER, [id, generation, staleToken, token]))[0] ?? null;
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
              created_by AS "createdBy", recipient, idempotent_handover AS "idempotentHandover"
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
    return (
      await this.markSentEach(
        provider,
        items.map((i) => ({ ...i, token })),
      )
    ).filter(Boolean).length;
  }

  /**
   * markSentMany with a token per message (the single-send jobs of a worker recorded together): one
   * statement; answers, in the items' order, whether each was recorded (false: its claim no longer holds).
   */
  async markSentEach(provider: string, items: { id: number; token: string; providerMessageId: string | null; delivered: boolean }[]): Promise<boolean[]> {
    if (!items.length) return [];
    const rows: { id: number; token: string }[] = await this.db().query(MARK_SENT_EACH, [
      items.map((i) => i.id),
      items.map((i) => i.token),
      items.map((i) => i.providerMessageId),
      items.map((i) => i.delivered),
      provider,
    ]);
    const recorded = new Set(rows.map((r) => `${r.id}/${r.token}`));
    return items.map((i) => recorded.has(`${i.id}/${i.token}`));
  }
}
