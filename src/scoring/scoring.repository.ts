import { Injectable } from '@nestjs/common';
import { returning, Transactions, type Tx } from '../database/transactions.js';
import type { CompiledFilter } from '../lists/filter-sql.js';
import { defineList, type ListQuery, type ListSpec } from '../lists/list-spec.js';
import { type ListPage, type PageLoader, paginate } from '../lists/list-sql.js';
import { PointChange } from './point-change.entity.js';
import { POINT_SOURCES, type PointSource } from './scoring.rules.js';

/** A contact's point history: newest first unless orderByDir says otherwise. */
export const POINT_HISTORY_LIST_SPEC: ListSpec = defineList({
  name: 'point history',
  defaultOrderByDir: 'DESC',
  sortable: ['id', 'at'],
  fields: {
    id: { type: 'id', sql: 'l.id' },
    delta: { type: 'int', sql: 'l.delta' },
    reason: { type: 'string', sql: 'l.reason' },
    source: { type: 'enum', sql: 'l.source', values: POINT_SOURCES },
    ruleId: { type: 'id', sql: 'l.rule_id' },
    sourceEventId: { type: 'string', sql: 'l.source_event_id' },
    at: { type: 'datetime', sql: 'l.at' },
  },
  properties: ['id', 'contactId', 'delta', 'reason', 'source', 'ruleId', 'sourceEventId', 'details', 'at', 'by'],
});

/** A ledger row as the repository reads it. */
export interface PointChangeRow {
  id: number;
  contactId: number;
  delta: number;
  reason: string;
  source: PointSource;
  ruleId: number | null;
  sourceEventId: string | null;
  decayPeriod: string | null;
  details: Record<string, unknown> | null;
  at: Date;
  byUserId: number | null;
  byUserName: string | null;
}

/** A ledger row to append. */
export interface NewPointChange {
  contactId: number;
  delta: number;
  reason: string;
  source: PointSource;
  ruleId?: number | null;
  sourceEventId?: string | null;
  decayPeriod?: string | null;
  details?: Record<string, unknown> | null;
  at: Date;
  byUserId?: number | null;
  byUserName?: string | null;
}

/** The scoring state's one row: the rule applier's feed cursor and the decay settings. */
export interface ScoringStateRow {
  lastSequence: number;
  decay: { percent: number; every: string; since: string } | null;
  decayVersion: number;
  /** The last decay period every contact went through (of the current version). */
  decayDone: number;
}

export interface ScoringJobRow {
  id: number;
  kind: 'recompute' | 'what_if';
  status: 'queued' | 'running' | 'completed' | 'failed';
  request: Record<string, unknown> | null;
  progress: Record<string, unknown>;
  result: Record<string, unknown> | null;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const COLUMNS = `l.id::float8 AS "id", l.contact_id AS "contactId", l.delta, l.reason, l.source, l.rule_id AS "ruleId",
  l.source_event_id AS "sourceEventId", l.decay_period AS "decayPeriod", l.details, l.at, l.by_user_id AS "byUserId", l.by_user_name AS "byUserName"`;

const INSERT_COLUMNS = 'contact_id, delta, reason, source, rule_id, source_event_id, decay_period, details, at, by_user_id, by_user_name';

/** The ledger's insert of many rows, in input order (values from {@link insertValues}). */
const insertRows = `INSERT INTO point_ledger (${INSERT_COLUMNS})
  SELECT c, d, r, s, ru, se, dp, de, a, bi, bn
    FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::jsonb[], $9::timestamptz[], $10::int[], $11::text[])
         WITH ORDINALITY AS v(c, d, r, s, ru, se, dp, de, a, bi, bn, n)
   ORDER BY n`;

function insertValues(rows: readonly NewPointChange[]): unknown[] {
  const col = <T>(f: (r: NewPointChange) => T) => rows.map(f);
  return [
    col((r) => r.contactId),
    col((r) => r.delta),
    col((r) => r.reason),
    col((r) => r.source),
    col((r) => r.ruleId ?? null),
    col((r) => r.sourceEventId ?? null),
    col((r) => r.decayPeriod ?? null),
    col((r) => (r.details ? JSON.stringify(r.details) : null)),
    col((r) => r.at),
    col((r) => r.byUserId ?? null),
    col((r) => r.byUserName ?? null),
  ];
}

/**
 * Every query of point_ledger, scoring_state and scoring_jobs, and the reads that evaluate a rule's
 * filter: over contacts (a read, as a segment's filter is evaluated) or over a tracked event's properties.
 */
@Injectable()
export class ScoringRepository {
  constructor(private readonly transactions: Transactions) {}

