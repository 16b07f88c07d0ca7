import type { Db } from './transactions.js';

/**
 * The outbox writer: the one place that inserts into `events` (the change feed webhooks read) and
 * so the one place that names its columns. Every write calls it with the transaction of the change
 * it describes, so the event commits or rolls back with that change. An event is inserted
 * unnumbered; the events feature's sequencer numbers it once it is committed.
 *
 * Two forms: {@link appendEvents} inserts events the caller built in TypeScript (one statement
 * for any number), and {@link outboxInsertSql} is the same INSERT as a SQL fragment for a hot-path
 * write that inserts its event in its own statement (a CTE over the write's RETURNING rows), which
 * saves a round trip (bench rows "create contact", "add contact to campaign").
 */

/** One event to append: its type (an event type of the events feature), the record, and the previous values. */
export interface OutboxEvent {
  type: string;
  data: object;
  /** The values before the change (an update's changed properties); null or omitted when none. */
  previous?: object | null;
}

/** The columns an event is written with; the others (id, tx, occurred_at, insert_order) are the table's defaults. */
const INSERT_INTO = 'INSERT INTO events (type, data, previous)';

/** Appends one event in `tx`. */
export async function appendEvent(tx: Db, type: string, data: object, previous: object | null = null): Promise<void> {
  await tx.query(`${INSERT_INTO} VALUES ($1, $2::jsonb, $3::jsonb)`, [type, JSON.stringify(data), previous === null ? null : JSON.stringify(previous)]);
}

/** Appends several events in `tx` in one statement, in the given order (nothing for none). */
export async function appendEvents(tx: Db, events: readonly OutboxEvent[]): Promise<void> {
  if (!events.length) return;
  await tx.query(`${INSERT_INTO} SELECT t, d, p FROM unnest($1::text[], $2::jsonb[], $3::jsonb[]) WITH ORDINALITY AS u(t, d, p, n) ORDER BY n`, [
    events.map((e) => e.type),
    events.map((e) => JSON.stringify(e.data)),
    events.map((e) => (e.previous ? JSON.stringify(e.previous) : null)),
  ]);
}

/**
 * The outbox INSERT as a SQL fragment, for a repository statement that inserts its events itself:
 * `INSERT INTO events (type, data, previous) SELECT <type>, <data>, <previous> <from>`. The arguments
 * are SQL expressions written by the caller (never user text): `type` e.g. `'contact.created'` or a
 * parameter, `data` the record as jsonb, `previous` jsonb or NULL, `from` the FROM clause (with its
 * ORDER BY, which is the events' order). Build it once at module load for a statement that is
 * always the same.
 */
export function outboxInsertSql(type: string, data: string, previous = 'NULL::jsonb', from = ''): string {
  return `${INSERT_INTO} SELECT ${type}, ${data}, ${previous} ${from}`;
}
