import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { EVENT_CONTACT_ID_SQL } from '../database/migrations/1763700003510-contact-record-history.js';
import type { EventRecord, EventType } from './event-types.js';

interface EventRow {
  id: string;
  type: EventType;
  occurred_at: Date;
  sequence: string;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

/** Any constant distinct from other advisory locks of the service: serialises the sequencer. */
const SEQUENCER_LOCK = 0x65766e74; // 'evnt'

/**
 * The numbered events after $1, each with its number: the transactions holding numbers in
 * ($1, $1 + $2], and of each its events in insert order up to that bound, so that at most $2 events
 * past the cursor are read (a cursor below the retention counts from the first kept event). The
 * caller adds the ORDER BY and LIMIT.
 */
const AFTER_SQL = `SELECT r.id, r.type, r.occurred_at, r.data, r.previous, r.sequence
  FROM (SELECT tx, first_sequence FROM event_transactions WHERE last_sequence > $1 ORDER BY last_sequence LIMIT $2) t
  CROSS JOIN LATERAL (
    SELECT e.id, e.type, e.occurred_at, e.data, e.previous, t.first_sequence - 1 + row_number() OVER (ORDER BY e.insert_order) AS sequence
      FROM events e WHERE e.tx = t.tx ORDER BY e.insert_order
     LIMIT GREATEST(0, (SELECT GREATEST($1::bigint, pruned_through) FROM event_feed_state) + $2 + 1 - t.first_sequence)) r
 WHERE r.sequence > $1`;

/**
 * Committed events no pass has numbered (tx, occurred_at): those of transactions still running in the
 * last pass's snapshot ($2, its xip list) or started after it (at or above $1, its xmax). Both are
 * index scans of events_pkey, never the whole table: the values are bound parameters, so the planner
 * sees them (the last pass's snapshot is read first, by {@link lastSnapshot}), and the per-transaction
 * lookups are kept a nested loop (OFFSET 0 keeps the subquery from being flattened into a hash join).
 */
const WAITING_SQL = `SELECT e.tx, e.occurred_at FROM events e WHERE e.tx >= $1::bigint
  UNION ALL
  SELECT e.tx, e.occurred_at FROM unnest($2::bigint[]) AS x(tx)
    CROSS JOIN LATERAL (SELECT e.tx, e.occurred_at FROM events e WHERE e.tx = x.tx OFFSET 0) e`;

/**
 * Statistics of a feed written by a few large transactions (one tx value per hundred thousand rows)
 * make a per-transaction lookup look like most of the table; the waiting events are always a small,
 * recent part of it, so the sequencer's statements are planned without sequential scans. And without
 * JIT: a disabled plan node's cost penalty (1e10) is far above jit_above_cost, and compiling the
 * statement took ~800 ms of each 1 ms pass (the "contention" bench row: 25 % of the database's busy
 * time before this).
 */
const NO_SEQ_SCAN = `SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`;

function toEventRecord(r: EventRow): EventRecord {
  return {
    id: r.id,
    type: r.type,
    occurredAt: new Date(r.occurred_at).toISOString(),
    sequence: Number(r.sequence),
    data: r.data,
    previous: r.previous,
  };
}

/** Every query of the events and event_feed_state tables. */
@Injectable()
export class EventsRepository {
  constructor(private readonly transactions: Transactions) {}