  /**
   * Appends ledger rows in one statement; a row whose unique key is taken ((rule, source event) or
   * (contact, decay period)) is skipped. Answers the rows appended, in input order.
   */
  async append(rows: readonly NewPointChange[], tx: Tx): Promise<PointChangeRow[]> {
    if (!rows.length) return [];
    return tx.query(`WITH l AS (${insertRows} ON CONFLICT DO NOTHING RETURNING *) SELECT ${COLUMNS} FROM l ORDER BY l.id`, insertValues(rows));
  }

  /**
   * Appends ledger rows whose keys were checked under their contacts' locks (a batch of rule
   * applications): a taken key fails the statement, and so the transaction. Answers how many were
   * appended. Without ON CONFLICT's arbiter checks and without the rows' way back, the insert of 2,500
   * rows costs about half of {@link append}'s.
   */
  async appendChecked(rows: readonly NewPointChange[], tx: Tx): Promise<number> {
    if (!rows.length) return 0;
    const [{ n }]: { n: number }[] = await tx.query(`WITH l AS (${insertRows} RETURNING 1) SELECT count(*)::int AS n FROM l`, insertValues(rows));
    return n;
  }

  /**
   * Of these (rule, source event) pairs, those applied already (the unique key's lookup for a batch), as
   * `<ruleId>:<sourceEventId>`. One probe of the unique index per pair (LATERAL ... LIMIT 1): a join
   * lets the planner hash the whole ledger when it misjudges the array's length (it did, at 300,000 rows).
   */
  async appliedPairs(pairs: readonly { ruleId: number; sourceEventId: string }[], tx: Tx): Promise<Set<string>> {
    if (!pairs.length) return new Set();
    const rows: { k: string }[] = await tx.query(
      `SELECT v.r || ':' || v.e AS k FROM unnest($1::int[], $2::text[]) AS v(r, e)
         CROSS JOIN LATERAL (SELECT 1 FROM point_ledger l
                              WHERE l.rule_id = v.r AND l.source_event_id = v.e AND l.rule_id IS NOT NULL AND l.source_event_id IS NOT NULL LIMIT 1) x`,
      [pairs.map((p) => p.ruleId), pairs.map((p) => p.sourceEventId)],
    );
    return new Set(rows.map((r) => r.k));
  }

  /** Of these (contact, decay period) pairs, those decayed already, as `<contactId>:<decayPeriod>`. */
  async decayedPairs(pairs: readonly { contactId: number; decayPeriod: string }[], tx: Tx): Promise<Set<string>> {
    if (!pairs.length) return new Set();
    const rows: { k: string }[] = await tx.query(
      `SELECT l.contact_id || ':' || l.decay_period AS k FROM unnest($1::int[], $2::text[]) AS v(c, p)
         JOIN point_ledger l ON l.contact_id = v.c AND l.decay_period = v.p AND l.decay_period IS NOT NULL`,
      [pairs.map((p) => p.contactId), pairs.map((p) => p.decayPeriod)],
    );
    return new Set(rows.map((r) => r.k));
  }

  /**
   * ruleUsage for many (rule, contact) pairs in one statement, keyed `<ruleId>:<contactId>` (pairs
   * never applied are left out).
   */
  async ruleUsages(pairs: readonly { ruleId: number; contactId: number }[], tx: Tx): Promise<Map<string, { count: number; lastAt: Date | null }>> {
    if (!pairs.length) return new Map();
    const rows: { k: string; n: number; last: Date | null }[] = await tx.query(
      `SELECT v.r || ':' || v.c AS k, u.n, u.last
         FROM (SELECT DISTINCT r, c FROM unnest($1::int[], $2::int[]) AS x(r, c)) v
         CROSS JOIN LATERAL (SELECT count(*)::int AS n, max(l.at) AS last FROM point_ledger l WHERE l.rule_id = v.r AND l.contact_id = v.c AND l.rule_id IS NOT NULL) u
        WHERE u.n > 0`,
      [pairs.map((p) => p.ruleId), pairs.map((p) => p.contactId)],
    );
    return new Map(rows.map((r) => [r.k, { count: r.n, lastAt: r.last }]));
  }

