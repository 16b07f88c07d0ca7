import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { type ListPage, type ListQuery, type ListSpec, paginate } from '../lists/list.js';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import type { FailureCode, TextMessageStatus } from './text-message-state.js';
import { TextMessage } from './text-message.entity.js';

/**
 * Whether a contact with the message's (`t`) recipient number is opted out of text messages: a
 * read of the contacts feature's table inside the claim statement, so the check and the claim are
 * one step (an opt-out committed before the claim always wins).
 */
const OPTED_OUT_SQL = `EXISTS (SELECT 1 FROM contacts c WHERE c.phone = t.recipient AND c.dnc_sms_reason IS NOT NULL)`;

const isoSql = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;

/**
 * The message record (exactly TextMessagesService.toRecord) as jsonb, from a row `r` of
 * text_messages with the campaign's name as `r.campaign_name`: the event data of the set-based
 * writes of broadcasts, which insert one event per message in the same statement.
 */
const RECORD_JSON = `jsonb_build_object('id', r.id, 'content', r.content, 'recipient', r.recipient, 'status', r.status,
  'scheduledFor', ${isoSql('r.scheduled_for')}, 'sentAt', ${isoSql('r.sent_at')}, 'deliveredAt', ${isoSql('r.delivered_at')},
  'failedAt', ${isoSql('r.failed_at')}, 'canceledAt', ${isoSql('r.canceled_at')}, 'failureReason', r.failure_reason, 'failureCode', r.failure_code,
  'campaign', CASE WHEN r.campaign_id IS NULL OR r.campaign_name IS NULL THEN NULL ELSE jsonb_build_object('id', r.campaign_id, 'name', r.campaign_name) END,
  'broadcastId', r.broadcast_id,
  'createdAt', ${isoSql('r.created_at')}, 'modifiedAt', ${isoSql('r.modified_at')}, 'createdBy', r.created_by, 'createdByUser', r.created_by_user,
  'modifiedBy', r.modified_by, 'modifiedByUser', r.modified_by_user)`;

/** A message of a broadcast claimed by a worker (batch claim). */
export interface BatchClaimed {
  id: number;
  content: string;
  recipient: string;
  sendCount: number;
  optedOut: boolean;
}