  /**
   * One sequencer pass: numbers the events of every transaction that committed since the previous
   * pass, transaction by transaction (in transaction id order) and, inside one, in insert order;
   * answers how many events it numbered, or -1 at once when `wait` is false and another pass holds
   * the lock. A transaction is one row of `event_transactions` (its range of numbers), so no event
   * row is written twice.
   *
   * Which transactions are new is read from the snapshot the previous pass stored: an event became
   * visible since then exactly when its transaction was still running in that snapshot (`xip`) or
   * had not started (at or above `xmax`). Both conditions are index ranges of `events_pkey` (tx,
   * insert_order). The pass stores the snapshot it read with, in the same statement. One pass at a
   * time: the advisory lock is taken in its own statement, so the numbering statement's snapshot
   * sees the previous pass committed.
   */
  async sequence(wait: boolean): Promise<number> {
    return this.transactions.runAlone(async (tx) => {
      if (wait) await tx.query(`SELECT pg_advisory_xact_lock($1)`, [SEQUENCER_LOCK]);
      else {
        const locked: { ok: boolean }[] = await tx.query(`SELECT pg_try_advisory_xact_lock($1) AS ok`, [SEQUENCER_LOCK]);
        if (!locked[0].ok) return -1;
      }
      const last = await this.lastSnapshot(tx);
      await tx.query(NO_SEQ_SCAN);
      const rows: { n: string }[] = await tx.query(
        `WITH fresh AS (SELECT w.tx, count(*) AS n, max(w.occurred_at) AS at FROM (${WAITING_SQL}) w GROUP BY w.tx),
              numbered AS (SELECT f.tx, f.n, f.at, $3::bigint + sum(f.n) OVER (ORDER BY f.tx) AS last FROM fresh f),
              kept AS (
                INSERT INTO event_transactions (tx, first_sequence, last_sequence, at)
                SELECT tx, last - n + 1, last, at FROM numbered RETURNING 1
              ),
              moved AS (
                UPDATE event_feed_state SET last_sequence = COALESCE((SELECT max(last) FROM numbered), last_sequence), snap = pg_current_snapshot()
                RETURNING 1
              )
         SELECT COALESCE((SELECT sum(n) FROM numbered), 0) AS n, (SELECT count(*) FROM kept) AS k, (SELECT count(*) FROM moved) AS m`,
        [last.xmax, last.xip, last.lastSequence],
      );
      return Number(rows[0].n);
    });
  }

  /**
   * Numbered events after `sequence`, in order, at most `limit`. Each event's number is its
   * transaction's first number plus its place among that transaction's events; the transactions
   * read are only those that hold a number in (sequence, sequence + limit], and of each only the
   * events up to that bound.
   */
  async after(sequence: number, limit: number, tx?: Tx): Promise<EventRecord[]> {
    const rows: EventRow[] = await this.transactions.handle(tx).query(`${AFTER_SQL} ORDER BY r.sequence LIMIT $2`, [sequence, limit]);
    return rows.map(toEventRecord);
  }

  /**
   * The events of `types` among the next `window` numbered events after `sequence` (at most
   * `limit` of them), and the number of the last event of the window (`sequence` when there was
   * none): a reader of some types moves its cursor there even when none of them matched.
   */
  async scan(sequence: number, window: number, types: readonly string[], limit: number, tx?: Tx): Promise<{ events: EventRecord[]; scannedThrough: number }> {
    const rows: (EventRow & { scanned: string | null })[] = await this.transactions.handle(tx).query(
      `WITH w AS (${AFTER_SQL} ORDER BY r.sequence LIMIT $2)
       SELECT m.scanned, f.* FROM (SELECT max(sequence) AS scanned FROM w) m
         LEFT JOIN LATERAL (SELECT * FROM w WHERE type = ANY($3::text[]) ORDER BY sequence LIMIT $4) f ON true`,
      [sequence, window, types, limit],
    );
    const scanned = rows[0]?.scanned;
    return {
      events: rows.filter((r) => r.sequence !== null).map(toEventRecord),
      scannedThrough: scanned === null || scanned === undefined ? sequence : Number(scanned),
    };
  }

