import { Injectable } from '@nestjs/common';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import type { TrackedEventRow } from './tracking.repository.js';

/** A stored track event handed to a consumer. */
export type QueuedTrackedEvent = TrackedEventRow & { contactId: number; name: string };

/** A stored track event as a replay reads it (TrackedEventQueue.replay). */
export interface ReplayedTrackedEvent {
  id: string;
  /** When it occurred, in microseconds since the epoch (exact: the cursor of the next page). */
  atMicros: number;
  contactId: number;
  name: string;
  /** Per predicate given, in order: '1' when it matched the event, else '0'. */
  matches: string;
}

/** A condition over a tracked event's properties (the jsonb `p.properties`), compiled with named parameters (`:__fltN`), for one event name. */
export interface ReplayPredicate {
  name: string;
  sql: string;
  params: Record<string, unknown>;
}

/** A track event to queue: its id and partition key, its name, and the contact it is attributed to. */
export interface TrackedEventRef {
  id: string;
  occurredAt: Date;
  name: string;
}

/**
 * The tracked-event stream as its consumers (scoring's rules, workflows' triggers and waits) read it.
 * Tracked events are not rows of the change feed (their volume would drown it), so each consumer
 * gets its own durable queue:
 *
 * 1. A consumer declares the event names it acts on with {@link declare} (`'*'` for all), in the
 *    transaction that publishes the rule or activates the workflow that needs them, so no event stored
 *    after that commit is missed.
 * 2. The intake, in the transaction that stores track events attributed to a contact (and an identify,
 *    in the one that attributes an anonymousId's earlier events), adds one queue row per event and
 *    interested consumer ({@link enqueue}: one statement; nothing when no consumer is interested).
 * 3. The consumer claims rows with {@link claim} in the transaction that applies them: the rows are
 *    deleted there (FOR UPDATE SKIP LOCKED, so parallel workers share the queue), and the effects commit
 *    with the deletion or not at all: each event is applied once per consumer, whatever crashes.
 *
 * Queued rows are in the order the intake stored them, not in `occurredAt` order (a late event is
 * queued when it arrives). A consumer wakes on {@link TrackingIntakeService.onTracked} in the process
 * that took the request and polls {@link pending} or {@link claim} on its own schedule otherwise (the
 * API and the workers may be separate processes).
 */