/** Why a contact of a broadcast's audience got no message. */
export const SKIP_REASONS = ['contact_not_found', 'no_phone', 'opted_out', 'duplicate_phone', 'content_empty', 'content_too_long'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** What the set-based creation of a broadcast's messages needs. */
export interface BroadcastMessagesSpec {
  broadcastId: number;
  campaignId: number | null;
  /** SELECT yielding the audience's contact ids as `id` (parameters in `params`). */
  audienceSql: string;
  /** The rendered content as a SQL expression over a contacts row `c` (parameters in `params`). */
  contentSql: string;
  params: unknown[];
  userId: number | null;
  userName: string | null;
}

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
    return (tx ?? this.dataSource.manager).getRepository(TextMessage);
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

  // ---- Broadcasts: set-based writes, each with one event per changed message in the same statement ----

  /**
   * Runs `UPDATE text_messages t SET <set> WHERE <where> RETURNING t.*` and writes `type` (previous
   * `{ status: previousStatus }`) for every updated row, in one statement; answers the updated ids.
   */
  private async transition(db: Db, set: string, where: string, params: unknown[], type: string, previousStatus: string): Promise<number[]> {
    params.push(type, JSON.stringify({ status: previousStatus }));
    const n = params.length;
    const rows: { id: number }[] = await db.query(
      `WITH u AS (UPDATE text_messages t SET ${set}, modified_at = now() WHERE ${where} RETURNING t.*),
            r AS (SELECT u.*, cp.name AS campaign_name FROM u LEFT JOIN campaigns cp ON cp.id = u.campaign_id),
            e AS (${outboxInsertSql(`$${n - 1}`, RECORD_JSON, `$${n}::jsonb`, 'FROM r ORDER BY r.id')})
       SELECT id FROM r ORDER BY id`,
      params,
    );
    return rows.map((r) => r.id);
  }

  /**
   * Creates the messages of a broadcast in one INSERT ... SELECT: resolves the audience, renders the
   * content per contact, skips (and counts by reason) contacts that are missing, have no valid phone,
   * are opted out, share a phone with a lower contact id, or whose rendered text is empty or over
   * 1600 characters; every message `queued` (send 1) with a text_message.queued event. The unique
   * (broadcast_id, contact_id) index keeps a recipient to one message whatever races.
   * Reads contacts (and the audience's source table) of other features: a read join, no write.
   */
  async insertForBroadcast(spec: BroadcastMessagesSpec, tx: Tx): Promise<{ created: number; skipped: Partial<Record<SkipReason, number>> }> {
    const params = [...spec.params];
    const p = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    const [bid, cid, uid, uname] = [p(spec.broadcastId), p(spec.campaignId), p(spec.userId), p(spec.userName)];
    const queued = p(JSON.stringify({ status: null }));
    const rows: { created: number; skipped: Partial<Record<SkipReason, number>> }[] = await tx.query(
      `WITH aud AS (SELECT DISTINCT a.id FROM (${spec.audienceSql}) a),
            src AS (SELECT aud.id, c.id AS found, c.phone, CASE WHEN c.id IS NULL THEN NULL ELSE ${spec.contentSql} END AS body
                    FROM aud LEFT JOIN contacts c ON c.id = aud.id),
            cls AS (SELECT s.id, s.phone, s.body, CASE
                      WHEN s.found IS NULL THEN 'contact_not_found'
                      WHEN s.phone IS NULL OR s.phone !~ '^[+][1-9][0-9]{6,14}$' THEN 'no_phone'
                      WHEN EXISTS (SELECT 1 FROM contacts d WHERE d.phone = s.phone AND d.dnc_sms_reason IS NOT NULL) THEN 'opted_out'
                      WHEN row_number() OVER (PARTITION BY s.phone ORDER BY s.id) > 1 THEN 'duplicate_phone'
                      WHEN btrim(s.body) = '' THEN 'content_empty'
                      WHEN char_length(s.body) > 1600 THEN 'content_too_long'
                    END AS skip FROM src s),
            ins AS (INSERT INTO text_messages (content, recipient, status, campaign_id, broadcast_id, contact_id, send_count, queued_at, created_by, created_by_user)
                    SELECT body, phone, 'queued', ${cid}::int, ${bid}::int, id, 1, now(), ${uid}::int, ${uname}::text FROM cls WHERE skip IS NULL ORDER BY id
                    ON CONFLICT (broadcast_id, contact_id) WHERE broadcast_id IS NOT NULL DO NOTHING
                    RETURNING *),
            r AS (SELECT ins.*, cp.name AS campaign_name FROM ins LEFT JOIN campaigns cp ON cp.id = ins.campaign_id),
            e AS (${outboxInsertSql(`'text_message.queued'`, RECORD_JSON, `${queued}::jsonb`, 'FROM r ORDER BY r.id')})
       SELECT (SELECT count(*) FROM ins)::int AS created,
              (SELECT coalesce(jsonb_object_agg(skip, n), '{}'::jsonb) FROM (SELECT skip, count(*)::int AS n FROM cls WHERE skip IS NOT NULL GROUP BY skip) k) AS skipped`,
      params,
    );
    return rows[0];
  }

  /**
   * Claims up to `limit` queued, unclaimed messages of a broadcast that is `sending` (SKIP LOCKED:
   * workers never wait on each other's rows), with whether each recipient opted out meanwhile.
   */
  async claimBatch(broadcastId: number, token: string, limit: number): Promise<BatchClaimed[]> {
    return returning<BatchClaimed>(
      this.db(),
      // The locking subquery runs once, as an InitPlan yielding an array (inside IN (...) it may be re-run
      // and claim more than the limit), and the UPDATE finds the rows by primary key only: the rows are
      // locked by the subquery, whose WHERE is re-checked on their latest version, so they are still
      // queued and unclaimed. Repeating that condition here, or joining the picked rows, let the planner
      // (statistics taken before the broadcast's rows existed) walk the broadcast's whole queued index
      // per claim: quadratic, 192 msg/s at 100,000 recipients.
      `UPDATE text_messages t SET claim_token = $2, claimed_at = now()
       WHERE t.id = ANY (ARRAY(SELECT id FROM text_messages WHERE broadcast_id = $1 AND status = 'queued' AND claim_token IS NULL
                               ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED))
         AND EXISTS (SELECT 1 FROM broadcasts b WHERE b.id = $1 AND b.status = 'sending')
       RETURNING t.id, t.content, t.recipient, t.send_count AS "sendCount", ${OPTED_OUT_SQL} AS "optedOut"`,
      [broadcastId, token, limit],
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
            r AS (SELECT u.*, cp.name AS campaign_name FROM u LEFT JOIN campaigns cp ON cp.id = u.campaign_id),
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

  /** Claimed messages to `failed` with one code (while the claim holds), with text_message.failed each. */
  async markFailedMany(token: string, ids: number[], code: FailureCode, reason: string): Promise<number[]> {
    if (!ids.length) return [];
    return this.transition(
      this.db(),
      `status = 'failed', failed_at = now(), failure_code = $3, failure_reason = $4, claim_token = NULL, claimed_at = NULL`,
      `t.id = ANY($1::int[]) AND t.claim_token = $2`,
      [ids, token, code, reason.slice(0, 1000)],
      'text_message.failed',
      'queued',
    );
  }

  /** Claimed messages to `canceled` (while the claim holds), with text_message.canceled each. */
  async markCanceledMany(token: string, ids: number[], code: FailureCode, reason: string): Promise<number[]> {
    if (!ids.length) return [];
    return this.transition(
      this.db(),
      `status = 'canceled', canceled_at = now(), failure_code = $3, failure_reason = $4, claim_token = NULL, claimed_at = NULL`,
      `t.id = ANY($1::int[]) AND t.claim_token = $2`,
      [ids, token, code, reason],
      'text_message.canceled',
      'queued',
    );
  }

  /** Refreshes claimed_at of a lane's claims still held (by id: claim_token has no index), so a live lane's claims never look stale. */
  async touchClaims(token: string, ids: number[]): Promise<void> {
    if (!ids.length) return;
    await this.db().query(`UPDATE text_messages SET claimed_at = now() WHERE id = ANY($1::int[]) AND claim_token = $2`, [ids, token]);
  }

  /** Gives claims back (the provider did not take these messages; they are claimed again later). */
  async releaseMany(token: string, ids: number[]): Promise<void> {
    if (!ids.length) return;
    await this.db().query(`UPDATE text_messages SET claim_token = NULL, claimed_at = NULL WHERE id = ANY($1::int[]) AND claim_token = $2`, [ids, token]);
  }

  /**
   * Before a broadcast's row is deleted (its row already locked FOR NO KEY UPDATE): locks its
   * messages in id order, waiting for writers in flight on them (delivery reports, lanes), then
   * clears their broadcast_id, so the DELETE that follows touches no message row and waits on no
   * writer (BroadcastsRepository.findForUpdate gives the lock order). Answers how many.
   */
  async detachFromBroadcast(broadcastId: number, tx: Tx): Promise<number> {
    const locked: unknown[] = await tx.query(`SELECT id FROM text_messages WHERE broadcast_id = $1 ORDER BY id FOR UPDATE`, [broadcastId]);
    if (!locked.length) return 0;
    await tx.query(`UPDATE text_messages SET broadcast_id = NULL WHERE broadcast_id = $1`, [broadcastId]);
    return locked.length;
  }

  /** A canceled broadcast: its queued messages no worker has claimed end `canceled` (failureCode canceled). */
  async cancelQueuedOfBroadcast(broadcastId: number, tx: Tx, reason = 'the broadcast was canceled'): Promise<number> {
    const ids = await this.transition(
      tx,
      `status = 'canceled', canceled_at = now(), failure_code = 'canceled', failure_reason = $2`,
      `t.broadcast_id = $1 AND t.status = 'queued' AND t.claim_token IS NULL`,
      [broadcastId, reason],
      'text_message.canceled',
      'queued',
    );
    return ids.length;
  }

  /**
   * Gives back the claims of a broadcast older than `staleMs`: the worker holding them died between
   * claiming and recording (no live worker holds a claim that long). The messages stay `queued` with
   * their send number, so they are claimed again and handed over with the same Idempotency-Key.
   * Answers how many.
   */
  async releaseStaleOfBroadcast(broadcastId: number, staleMs: number): Promise<number> {
    const rows: unknown[] = await this.db().query(
      `UPDATE text_messages t SET claim_token = NULL, claimed_at = NULL
       WHERE t.broadcast_id = $1 AND t.status = 'queued' AND t.claim_token IS NOT NULL AND t.claimed_at < now() - make_interval(secs => $2::float8 / 1000)
       RETURNING t.id`,
      [broadcastId, staleMs],
    );
    return rows.length;
  }

  /**
   * Claims older than `staleMs` of messages of canceled broadcasts: their worker died mid-hand-off
   * after the cancel, and a canceled broadcast sends nothing more, so they end `failed`
   * (outcome_unknown: the provider may have them) with text_message.failed each. Answers how many.
   */
  async failStaleOfCanceledBroadcasts(staleMs: number): Promise<number> {
    const ids = await this.transition(
      this.db(),
      `status = 'failed', failed_at = now(), failure_code = 'outcome_unknown',
       failure_reason = 'outcome unknown: the worker stopped while handing the message to the provider and the broadcast was canceled meanwhile',
       claim_token = NULL, claimed_at = NULL`,
      `t.status = 'queued' AND t.claim_token IS NOT NULL AND t.claimed_at < now() - make_interval(secs => $1::float8 / 1000)
       AND t.broadcast_id IN (SELECT id FROM broadcasts WHERE status = 'canceled')`,
      [staleMs],
      'text_message.failed',
      'queued',
    );
    return ids.length;
  }

  /** Queued messages of a broadcast: unclaimed, and claimed (with the age of the oldest claim in ms). */
  async broadcastQueue(broadcastId: number): Promise<{ unclaimed: number; claimed: number; oldestClaimMs: number | null }> {
    const rows: { unclaimed: number; claimed: number; oldestClaimMs: number | null }[] = await this.db().query(
      `SELECT count(*) FILTER (WHERE claim_token IS NULL)::int AS unclaimed, count(*) FILTER (WHERE claim_token IS NOT NULL)::int AS claimed,
              (extract(epoch FROM now() - min(claimed_at)) * 1000)::float8 AS "oldestClaimMs"
       FROM text_messages WHERE broadcast_id = $1 AND status = 'queued'`,
      [broadcastId],
    );
    return rows[0];
  }

  /** Messages per status of each broadcast (from the trigger-kept counters; exact and transactional). */
  async broadcastCounts(ids: number[], tx?: Tx): Promise<Map<number, Record<string, number>>> {
    const out = new Map<number, Record<string, number>>();
    if (!ids.length) return out;
    const rows: { broadcastId: number; status: string; n: number }[] = await this.db(tx).query(
      // Kept by statement-level triggers on text_messages (migration 1763700001800): a few shard rows, not a count of the messages.
      `SELECT broadcast_id AS "broadcastId", status, sum(n)::int AS n FROM broadcast_message_counts WHERE broadcast_id = ANY($1::int[]) GROUP BY broadcast_id, status`,
      [ids],
    );
    for (const r of rows) {
      const counts = out.get(r.broadcastId) ?? {};
      counts[r.status] = r.n;
      out.set(r.broadcastId, counts);
    }
    return out;
  }
}