  /**
   * As {@link scan}, answering of each matching event only its number and the integer its data holds
   * under the key given for its type (`{ 'contact.updated': 'id', ... }`; null when absent): a reader
   * that needs the records an event names, not the event.
   */
  async scanIds(
    sequence: number,
    window: number,
    keyByType: Readonly<Record<string, string>>,
    tx?: Tx,
  ): Promise<{ refs: { sequence: number; id: number | null }[]; scannedThrough: number }> {
    const rows: { scanned: string | null; sequence: string | null; id: string | null }[] = await this.transactions.handle(tx).query(
      `WITH w AS (${AFTER_SQL} ORDER BY r.sequence LIMIT $2),
            k AS (SELECT * FROM unnest($3::text[], $4::text[]) AS k(type, key))
       SELECT m.scanned, f.sequence, f.id FROM (SELECT max(sequence) AS scanned FROM w) m
         LEFT JOIN LATERAL (
           SELECT w.sequence, CASE WHEN jsonb_typeof(w.data -> k.key) = 'number' THEN (w.data ->> k.key)::numeric::bigint END AS id
             FROM w JOIN k ON k.type = w.type ORDER BY w.sequence) f ON true`,
      [sequence, window, Object.keys(keyByType), Object.values(keyByType)],
    );
    const scanned = rows[0]?.scanned;
    return {
      refs: rows.filter((r) => r.sequence !== null).map((r) => ({ sequence: Number(r.sequence), id: r.id === null ? null : Number(r.id) })),
      scannedThrough: scanned === null || scanned === undefined ? sequence : Number(scanned),
    };
  }

  /**
   * The cursor from which a read finds the events that occurred at or after `since`: just before the
   * first numbered transaction whose events are that recent (the feed's end when none is).
   */
  async cursorAt(since: Date): Promise<number> {
    const [r]: { c: string }[] = await this.transactions.db.query(
      `SELECT COALESCE((SELECT first_sequence - 1 FROM event_transactions WHERE at >= $1 ORDER BY last_sequence LIMIT 1),
                       (SELECT last_sequence FROM event_feed_state)) AS c`,
      [since],
    );
    return Number(r.c);
  }

  /**
   * Numbered events for the console's feed table: newest first below `before`, or (with `after`)
   * the ones above it, newest first; of `types` only when given, and of the record whose `data.id`
   * is `recordId` when given. It looks through the newest 10,000 transactions of that range (of each
   * at most 5,000 events), so a rare filter may find fewer than `limit`: the page's "older" link
   * continues below what it showed.
   */
  async recent(opts: { types?: readonly string[]; recordId?: string; before?: number; after?: number; limit: number }): Promise<EventRecord[]> {
    const rows: EventRow[] = await this.transactions.db.query(
      `SELECT r.id, r.type, r.occurred_at, r.data, r.previous, r.sequence
         FROM (SELECT tx, last_sequence FROM event_transactions
                WHERE ($2::bigint IS NULL OR first_sequence < $2) AND ($3::bigint IS NULL OR last_sequence > $3)
                ORDER BY last_sequence DESC LIMIT 10000) t
        CROSS JOIN LATERAL (
          SELECT e.id, e.type, e.occurred_at, e.data, e.previous, t.last_sequence + 1 - row_number() OVER (ORDER BY e.insert_order DESC) AS sequence
            FROM events e WHERE e.tx = t.tx ORDER BY e.insert_order DESC LIMIT 5000) r
        WHERE ($2::bigint IS NULL OR r.sequence < $2) AND ($3::bigint IS NULL OR r.sequence > $3)
          AND ($4::text[] IS NULL OR r.type = ANY($4)) AND ($5::text IS NULL OR r.data->>'id' = $5)
        ORDER BY r.sequence DESC LIMIT $1`,
      [opts.limit, opts.before ?? null, opts.after ?? null, opts.types ?? null, opts.recordId ?? null],
    );
    return rows.map(toEventRecord);
  }

  /** The highest sequence given so far, read in `tx` (every event numbered up to it is visible in its snapshot). */
  async lastSequenceIn(tx: Tx): Promise<number> {
    const [r]: { last_sequence: string }[] = await tx.query(`SELECT last_sequence FROM event_feed_state`);
    return Number(r.last_sequence);
  }

  /** The highest sequence given so far and the highest one removed by retention. */
  async state(): Promise<{ lastSequence: number; prunedThrough: number }> {
    const [r]: { last_sequence: string; pruned_through: string }[] = await this.transactions.db.query(
      `SELECT last_sequence, pruned_through FROM event_feed_state`,
    );
    return { lastSequence: Number(r.last_sequence), prunedThrough: Number(r.pruned_through) };
  }

