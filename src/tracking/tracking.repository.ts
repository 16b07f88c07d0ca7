import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { type Db, prepared, returning, Transactions, type Tx } from '../database/transactions.js';
import { EVENT_CONTACT_SQL } from '../database/migrations/1763700002700-tracked-events.js';
import { FOLD_DEFINITIONS_SQL } from '../database/migrations/1763700003500-tracked-intake.js';
import type { ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { TRACKED_EVENT_LIST_SPEC } from './tracking-list.js';
import { enqueueSql } from './tracked-event-queue.sql.js';
import { TrackedEvent } from './tracked-event.entity.js';
import { monthStart, partitionName } from './tracking.rules.js';

/** A tracked event to insert. */
export interface NewTrackedEvent {
  occurredAt: Date;
  type: 'track' | 'identify';
  name: string | null;
  contactId: number | null;
  userId: string | null;
  anonymousId: string | null;
  messageId: string;
  properties: Record<string, unknown>;
  context: Record<string, unknown> | null;
  flags: Record<string, unknown> | null;
}

/** A tracked event as stored (the columns the API shows): what was inserted, with its id and the time it was received. */
export interface TrackedEventRow extends NewTrackedEvent {
  id: string;
  receivedAt: Date;
}

/** One track event counted in the daily table. */
export interface DailyCount {
  contactId: number;
  name: string;
  at: Date;
}

/** What one request adds to an event name's definition. */
export interface DefinitionDelta {
  name: string;
  count: number;
  first: Date;
  last: Date;
  /** Observed property types, `{ "<key>:<type>": true }`. */
  types: Record<string, true>;
}

/** A record event of the change feed as the timeline reads it. */
export interface RecordEventRow {
  id: string;
  type: string;
  occurredAt: Date;
  sequence: string;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

const SELECT_EVENT = `e.id::text AS id, e.occurred_at AS "occurredAt", e.received_at AS "receivedAt", e.type, e.name, e.contact_id AS "contactId",
  e.user_id AS "userId", e.anonymous_id AS "anonymousId", e.message_id AS "messageId", e.properties, e.context, e.flags`;

/** An instant as UTC text with microseconds (fixed width: text order is time order), for the timeline's cursor. */
const AT_KEY = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** {@link TrackingRepository.storeEvents}: $1 the events (JSON), $2 the receive time, $3-$5 earlier events attributed (contact, name, time), $6 definitions (JSON). */
const STORE_SQL = `
  WITH v AS (
    SELECT * FROM json_to_recordset($1::json) AS v(o timestamptz, t text, n text, c int, u text, a text, m text, p jsonb, x jsonb, f jsonb)
  ), e AS (
    INSERT INTO tracked_events (occurred_at, received_at, type, name, contact_id, user_id, anonymous_id, message_id, properties, context, flags)
    SELECT o, $2::timestamptz, t, n, c, u, a, m, COALESCE(p, '{}'::jsonb), x, f FROM v
    RETURNING id::text AS id, message_id AS m
  ), counted AS (
    SELECT c, n, o FROM v WHERE t = 'track' AND c IS NOT NULL AND n IS NOT NULL
    UNION ALL
    SELECT * FROM unnest($3::int[], $4::text[], $5::timestamptz[])
  ), daily AS (
    INSERT INTO tracked_event_daily AS d (contact_id, name, day, count, first_at, last_at)
    SELECT c, n, (o AT TIME ZONE 'UTC')::date, count(*), min(o), max(o) FROM counted GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (contact_id, name, day) DO UPDATE
      SET count = d.count + excluded.count, first_at = LEAST(d.first_at, excluded.first_at), last_at = GREATEST(d.last_at, excluded.last_at)
  ), defs AS (
    INSERT INTO tracked_definition_deltas (name, count, first_at, last_at, property_types)
    SELECT n, k, f, l, p FROM json_to_recordset($6::json) AS x(n text, k bigint, f timestamptz, l timestamptz, p jsonb)
  ), queued AS (
    INSERT INTO tracked_segment_queue (contact_id) SELECT DISTINCT c FROM counted ORDER BY 1 ON CONFLICT DO NOTHING
  )
  SELECT id, m FROM e`;

/** A track call for {@link TrackingRepository.storeKnown}: its attribution is read by the statement. */
export interface KnownTrackCall {
  occurredAt: Date;
  name: string;
  userId: string | null;
  anonymousId: string | null;
  messageId: string;
  properties: Record<string, unknown>;
  context: Record<string, unknown> | null;
  flags: Record<string, unknown> | null;
  /** Its properties' observed types, `{ "<key>:<type>": true }` (for the definitions). */
  types: Record<string, true>;
}

/**
 * {@link TrackingRepository.storeKnown}: $1 the calls (JSON, k = their order), $2 the receive time,
 * $3 the webhook event types they would be delivered as (`tracked.*`, `tracked.<name>`...).
 *
 * `who` attributes each call as the identity rules do when no contact or link has to be made: the
 * contact whose externalId is the userId, else the contact the anonymousId is linked to (`known`:
 * nothing else is needed). `ok` holds when every call is known (a userId that names a contact; an anonymousId linked, and
 * to that same contact when a userId is given) and no active webhook subscribes to these events;
 * every write below is conditioned on it, so when it does not hold nothing is written and the
 * caller takes the transaction path. The writes are those of the transaction path, in its order:
 * the messageId claim (a call seen before, or held by a concurrent request until it ends, is not
 * stored), the events, their daily counts, the definitions' deltas, the segment queue and the
 * consumers' queue (tracked-event-queue.repository.ts enqueueSql). Keys are taken in sorted order,
 * as there. All of it reads one snapshot and commits as one statement.
 */
const STORE_KNOWN_SQL = `
  WITH v AS (
    SELECT * FROM json_to_recordset($1::json) AS v(k int, o timestamptz, n text, u text, a text, m text, p jsonb, x jsonb, f jsonb, y jsonb)
  ), who AS (
    SELECT v.k, COALESCE(c.id, l.contact_id) AS c,
           (v.u IS NULL OR c.id IS NOT NULL) AND (v.a IS NULL OR (l.contact_id IS NOT NULL AND (v.u IS NULL OR l.contact_id = c.id)))
             AND (v.u IS NOT NULL OR v.a IS NOT NULL) AS known
      FROM v
      LEFT JOIN contacts c ON c.external_id = v.u
      LEFT JOIN anonymous_ids l ON l.anonymous_id = v.a
  ), ok AS (
    SELECT (SELECT COALESCE(bool_and(known), true) FROM who)
       AND NOT EXISTS (SELECT 1 FROM webhooks h WHERE h.is_active AND h.events && $3::text[]) AS ok
  ), claimed AS (
    INSERT INTO tracked_message_ids (message_id, received_at)
    SELECT v.m, $2::timestamptz FROM v WHERE (SELECT ok FROM ok) ORDER BY 1
    ON CONFLICT (message_id) DO NOTHING RETURNING message_id
  ), e AS (
    INSERT INTO tracked_events (occurred_at, received_at, type, name, contact_id, user_id, anonymous_id, message_id, properties, context, flags)
    SELECT v.o, $2::timestamptz, 'track', v.n, w.c, v.u, v.a, v.m, COALESCE(v.p, '{}'::jsonb), v.x, v.f
      FROM v JOIN claimed ON claimed.message_id = v.m JOIN who w ON w.k = v.k
     ORDER BY v.k
    RETURNING id, occurred_at, name, contact_id, message_id
  ), daily AS (
    INSERT INTO tracked_event_daily AS d (contact_id, name, day, count, first_at, last_at)
    SELECT contact_id, name, (occurred_at AT TIME ZONE 'UTC')::date, count(*), min(occurred_at), max(occurred_at) FROM e GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (contact_id, name, day) DO UPDATE
      SET count = d.count + excluded.count, first_at = LEAST(d.first_at, excluded.first_at), last_at = GREATEST(d.last_at, excluded.last_at)
  ), defs AS (
    INSERT INTO tracked_definition_deltas (name, count, first_at, last_at, property_types)
    SELECT s.name, s.k, s.f, s.l, COALESCE(t.p, '{}'::jsonb)
      FROM (SELECT name, count(*) AS k, min(occurred_at) AS f, max(occurred_at) AS l FROM e GROUP BY name) s
      LEFT JOIN (SELECT q.name, jsonb_object_agg(q.key, true) AS p
                   FROM (SELECT DISTINCT e.name, t.key FROM e JOIN v ON v.m = e.message_id, jsonb_object_keys(v.y) AS t(key)) q
                  GROUP BY q.name) t ON t.name = s.name
  ), queued AS (
    INSERT INTO tracked_segment_queue (contact_id) SELECT DISTINCT contact_id FROM e ORDER BY 1 ON CONFLICT DO NOTHING
  ), consumers AS (
    ${enqueueSql('e', '$2::timestamptz')}
  )
  SELECT ok.ok, e.id::text AS id, e.message_id AS m, e.contact_id AS c FROM ok LEFT JOIN e ON true`;

const PARTITION_NAME = /^tracked_events_y(\d{4})m(\d{2})$/;

/**
 * Every query of the tracking tables (tracked_events and its partitions, the messageId dedupe,
 * the daily counts, the definitions, the anonymous ids, the segment queue), and the timeline's
 * read of the change feed (`events`, by the contact an event is about).
 */
@Injectable()
export class TrackingRepository {
  /** Partitions known to exist (by name): the intake creates a missing one before its insert. */
  private readonly known = new Set<string>();

  constructor(
    private readonly transactions: Transactions,
    @InjectRepository(TrackedEvent) private readonly events: Repository<TrackedEvent>,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  // -- partitions ----------------------------------------------------------------------------------

  /** The monthly partitions that exist, by name, with their first instant. */
  async partitions(): Promise<{ name: string; start: Date }[]> {
    const rows: { name: string }[] = await this.db().query(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'tracked_events'::regclass ORDER BY 1`,
    );
    const out: { name: string; start: Date }[] = [];
    for (const r of rows) {
      const m = PARTITION_NAME.exec(r.name);
      if (m) out.push({ name: r.name, start: new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1)) });
    }
    return out;
  }

  /**
   * Creates the monthly partitions holding these instants that do not exist yet: each under an
   * advisory lock, in its own transaction (run outside any other), so concurrent intakes create a
   * month once. Partition names come from the dates only (tracking.rules.ts partitionName).
   */
  async ensurePartitions(instants: Date[]): Promise<void> {
    const starts = new Map<string, Date>();
    for (const at of instants) {
      const start = monthStart(at);
      const name = partitionName(start);
      if (!this.known.has(name)) starts.set(name, start);
    }
    for (const [name, start] of starts) {
      await this.transactions.runAlone(async (tx) => {
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext('tracked_events partitions'))`);
        const exists: unknown[] = await tx.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [name]);
        if (!exists.length) {
          const from = start.toISOString();
          const to = monthStart(start, 1).toISOString();
          await tx.query(`CREATE TABLE ${name} PARTITION OF tracked_events FOR VALUES FROM ('${from}') TO ('${to}')`);
        }
      });
      this.known.add(name);
    }
  }

  /** Drops a whole partition (retention), under the same lock as creation. */
  async dropPartition(name: string): Promise<void> {
    if (!PARTITION_NAME.test(name)) throw new Error(`not a tracked_events partition: ${name}`);
    await this.transactions.runAlone(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('tracked_events partitions'))`);
      await tx.query(`DROP TABLE IF EXISTS ${name}`);
    });
    this.known.delete(name);
  }

  // -- intake ---------------------------------------------------------------------------------------

  /**
   * Claims messageIds in `tx`: answers those not seen before (a concurrent request holding the same
   * id waits here until that one commits or rolls back).
   */
  async claimMessageIds(ids: string[], now: Date, tx: Tx): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows: { message_id: string }[] = await tx.query(
      `INSERT INTO tracked_message_ids (message_id, received_at) SELECT DISTINCT m, $2::timestamptz FROM unnest($1::text[]) AS u(m) ORDER BY 1
       ON CONFLICT (message_id) DO NOTHING RETURNING message_id`,
      [ids, now],
    );
    return new Set(rows.map((r) => r.message_id));
  }

  /** Deletes messageIds received before `before`. */
  async pruneMessageIds(before: Date): Promise<number> {
    const [, n] = await this.db().query<[unknown, number]>(`DELETE FROM tracked_message_ids WHERE received_at < $1`, [before]);
    return n;
  }

  /**
   * Stores a request's events in one statement (received at `now`): inserts them into their
   * partitions, adds the attributed track events (and `attributed`, earlier anonymous events this
   * request linked) to the daily counts, appends the per-name `definitions` to the deltas the
   * definitions are folded from ({@link foldDefinitions}), and queues their contacts for the segment
   * refresher. Rows travel as one JSON array (cheaper to build and parse than ten typed arrays). The
   * daily counts and the queue take their keys in sorted order, so two requests on the same keys
   * wait for each other, never deadlock; the definitions have no shared row to wait on. Answers each
   * event's id by its messageId (unique in a request: {@link claimMessageIds} ran first).
   */
  async storeEvents(rows: NewTrackedEvent[], attributed: DailyCount[], definitions: DefinitionDelta[], now: Date, tx: Tx): Promise<Map<string, string>> {
    if (!rows.length && !attributed.length) return new Map();
    const out: { id: string; m: string }[] = await tx.query(STORE_SQL, [
      JSON.stringify(
        rows.map((r) => ({
          o: r.occurredAt,
          t: r.type,
          n: r.name,
          c: r.contactId,
          u: r.userId,
          a: r.anonymousId,
          m: r.messageId,
          p: r.properties,
          x: r.context,
          f: r.flags,
        })),
      ),
      now,
      attributed.map((c) => c.contactId),
      attributed.map((c) => c.name),
      attributed.map((c) => c.at),
      JSON.stringify(definitions.map((d) => ({ n: d.name, k: d.count, f: d.first, l: d.last, p: d.types }))),
    ]);
    return new Map(out.map((r) => [r.m, r.id]));
  }

  /**
   * Stores track calls that need no identity work in one statement on the pool (its own
   * transaction, committed when it answers): STORE_KNOWN_SQL. Null when a call needs identity work
   * (an unknown userId, an anonymousId not linked, or linked to another contact) or a webhook
   * subscribes to these events: then nothing was written. Else each stored call's event id and
   * contact by messageId (a call whose messageId was seen before is absent). The calls' messageIds
   * are distinct.
   */
  async storeKnown(calls: KnownTrackCall[], now: Date): Promise<Map<string, { id: string; contactId: number }> | null> {
    const hooks = new Set<string>(['tracked.*']);
    for (const c of calls) hooks.add(`tracked.${c.name}`);
    const out: { ok: boolean; id: string | null; m: string | null; c: number | null }[] = await this.db().query(prepared(STORE_KNOWN_SQL), [
      JSON.stringify(
        calls.map((c, k) => ({
          k,
          o: c.occurredAt,
          n: c.name,
          u: c.userId,
          a: c.anonymousId,
          m: c.messageId,
          p: c.properties,
          x: c.context,
          f: c.flags,
          y: c.types,
        })),
      ),
      now,
      [...hooks],
    ]);
    if (!out[0]?.ok) return null;
    const stored = new Map<string, { id: string; contactId: number }>();
    for (const r of out) if (r.id !== null) stored.set(r.m as string, { id: r.id, contactId: r.c as number });
    return stored;
  }

  /** Deletes daily counts of days before `day` (YYYY-MM-DD): what retention dropped. */
  async pruneDaily(day: string): Promise<number> {
    const [, n] = await this.db().query<[unknown, number]>(`DELETE FROM tracked_event_daily WHERE day < $1::date`, [day]);
    return n;
  }

  /**
   * Folds the definitions' waiting deltas into them, one folder at a time: with `wait`, after the
   * folder running now (a read that must see every committed call); without, not at all when
   * another folds already. Answers the names folded (-1: skipped).
   */
  async foldDefinitions(wait: boolean): Promise<number> {
    return this.transactions.runAlone(async (tx) => {
      const [lock]: { ok: boolean }[] = await tx.query(
        wait
          ? `SELECT true AS ok FROM pg_advisory_xact_lock(hashtext('tracked_event_definitions fold'))`
          : `SELECT pg_try_advisory_xact_lock(hashtext('tracked_event_definitions fold')) AS ok`,
      );
      if (!lock.ok) return -1;
      const folded: unknown[] = await tx.query(`${FOLD_DEFINITIONS_SQL} RETURNING 1`);
      return folded.length;
    });
  }

  async definitions(): Promise<{ name: string; count: string; firstSeenAt: Date; lastSeenAt: Date; propertyTypes: Record<string, unknown> }[]> {
    return this.db().query(
      `SELECT name, count, first_seen_at AS "firstSeenAt", last_seen_at AS "lastSeenAt", property_types AS "propertyTypes" FROM tracked_event_definitions ORDER BY name`,
    );
  }

  /** Takes up to `limit` queued contacts in `tx` (rows another pass holds are skipped). */
  async takeSegmentQueue(limit: number, tx: Tx): Promise<number[]> {
    const rows = await returning<{ contact_id: number }>(
      tx,
      `DELETE FROM tracked_segment_queue WHERE contact_id IN (SELECT contact_id FROM tracked_segment_queue ORDER BY 1 LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING contact_id`,
      [limit],
    );
    return rows.map((r) => r.contact_id);
  }

  // -- identity -------------------------------------------------------------------------------------

  /** Serialises identity work on these keys (userIds, emails, anonymousIds) until `tx` ends; keys locked in sorted order. */
  async lockIdentities(keys: string[], tx: Tx): Promise<void> {
    if (!keys.length) return;
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended(k, 29)) FROM (SELECT DISTINCT k FROM unnest($1::text[]) AS u(k) ORDER BY 1) s`, [keys]);
  }

  /** The contacts these anonymousIds were linked to. */
  async anonymousLinks(ids: string[], tx: Tx): Promise<Map<string, number>> {
    if (!ids.length) return new Map();
    const rows: { anonymous_id: string; contact_id: number }[] = await tx.query(
      `SELECT anonymous_id, contact_id FROM anonymous_ids WHERE anonymous_id = ANY($1::text[]) AND contact_id IS NOT NULL`,
      [ids],
    );
    return new Map(rows.map((r) => [r.anonymous_id, r.contact_id]));
  }

  /**
   * Links an anonymousId to a contact unless it is linked already; answers the contact it is linked
   * to (the given one, or the earlier link, which is never replaced).
   */
  async linkAnonymous(anonymousId: string, contactId: number, now: Date, tx: Tx): Promise<number> {
    const rows: { contact_id: number }[] = await tx.query(
      `INSERT INTO anonymous_ids AS a (anonymous_id, contact_id, linked_at) VALUES ($1, $2, $3)
       ON CONFLICT (anonymous_id) DO UPDATE SET contact_id = COALESCE(a.contact_id, excluded.contact_id), linked_at = COALESCE(a.linked_at, excluded.linked_at)
       RETURNING contact_id`,
      [anonymousId, contactId, now],
    );
    return rows[0].contact_id;
  }

  /** Attributes an anonymousId's unattributed events to a contact; answers the track events attributed (for the daily counts). */
  async attributeAnonymous(anonymousId: string, contactId: number, tx: Tx): Promise<{ name: string; at: Date; id: string }[]> {
    const rows = await returning<{ name: string | null; occurred_at: Date; id: string; type: string }>(
      tx,
      `UPDATE tracked_events SET contact_id = $2 WHERE anonymous_id = $1 AND contact_id IS NULL RETURNING name, occurred_at, id::text AS id, type`,
      [anonymousId, contactId],
    );
    return rows.filter((r) => r.type === 'track' && r.name !== null).map((r) => ({ name: r.name as string, at: r.occurred_at, id: r.id }));
  }

  // -- reads ----------------------------------------------------------------------------------------

  /** The tracked events list (GET /api/tracking/events). */
  list(q: ListQuery): Promise<ListPage<TrackedEventRow>> {
    return paginate<TrackedEvent, TrackedEventRow>(this.events.createQueryBuilder('e'), q, TRACKED_EVENT_LIST_SPEC, {
      load: (where, params, order, page) =>
        this.db().query(
          `SELECT ${SELECT_EVENT} FROM tracked_events e WHERE ${where} ORDER BY ${order}${page ? ` LIMIT ${page.limit} OFFSET ${page.offset}` : ''}`,
          params,
        ),
    });
  }

  /**
   * A contact's tracked events, newest first, strictly before (at, id) when given, within
   * [from, to), of the given types ('track' events by name, or 'identify').
   */
  async contactEvents(
    contactId: number,
    opts: { before: { at: string; id: string | null } | null; from: Date | null; to: Date | null; names: string[] | null; identify: boolean; limit: number },
  ): Promise<(TrackedEventRow & { atKey: string })[]> {
    const where = ['e.contact_id = $1'];
    const params: unknown[] = [contactId];
    const add = (sql: string, v: unknown) => {
      params.push(v);
      where.push(sql.replace('?', `$${params.length}`));
    };
    // Before the cursor: a tracked event's (time, id), or (a record event's cursor) strictly earlier
    // times, tracked events at the cursor's instant having come first.
    if (opts.before?.id) {
      params.push(opts.before.at, opts.before.id);
      where.push(`(e.occurred_at, e.id) < ($${params.length - 1}::timestamptz, $${params.length}::bigint)`);
    } else if (opts.before) add('e.occurred_at < ?::timestamptz', opts.before.at);
    if (opts.from) add('e.occurred_at >= ?', opts.from);
    if (opts.to) add('e.occurred_at < ?', opts.to);
    if (opts.names) {
      params.push(opts.names);
      where.push(opts.identify ? `(e.name = ANY($${params.length}::text[]) OR e.type = 'identify')` : `e.name = ANY($${params.length}::text[])`);
    } else if (!opts.identify) where.push(`e.type = 'track'`);
    params.push(opts.limit);
    // A named statement (planning it over every partition's indexes costs more than running it); its
    // text depends only on which options are given, so a few dozen texts at most.
    return this.db().query(
      prepared(`SELECT ${SELECT_EVENT}, ${AT_KEY('e.occurred_at')} AS "atKey" FROM tracked_events e WHERE ${where.join(' AND ')}
        ORDER BY e.occurred_at DESC, e.id DESC LIMIT $${params.length}`),
      params,
    );
  }

  /**
   * A contact's record events, newest first, before (at, sequence) when given: the numbered events
   * of the change feed about it (EVENT_CONTACT_SQL, indexed by events_contact_idx) and, beyond the
   * feed's retention, its record history (`contact_record_history`, where the feed's pruning moves
   * them). The two never hold the same event (the prune moves an event in one statement, and this
   * reads both in one). Each side reads at most `limit` rows by its index, newest first. An event's
   * number in the feed is its transaction's first number plus its place among that transaction's
   * events (the feed numbers transactions, docs/decisions/events-and-webhooks.md).
   */
  async contactRecordEvents(
    contactId: number,
    opts: { before: { at: string; id: string | null } | null; from: Date | null; to: Date | null; types: string[] | null; limit: number },
  ): Promise<(RecordEventRow & { atKey: string })[]> {
    const params: unknown[] = [String(contactId), contactId, opts.limit];
    const bind = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    // Conditions on each side's (at, number, type) columns.
    const live: string[] = [`${EVENT_CONTACT_SQL} = $1::text`];
    const kept: string[] = ['h.contact_id = $2'];
    let liveAfter = '';
    // Before the cursor: a record event's (time, number), or (a tracked event's cursor) the same
    // instant and earlier, record events at an instant coming after its tracked events.
    if (opts.before) {
      const at = bind(opts.before.at);
      live.push(`e.occurred_at <= ${at}::timestamptz`);
      if (opts.before.id) {
        const id = bind(opts.before.id);
        liveAfter = `WHERE (r."occurredAt", r.seq) < (${at}::timestamptz, ${id}::bigint)`;
        kept.push(`(h.occurred_at, h.sequence) < (${at}::timestamptz, ${id}::bigint)`);
      } else kept.push(`h.occurred_at <= ${at}::timestamptz`);
    }
    if (opts.from) {
      const from = bind(opts.from);
      live.push(`e.occurred_at >= ${from}`);
      kept.push(`h.occurred_at >= ${from}`);
    }
    if (opts.to) {
      const to = bind(opts.to);
      live.push(`e.occurred_at < ${to}`);
      kept.push(`h.occurred_at < ${to}`);
    }
    if (opts.types) {
      const types = bind(opts.types);
      live.push(`e.type = ANY(${types}::text[])`);
      kept.push(`h.type = ANY(${types}::text[])`);
    }
    // A named statement, as the tracked side's (a few dozen texts at most).
    return this.db().query(
      prepared(`SELECT u.id, u.type, u."occurredAt", u.seq::text AS sequence, u.data, u.previous, ${AT_KEY('u."occurredAt"')} AS "atKey" FROM (
         (SELECT r.* FROM (
            SELECT e.id::text AS id, e.type, e.occurred_at AS "occurredAt", e.data, e.previous,
                   t.first_sequence + (SELECT count(*) FROM events x WHERE x.tx = e.tx AND x.insert_order < e.insert_order) AS seq
              FROM events e JOIN event_transactions t ON t.tx = e.tx
             WHERE ${live.join(' AND ')}) r
          ${liveAfter} ORDER BY r."occurredAt" DESC, r.seq DESC LIMIT $3)
         UNION ALL
         (SELECT h.id::text, h.type, h.occurred_at, h.data, h.previous, h.sequence FROM contact_record_history h
           WHERE ${kept.join(' AND ')} ORDER BY h.occurred_at DESC, h.sequence DESC LIMIT $3)
       ) u ORDER BY u."occurredAt" DESC, u.seq DESC LIMIT $3`),
      params,
    );
  }
}
