import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
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
   * Numbers committed, unsequenced events (up to `batch`, in insert order) after the highest
   * number given so far; answers how many. One sequencer at a time: the advisory lock is taken in
   * its own statement so the numbering statement's snapshot sees every earlier pass committed.
   * With `wait` false, answers -1 at once when another sequencer holds the lock.
   *
   * The UPDATE names its rows by primary key only: `pending` holds unnumbered events (read after the
   * lock, no other pass runs), and a repeated `sequence IS NULL` there let the planner drive the
   * update from the partial index events_unsequenced_idx instead, a nested loop over every waiting
   * event times `pending` (seconds per pass during an import), whenever the statistics say no event
   * waits, which is what an ANALYZE of an idle feed records.
   */
  async sequence(batch: number, wait: boolean): Promise<number> {
    return this.transactions.runAlone(async (tx) => {
      if (wait) await tx.query(`SELECT pg_advisory_xact_lock($1)`, [SEQUENCER_LOCK]);
      else {
        const locked: { ok: boolean }[] = await tx.query(`SELECT pg_try_advisory_xact_lock($1) AS ok`, [SEQUENCER_LOCK]);
        if (!locked[0].ok) return -1;
      }
      const rows: { n: string }[] = await tx.query(
        `WITH pending AS (
           SELECT id, row_number() OVER (ORDER BY insert_order) AS rn
             FROM events WHERE sequence IS NULL ORDER BY insert_order LIMIT $1
         ), counter AS (
           UPDATE event_feed_state SET last_sequence = last_sequence + (SELECT count(*) FROM pending)
            RETURNING last_sequence - (SELECT count(*) FROM pending) AS base
         ), numbered AS (
           UPDATE events e SET sequence = counter.base + pending.rn
             FROM pending, counter WHERE e.id = pending.id
           RETURNING 1
         )
         SELECT count(*) AS n FROM numbered`,
        [batch],
      );
      return Number(rows[0].n);
    });
  }

  /** Sequenced events after `sequence`, in order, optionally of the given types only. */
  async after(sequence: number, limit: number, types?: readonly string[], tx?: Tx): Promise<EventRecord[]> {
    const db = this.transactions.handle(tx);
    const rows: EventRow[] = types?.length
      ? await db.query(
          `SELECT id, type, occurred_at, sequence, data, previous FROM events
            WHERE sequence > $1 AND type = ANY($3::text[]) ORDER BY sequence LIMIT $2`,
          [sequence, limit, types],
        )
      : await db.query(
          `SELECT id, type, occurred_at, sequence, data, previous FROM events
            WHERE sequence > $1 ORDER BY sequence LIMIT $2`,
          [sequence, limit],
        );
    return rows.map(toEventRecord);
  }

  /** Sequenced events of `types` after `sequence` that occurred at or after `since`, in order. */
  async occurredSince(since: Date, sequence: number, limit: number, types: readonly string[]): Promise<EventRecord[]> {
    const rows: EventRow[] = await this.transactions.db.query(
      `SELECT id, type, occurred_at, sequence, data, previous FROM events
        WHERE sequence > $1 AND type = ANY($3::text[]) AND occurred_at >= $4 ORDER BY sequence LIMIT $2`,
      [sequence, limit, types, since],
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
   * to S occurred before `before`, and records S as `pruned_through` (the feed answers 410 below
   * it). Pruning by sequence, not by time alone, keeps the feed without holes. Answers how many rows went.
   */
  async prune(before: Date): Promise<number> {
    const [r]: { n: string }[] = await this.transactions.db.query(
      `WITH cutoff AS (
         SELECT COALESCE(
                  -- The first kept event, walking the sequence index from the oldest (reads only what goes).
                  (SELECT sequence - 1 FROM events WHERE sequence IS NOT NULL AND occurred_at >= $1 ORDER BY sequence LIMIT 1),
                  (SELECT last_sequence FROM event_feed_state)) AS s
       ), gone AS (
         DELETE FROM events WHERE sequence <= (SELECT s FROM cutoff) RETURNING 1
       ), mark AS (
         UPDATE event_feed_state SET pruned_through = GREATEST(pruned_through, (SELECT s FROM cutoff)) RETURNING 1
       )
       SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM mark) AS m`,
      [before],
    );
    return Number(r.n);
  }

  /**
   * True when some committed event waits for its number (one cheap index probe, for the idle loop).
   * The probe walks events_unsequenced_idx from its newest end: numbered events leave their entries
   * behind, dead, at the oldest end until a vacuum removes them (a million after an import of a
   * million contacts, with autovacuum off or behind), while the events waiting are the newest.
   */
  async hasUnsequenced(): Promise<boolean> {
    const [r]: { x: boolean }[] = await this.transactions.db.query(
      `SELECT EXISTS (SELECT 1 FROM events WHERE sequence IS NULL ORDER BY insert_order DESC LIMIT 1) AS x`,
    );
    return r.x;
  }

  /** Test and diagnostics helper: how many events wait for a sequence. */
  async unsequencedCount(tx?: Tx): Promise<number> {
    const [r]: { n: string }[] = await this.transactions.handle(tx).query(`SELECT count(*) AS n FROM events WHERE sequence IS NULL`);
    return Number(r.n);
  }
}