  /** The sum of the ledger of each contact (0 for a contact without rows). */
  async sums(contactIds: number[], tx: Tx): Promise<Map<number, number>> {
    if (!contactIds.length) return new Map();
    const rows: { id: number; total: string }[] = await tx.query(
      `SELECT v.id, coalesce((SELECT sum(l.delta) FROM point_ledger l WHERE l.contact_id = v.id), 0)::text AS total FROM unnest($1::int[]) AS v(id)`,
      [contactIds],
    );
    return new Map(rows.map((r) => [r.id, Number(r.total)]));
  }

  /** The sum of the ledger of each contact with ids from `fromId` to `toId` that has rows (one range scan of the contact index). */
  async sumsBetween(fromId: number, toId: number): Promise<Map<number, number>> {
    const rows: { id: number; total: string }[] = await this.transactions.db.query(
      `SELECT contact_id AS id, sum(delta)::text AS total FROM point_ledger WHERE contact_id BETWEEN $1 AND $2 GROUP BY contact_id`,
      [fromId, toId],
    );
    return new Map(rows.map((r) => [r.id, Number(r.total)]));
  }

  /** One page of a contact's ledger under the list parameters (`spec` names the contact's list). */
  async history(contactId: number, q: ListQuery, spec: ListSpec): Promise<ListPage<PointChangeRow>> {
    const qb = this.transactions.manager().getRepository(PointChange).createQueryBuilder('l').where('l.contact_id = :contactId', { contactId });
    const load: PageLoader<PointChangeRow> = (where, params, order, page) =>
      this.transactions.db.query(
        `SELECT ${COLUMNS} FROM point_ledger l WHERE ${where} ORDER BY ${order}${page ? ` LIMIT ${Math.trunc(page.limit)} OFFSET ${Math.trunc(page.offset)}` : ''}`,
        params,
      );
    const scopeCount = async () => {
      const [{ n }]: { n: number }[] = await this.transactions.db.query(`SELECT count(*)::int AS n FROM point_ledger WHERE contact_id = $1`, [contactId]);
      return n;
    };
    return paginate(qb, q, spec, { scoped: true, scopeCount, load });
  }

  /** Of `contactIds`, those the compiled contacts filter (alias `c`) matches now. */
  async matchingContacts(filter: CompiledFilter, contactIds: number[], tx?: Tx): Promise<Set<number>> {
    if (!contactIds.length) return new Set();
    const qb = this.transactions
      .manager(tx)
      .createQueryBuilder()
      .select('c.id', 'id')
      .from('contacts', 'c')
      .where(`(${filter.sql})`, filter.params)
      .andWhere('c.id = ANY(:__ids)', { __ids: contactIds });
    const [sql, params] = qb.getQueryAndParameters();
    const rows: { id: number }[] = await this.transactions.handle(tx).query(sql, params);
    return new Set(rows.map((r) => r.id));
  }

  /** Of these tracked events' properties, the positions (0-based) a compiled filter over the jsonb `p.properties` matches, in one statement. */
  async propertiesMatching(filter: CompiledFilter, properties: readonly Record<string, unknown>[], tx?: Tx): Promise<Set<number>> {
    if (!properties.length) return new Set();
    const qb = this.transactions
      .manager(tx)
      .createQueryBuilder()
      .select('p.n - 1', 'i')
      .from('(SELECT e.value AS properties, e.n FROM jsonb_array_elements(CAST(:__props AS jsonb)) WITH ORDINALITY AS e(value, n))', 'p')
      .where(`COALESCE((${filter.sql}), FALSE)`)
      .setParameters({ ...filter.params, __props: JSON.stringify(properties) });
    const [sql, params] = qb.getQueryAndParameters();
    const rows: { i: string | number }[] = await this.transactions.handle(tx).query(sql, params);
    return new Set(rows.map((r) => Number(r.i)));
  }

