import { Injectable } from '@nestjs/common';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import type { FailureCode } from './text-message-state.js';
import { RECORD_JSON, RECORD_ROWS } from './text-message.columns.js';
import { OPTED_OUT_SQL } from './text-message.repository.js';

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

/**
 * The set-based writes of a broadcast's messages (text_messages rows; the single-message queries
 * are TextMessageRepository's): creating them from the audience, claiming them in batches for the
 * broadcast worker, recording outcomes, canceling and releasing. Each write inserts one event per
 * changed message in its own statement (the outbox fragment over the written rows).
 */
@Injectable()
export class BroadcastMessagesRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /**
   * Runs `UPDATE text_messages t SET <set> WHERE <where> RETURNING t.*` and writes `type` (previous
   * `{ status: previousStatus }`) for every updated row, in one statement; answers the updated ids.
   */
  private async transition(db: Db, set: string, where: string, params: unknown[], type: string, previousStatus: string): Promise<number[]> {
    params.push(type, JSON.stringify({ status: previousStatus }));
    const n = params.length;
    const rows: { id: number }[] = await db.query(
      `WITH u AS (UPDATE text_messages t SET ${set}, modified_at = now() WHERE ${where} RETURNING t.*),
            r AS (${RECORD_ROWS}),
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
            u AS (SELECT * FROM ins),
            r AS (${RECORD_ROWS}),
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