  /**
   * Retention: deletes every event up to the highest sequence S such that all events numbered up
   * to S occurred before `before` (whole transactions: a transaction's `at` is its latest event's
   * time), and records S as `pruned_through` (the feed answers 410 below it). Pruning by sequence,
   * not by time alone, keeps the feed without holes. The events about a contact that still exists
   * move to its record history in the same statement (the timeline's, beyond the feed's retention:
   * docs/decisions/contact-timeline.md). Answers how many events went.
   */
  async prune(before: Date): Promise<number> {
    const [r]: { n: string }[] = await this.transactions.db.query(
      `WITH cutoff AS (
         SELECT COALESCE(
                  -- The first kept transaction, walking the numbers from the oldest (reads only what goes).
                  (SELECT first_sequence - 1 FROM event_transactions WHERE at >= $1 ORDER BY last_sequence LIMIT 1),
                  (SELECT last_sequence FROM event_feed_state)) AS s
       ), gone_tx AS (
         DELETE FROM event_transactions WHERE last_sequence <= (SELECT s FROM cutoff) RETURNING tx, first_sequence
       ), gone AS (
         DELETE FROM events e USING gone_tx g WHERE e.tx = g.tx
         RETURNING e.id, e.type, e.occurred_at, e.data, e.previous, e.tx, e.insert_order, g.first_sequence
       ), archived AS (
         -- The events about a contact that still exists go on in its record history (the timeline's),
         -- each with its number (its place among all its transaction's events).
         INSERT INTO contact_record_history (contact_id, occurred_at, sequence, id, type, data, previous)
         SELECT a.contact_id, a.occurred_at, a.sequence, a.id, a.type, a.data, a.previous
           FROM (SELECT ${EVENT_CONTACT_ID_SQL} AS contact_id, gone.*,
                        gone.first_sequence - 1 + row_number() OVER (PARTITION BY gone.tx ORDER BY gone.insert_order) AS sequence FROM gone) a
          WHERE a.contact_id IS NOT NULL AND EXISTS (SELECT 1 FROM contacts c WHERE c.id = a.contact_id)
          ORDER BY 1, 2, 3
         ON CONFLICT DO NOTHING
       ), mark AS (
         UPDATE event_feed_state SET pruned_through = GREATEST(pruned_through, (SELECT s FROM cutoff)) RETURNING 1
       )
       SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM mark) AS m`,
      [before],
    );
    return Number(r.n);
  }

  /** The last pass's snapshot (its xmax and running transactions) and the highest number given. */
  private async lastSnapshot(tx?: Tx): Promise<{ xmax: string; xip: string[]; lastSequence: string }> {
    const [r]: { xmax: string; xip: string[]; last_sequence: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT pg_snapshot_xmax(snap)::text AS xmax, ARRAY(SELECT pg_snapshot_xip(snap)::text) AS xip, last_sequence::text FROM event_feed_state`);
    return { xmax: r.xmax, xip: r.xip, lastSequence: r.last_sequence };
  }

  /** True when some committed event waits for its number (index probes only, for the idle loop). */
  async hasUnsequenced(): Promise<boolean> {
    return this.transactions.runAlone(async (tx) => {
      const last = await this.lastSnapshot(tx);
      await tx.query(NO_SEQ_SCAN);
      const [r]: { x: boolean }[] = await tx.query(`SELECT EXISTS (${WAITING_SQL}) AS x`, [last.xmax, last.xip]);
      return r.x;
    });
  }

  /** Test and diagnostics helper: how many committed events wait for a number. */
  async unsequencedCount(tx?: Tx): Promise<number> {
    const last = await this.lastSnapshot(tx);
    const [r]: { n: string }[] = await this.transactions.handle(tx).query(`SELECT count(*) AS n FROM (${WAITING_SQL}) w`, [last.xmax, last.xip]);
    return Number(r.n);
  }
}