@Injectable()
export class TrackedEventQueue {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /**
   * Replaces the event names `consumer` is interested in ('*': every name) by what `names` computes
   * in `tx`. Declarations of one consumer are serialised (a transaction lock taken before `names`
   * runs), so two rules published at once cannot each write a list that misses the other's name:
   * the second computes its list after the first committed (READ COMMITTED).
   */
  async declare(consumer: string, names: (tx: Tx) => Promise<readonly string[]>, tx: Tx): Promise<void> {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('tracked_event_interest:' || $1, 0))`, [consumer]);
    const wanted = [...new Set(await names(tx))].sort();
    await tx.query(`DELETE FROM tracked_event_interest WHERE consumer = $1 AND NOT (name = ANY($2::text[]))`, [consumer, wanted]);
    if (wanted.length)
      await tx.query(`INSERT INTO tracked_event_interest (consumer, name) SELECT $1, n FROM unnest($2::text[]) AS u(n) ORDER BY 2 ON CONFLICT DO NOTHING`, [
        consumer,
        wanted,
      ]);
  }

  /** The names `consumer` declared. */
  async interests(consumer: string, tx?: Tx): Promise<string[]> {
    const rows: { name: string }[] = await this.db(tx).query(`SELECT name FROM tracked_event_interest WHERE consumer = $1 ORDER BY 1`, [consumer]);
    return rows.map((r) => r.name);
  }

  /**
   * Queues attributed track events for every consumer interested in their names (the intake's
   * transaction). The intake's one-statement path writes the same rows (tracked-event-queue.sql.ts).
   */
  async enqueue(events: readonly TrackedEventRef[], now: Date, tx: Tx): Promise<void> {
    if (!events.length) return;
    await tx.query(
      `INSERT INTO tracked_event_queue (consumer, event_id, occurred_at, queued_at)
       SELECT i.consumer, v.id, v.o, $4::timestamptz
         FROM unnest($1::bigint[], $2::timestamptz[], $3::text[]) WITH ORDINALITY AS v(id, o, n, k)
         JOIN tracked_event_interest i ON i.name = v.n OR i.name = '*'
        ORDER BY v.k, i.consumer`,
      [events.map((e) => e.id), events.map((e) => e.occurredAt), events.map((e) => e.name), now],
    );
  }

  /**
   * Takes up to `limit` of `consumer`'s queued events in `tx`, oldest queued first, with their
   * current attribution and properties; rows another transaction holds are skipped. Events whose
   * partition retention dropped meanwhile are taken and not answered.
   */
  async claim(consumer: string, limit: number, tx: Tx): Promise<QueuedTrackedEvent[]> {
    // The queue's rows are walked in id order along (consumer, id) and the walk stops at `limit`: a
    // bitmap scan (the planner's pick when its row estimate is stale, as it is where autovacuum lags
    // behind a queue) reads every dead entry left by earlier claims and sorts all that is queued,
    // 60-100 ms a claim at 600,000 deleted rows; the ordered walk skips entries it marked dead (10 ms).
    await tx.query(`SET LOCAL enable_bitmapscan = off`);
    // One statement: the queue rows taken and their events joined on the stored (occurred_at, id), so
    // no timestamp travels through JavaScript (whose Date would drop its microseconds and miss the row).
    const events: QueuedTrackedEvent[] = await tx.query(
      `WITH taken AS (
         DELETE FROM tracked_event_queue WHERE id IN (
           SELECT id FROM tracked_event_queue WHERE consumer = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id, event_id, occurred_at)
       SELECT e.id::text AS id, e.occurred_at AS "occurredAt", e.received_at AS "receivedAt", e.type, e.name, e.contact_id AS "contactId",
              e.user_id AS "userId", e.anonymous_id AS "anonymousId", e.message_id AS "messageId", e.properties, e.context, e.flags
         FROM taken t JOIN tracked_events e ON e.occurred_at = t.occurred_at AND e.id = t.event_id
        WHERE e.contact_id IS NOT NULL AND e.name IS NOT NULL
        ORDER BY t.id`,
      [consumer, limit],
    );
    await tx.query(`SET LOCAL enable_bitmapscan TO DEFAULT`);
    return events;
  }

  /** How many events wait for `consumer`, and when the oldest was queued (its lag). */
  async pending(consumer: string): Promise<{ count: number; oldestQueuedAt: Date | null }> {
    const rows: { count: number; oldest: Date | null }[] = await this.db().query(
      `SELECT count(*)::int AS count, min(queued_at) AS oldest FROM tracked_event_queue WHERE consumer = $1`,
      [consumer],
    );
    return { count: rows[0].count, oldestQueuedAt: rows[0].oldest };
  }

  /**
   * The stored track events attributed to a contact whose name is one of `names`, that occurred at or
   * after `since`, after `after` (the last page's last event: time, then id), oldest first, up to
   * `limit`: a consumer's replay of the stream as it was stored (scoring's what-if), reading nothing
   * queued. Each name is read along tracked_events_name_idx (one range scan per name and partition,
   * merged), and each row says which `predicates` (on their event name) match its properties, so the
   * properties never leave the database. Events are attributed as they are now.
   */
  async replay(opts: {
    names: readonly string[];
    since: Date;
    after: { atMicros: number; id: string } | null;
    limit: number;
    predicates: readonly ReplayPredicate[];
  }): Promise<ReplayedTrackedEvent[]> {
    if (!opts.names.length) return [];
    const params: unknown[] = [opts.names, opts.since, opts.limit];
    const bind = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    // Each predicate's named parameters become positional ones of this statement.
    const matches = opts.predicates.map((p) => {
      const sql = p.sql.replace(/:(__flt\d+)\b/g, (_, name: string) => {
        if (!(name in p.params)) throw new Error(`replay predicate parameter ${name} is missing`);
        return bind(p.params[name]);
      });
      return `CASE WHEN p.name = ${bind(p.name)} AND COALESCE((${sql}), FALSE) THEN '1' ELSE '0' END`;
    });
    let after = '';
    if (opts.after) {
      const at = bind(microsIso(opts.after.atMicros));
      after = ` AND p.occurred_at >= ${at}::timestamptz AND (p.occurred_at, p.id) > (${at}::timestamptz, ${bind(opts.after.id)}::bigint)`;
    }
    const rows: { id: string; us: string; contactId: number; name: string; matches: string }[] = await this.db().query(
      `SELECT x.id, x.us, x."contactId", x.name, x.matches FROM unnest($1::text[]) AS n(name) CROSS JOIN LATERAL (
         SELECT p.id::text AS id, (extract(epoch FROM p.occurred_at) * 1000000)::bigint AS us, p.occurred_at, p.id AS seq,
                p.contact_id AS "contactId", p.name, ${matches.length ? `concat(${matches.join(', ')})` : `''`} AS matches
           FROM tracked_events p
          WHERE p.name = n.name AND p.type = 'track' AND p.contact_id IS NOT NULL AND p.occurred_at >= $2::timestamptz${after}
          ORDER BY p.occurred_at, p.id LIMIT $3) x
        ORDER BY x.occurred_at, x.seq LIMIT $3`,
      params,
    );
    return rows.map((r) => ({ id: r.id, atMicros: Number(r.us), contactId: r.contactId, name: r.name, matches: r.matches }));
  }
}

/** An instant given in microseconds since the epoch as ISO 8601 text with its microseconds (exact, unlike a Date). */
export function microsIso(micros: number): string {
  const ms = Math.floor(micros / 1000);
  const rest = micros - ms * 1000;
  return `${new Date(ms).toISOString().slice(0, -1)}${String(rest).padStart(3, '0')}Z`;
}