  /**
   * The rule applier's cursor, locked until `tx` ends (null when another process holds it), with the
   * feed's numbered end and its pruned position.
   */
  async lockCursor(tx: Tx): Promise<{ lastSequence: number; feedSequence: number; prunedThrough: number } | null> {
    const rows: { last_sequence: string; feed: string; pruned_through: string }[] = await tx.query(
      `SELECT s.last_sequence, f.last_sequence AS feed, f.pruned_through FROM scoring_state s, event_feed_state f FOR UPDATE OF s SKIP LOCKED`,
    );
    const r = rows[0];
    return r ? { lastSequence: Number(r.last_sequence), feedSequence: Number(r.feed), prunedThrough: Number(r.pruned_through) } : null;
  }

  async advanceCursor(sequence: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE scoring_state SET last_sequence = GREATEST(last_sequence, $1), applied_at = now()`, [sequence]);
  }

  /** The state row (the cursor and the decay settings); with `tx`, locked until it ends. */
  async state(tx?: Tx, lock = false): Promise<ScoringStateRow> {
    const [r]: { last_sequence: string; decay: ScoringStateRow['decay']; decay_version: number; decay_done: number }[] = await this.transactions
      .handle(tx)
      .query(`SELECT last_sequence, decay, decay_version, decay_done FROM scoring_state${lock ? ' FOR UPDATE' : ''}`);
    return { lastSequence: Number(r.last_sequence), decay: r.decay, decayVersion: r.decay_version, decayDone: r.decay_done };
  }

  /** Records that every contact went through decay period `period` of settings version `version` (nothing when the settings changed since). */
  async decayDone(version: number, period: number): Promise<void> {
    await this.transactions.db.query(`UPDATE scoring_state SET decay_done = GREATEST(decay_done, $2) WHERE decay_version = $1`, [version, period]);
  }

  /** Replaces the decay settings; a new version starts its periods afresh. */
  async setDecay(decay: ScoringStateRow['decay'], tx: Tx): Promise<void> {
    await tx.query(`UPDATE scoring_state SET decay = $1::jsonb, decay_version = decay_version + 1, decay_done = 0`, [decay ? JSON.stringify(decay) : null]);
  }

  async createJob(kind: ScoringJobRow['kind'], request: Record<string, unknown> | null, createdBy: number | null): Promise<ScoringJobRow> {
    const [r]: ScoringJobRow[] = await this.transactions.db.query(
      `INSERT INTO scoring_jobs (kind, request, created_by) VALUES ($1, $2::jsonb, $3) RETURNING *`,
      [kind, request ? JSON.stringify(request) : null, createdBy],
    );
    return r;
  }

  async findJob(id: number): Promise<ScoringJobRow | null> {
    const rows: ScoringJobRow[] = await this.transactions.db.query(`SELECT * FROM scoring_jobs WHERE id = $1`, [id]);
    return rows[0] ?? null;
  }

  /** Marks a job running (again: a re-delivered job starts over) unless it has ended; answers whether it should run. */
  async startJob(id: number): Promise<ScoringJobRow | null> {
    const rows = await returning<ScoringJobRow>(
      this.transactions.db,
      `UPDATE scoring_jobs SET status = 'running', started_at = now(), progress = '{}'::jsonb WHERE id = $1 AND status IN ('queued', 'running') RETURNING *`,
      [id],
    );
    return rows[0] ?? null;
  }

  async progress(id: number, progress: Record<string, unknown>): Promise<void> {
    await this.transactions.db.query(`UPDATE scoring_jobs SET progress = $2::jsonb WHERE id = $1`, [id, JSON.stringify(progress)]);
  }

  async finishJob(id: number, outcome: { result: Record<string, unknown> } | { error: string }): Promise<void> {
    await this.transactions.db.query(
      `UPDATE scoring_jobs SET status = $2, result = $3::jsonb, error = $4, finished_at = now() WHERE id = $1 AND status <> 'completed'`,
      [
        id,
        'result' in outcome ? 'completed' : 'failed',
        'result' in outcome ? JSON.stringify(outcome.result) : null,
        'error' in outcome ? outcome.error : null,
      ],
    );
  }
}
