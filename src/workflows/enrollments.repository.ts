import { Injectable } from '@nestjs/common';
import { outboxInsertSql } from '../database/outbox.js';
import { TableStatistics } from '../database/table-statistics.js';
import { returning, Transactions, type Tx } from '../database/transactions.js';
import type { CompiledFilter } from '../lists/filter-sql.js';
import { defineList, type ListQuery, type ListSpec } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { ENROLLMENT_STATUSES, type EnrollmentStatus, type Reenrollment } from './workflow-definition.js';
import { WorkflowEnrollment } from './workflow.entity.js';

const isoSql = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;

/** An enrollment as the API record, built in SQL (the events a statement writes itself); the same as toEnrollmentRecord. */
export const ENROLLMENT_JSON = (a: string) =>
  `jsonb_build_object('id', ${a}.id, 'workflowId', ${a}.workflow_id, 'version', ${a}.version, 'contactId', ${a}.contact_id, 'status', ${a}.status,
     'stepKey', ${a}.step_key, 'nextAt', ${isoSql(`${a}.next_at`)}, 'enteredAt', ${isoSql(`${a}.entered_at`)}, 'endedAt', ${isoSql(`${a}.ended_at`)},
     'error', ${a}.error)`;

export const ENROLLMENT_LIST_SPEC = defineList({
  name: 'workflow enrollments',
  sortable: ['id', 'contactId', 'status', 'stepKey', 'nextAt', 'enteredAt', 'endedAt'],
  filters: {
    status: { type: 'string', column: 'e.status', values: ENROLLMENT_STATUSES },
    contactId: { type: 'int', column: 'e.contact_id' },
    stepKey: { type: 'string', column: 'e.step_key', maxLength: 64 },
  },
  fields: {
    id: { type: 'id', sql: 'e.id' },
    contactId: { type: 'id', sql: 'e.contact_id' },
    version: { type: 'int', sql: 'e.version' },
    status: { type: 'enum', sql: 'e.status', values: ENROLLMENT_STATUSES },
    stepKey: { type: 'string', sql: 'e.step_key' },
    nextAt: { type: 'datetime', sql: 'e.next_at' },
    enteredAt: { type: 'datetime', sql: 'e.entered_at' },
    endedAt: { type: 'datetime', sql: 'e.ended_at' },
  },
  properties: ['id', 'workflowId', 'version', 'contactId', 'status', 'stepKey', 'nextAt', 'enteredAt', 'endedAt', 'error'],
});

/** A row of the step history. */
export interface StepRunRow {
  seq: number;
  step_key: string;
  step_type: string;
  outcome: string;
  detail: Record<string, unknown> | null;
  ran_at: Date;
}

/** Where the contacts to enrol come from: ids (manual), or a segment's members now (activation, schedule). */
export type EnrolSource = { ids: number[] } | { segmentId: number };

/** What an enrolment asks for: the workflow, its version and entry step, the reenrollment rule and when. */
export interface EnrolSpec {
  workflowId: number;
  version: number;
  stepKey: string;
  reenrollment: Reenrollment;
  at: Date;
  /** Only contacts that never had an enrollment in the workflow (a segment rebuilt: who joined is not listed). */
  onlyNew?: boolean;
}

/** One step run's history row (its sequence number is the enrollment's new step_seq). */
export interface StepRun {
  stepKey: string;
  stepType: string;
  outcome: string;
  detail: object | null;
  at: Date;
}

/** The changes of one step's transaction to an enrollment. */
export interface Advance {
  status: EnrollmentStatus;
  stepKey: string | null;
  nextAt: Date | null;
  endedAt: Date | null;
  error: string | null;
  stepSeq: number;
}

/**
 * Every query of workflow_enrollments and workflow_step_runs. Enrolments are set-based (one
 * statement for 10,000 ids or a whole segment, their workflow.enrolled events written by the same
 * statement); the runner claims due enrollments through the partial (next_at) index.
 */
@Injectable()
export class EnrollmentsRepository {
  constructor(
    private readonly transactions: Transactions,
    private readonly statistics: TableStatistics,
  ) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(WorkflowEnrollment);
  }

  /**
   * Enrols contacts in one statement: the existing contacts of `source`, minus those the
   * reenrollment rule refuses (never: any earlier enrollment; otherwise a running one, by the partial
   * unique index, whatever races), each with a workflow.enrolled event. Answers the new enrollments.
   */
  async enrol(spec: EnrolSpec, source: EnrolSource, tx: Tx): Promise<{ id: number; contactId: number }[]> {
    const from =
      'ids' in source
        ? `SELECT c.id FROM contacts c WHERE c.id IN (SELECT DISTINCT unnest($6::int[]))`
        : `SELECT m.contact_id AS id FROM segment_members m WHERE m.segment_id = $6`;
    const never = spec.reenrollment === 'never' || spec.onlyNew;
    const rows: { id: string; contact_id: number }[] = await tx.query(
      `WITH src AS (${from}),
            ins AS (INSERT INTO workflow_enrollments (workflow_id, version, contact_id, status, step_key, next_at, entered_at)
                    SELECT $1, $2, src.id, 'active', $3, $4, $4 FROM src
                     WHERE $5::boolean OR NOT EXISTS (SELECT 1 FROM workflow_enrollments x WHERE x.workflow_id = $1 AND x.contact_id = src.id)
                     ORDER BY src.id
                    ON CONFLICT (workflow_id, contact_id) WHERE status IN ('active', 'waiting') DO NOTHING
                    RETURNING *),
            ev AS (${outboxInsertSql(`'workflow.enrolled'`, ENROLLMENT_JSON('i'), 'NULL::jsonb', 'FROM (SELECT * FROM ins ORDER BY id) i')})
       SELECT id, contact_id FROM ins ORDER BY id`,
      [spec.workflowId, spec.version, spec.stepKey, spec.at, !never, 'ids' in source ? source.ids : source.segmentId],
    );
    this.statistics.bulkWritten('workflow_enrollments', rows.length);
    return rows.map((r) => ({ id: Number(r.id), contactId: r.contact_id }));
  }

  /** The ids among `ids` that name a contact. */
  async existingContacts(ids: number[], tx: Tx): Promise<Set<number>> {
    const rows: { id: number }[] = await tx.query(`SELECT id FROM contacts WHERE id = ANY($1::int[])`, [ids]);
    return new Set(rows.map((r) => r.id));
  }

  /** The running enrollment of each contact in the workflow, or the latest one, by contact (for a refused enrolment's 409). */
  async latestOf(workflowId: number, contactIds: number[], tx?: Tx): Promise<Map<number, { id: number; status: EnrollmentStatus }>> {
    if (!contactIds.length) return new Map();
    const rows: { id: string; contact_id: number; status: EnrollmentStatus }[] = await this.transactions.handle(tx).query(
      `SELECT DISTINCT ON (contact_id) id, contact_id, status FROM workflow_enrollments
        WHERE workflow_id = $1 AND contact_id = ANY($2::int[]) ORDER BY contact_id, (status IN ('active', 'waiting')) DESC, id DESC`,
      [workflowId, contactIds],
    );
    return new Map(rows.map((r) => [r.contact_id, { id: Number(r.id), status: r.status }]));
  }

  /**
   * Ends running enrollments with `status` (exited or converted), each with its event, in one
   * statement: those of the workflow (all, or of the given contacts). Answers how many ended.
   */
  async endRunning(workflowId: number, contactIds: number[] | null, status: 'exited' | 'converted', reason: string | null, at: Date, tx: Tx): Promise<number> {
    const rows: { n: string }[] = await tx.query(
      `WITH up AS (UPDATE workflow_enrollments SET status = $3, ended_at = $4, next_at = NULL, error = $5, claim_token = NULL, claimed_until = NULL,
                           step_seq = step_seq + 1
                    WHERE workflow_id = $1 AND status IN ('active', 'waiting') AND ($2::int[] IS NULL OR contact_id = ANY($2::int[]))
                    RETURNING *),
            h AS (INSERT INTO workflow_step_runs (enrollment_id, seq, step_key, step_type, outcome, detail, ran_at)
                  SELECT id, step_seq, coalesce(step_key, ''), CASE WHEN $3 = 'converted' THEN 'goal' ELSE 'exit' END, $3,
                         CASE WHEN $5::text IS NULL THEN NULL ELSE jsonb_build_object('reason', $5::text) END, $4 FROM up),
            ev AS (${outboxInsertSql(`'workflow.' || $3`, ENROLLMENT_JSON('u'), 'NULL::jsonb', 'FROM (SELECT * FROM up ORDER BY id) u')})
       SELECT count(*) AS n FROM up`,
      [workflowId, contactIds, status, at, reason],
    );
    return Number(rows[0].n);
  }

  /**
   * Claims due enrollments of active workflows for `leaseMs` (the database's clock), skipping rows
   * another runner holds (FOR UPDATE SKIP LOCKED) and claims not yet expired: a claim left by a
   * runner that died is taken over once its lease has passed. Up to `limit` of the longest due, and
   * besides them up to a tenth of `limit` of the most recently due: a step that falls due while a
   * backlog is being worked off (100,000 enrollments due at one instant) runs with the next batch,
   * not after the backlog, however long a batch takes.
   */
  async claimDue(now: Date, limit: number, token: string, leaseMs: number): Promise<number[]> {
    // One table in each lane's scan, the active workflows an array computed once (an InitPlan): the
    // planner reads the due index in order and stops at the limit. Joined to workflows, it sorted
    // every due enrollment on each claim (100,000 due at once: ~100 ms a claim, 200 claims).
    const due = (order: string, extra: string, n: string) =>
      `SELECT x.id FROM workflow_enrollments x
        WHERE x.status IN ('active', 'waiting') AND x.next_at <= $1 ${extra}
          AND x.workflow_id = ANY (ARRAY(SELECT w.id FROM workflows w WHERE w.status = 'active'))
          AND (x.claimed_until IS NULL OR x.claimed_until < clock_timestamp())
        ORDER BY x.next_at ${order} LIMIT ${n} FOR UPDATE OF x SKIP LOCKED`;
    const rows = await returning<{ id: string }>(
      this.transactions.db,
      `WITH oldest AS (${due('', '', '$2')}),
            recent AS (${due('DESC', '', '$5')})
       UPDATE workflow_enrollments e SET claim_token = $3, claimed_until = clock_timestamp() + $4 * interval '1 millisecond'
        WHERE e.id IN (SELECT id FROM oldest UNION SELECT id FROM recent)
        RETURNING e.id`,
      [now, limit, token, leaseMs, Math.max(1, Math.floor(limit / 10))],
    );
    return rows.map((r) => Number(r.id));
  }

  /** The enrollment, locked until `tx` ends, if `token` still holds its claim and it is running. */
  async lockClaimed(id: number, token: string, tx: Tx): Promise<WorkflowEnrollment | null> {
    return this.repo(tx)
      .createQueryBuilder('e')
      .where('e.id = :id AND e.claim_token = :token', { id, token })
      .andWhere(`e.status IN ('active', 'waiting')`)
      .setLock('pessimistic_write')
      .getOne();
  }

  /** lockClaimed for a batch: the enrollments among `ids` that `token` still holds and that run, locked in id order until `tx` ends. */
  async lockClaimedMany(ids: number[], token: string, tx: Tx): Promise<WorkflowEnrollment[]> {
    if (!ids.length) return [];
    return this.repo(tx)
      .createQueryBuilder('e')
      .where('e.id IN (:...ids) AND e.claim_token = :token', { ids: ids.map(String), token })
      .andWhere(`e.status IN ('active', 'waiting')`)
      .orderBy('e.id')
      .setLock('pessimistic_write')
      .getMany();
  }

  /** The enrollment by id, locked until `tx` ends. */
  lockById(id: number, tx: Tx): Promise<WorkflowEnrollment | null> {
    return this.repo(tx).createQueryBuilder('e').where('e.id = :id', { id }).setLock('pessimistic_write').getOne();
  }

  /** The enrollment locked until `tx` ends (DELETE of one, migration). */
  lockOne(workflowId: number, id: number, tx: Tx): Promise<WorkflowEnrollment | null> {
    return this.repo(tx).createQueryBuilder('e').where('e.id = :id AND e.workflow_id = :workflowId', { id, workflowId }).setLock('pessimistic_write').getOne();
  }

  /**
   * Writes one step run: its history row and the enrollment's new position, in one statement
   * (a waiting enrollment notes when its wait began, the database's time).
   */
  async advance(id: number, run: StepRun, a: Advance, tx: Tx): Promise<void> {
    await tx.query(
      `WITH h AS (INSERT INTO workflow_step_runs (enrollment_id, seq, step_key, step_type, outcome, detail, ran_at)
                  VALUES ($1, $7, $8, $9, $10, $11::jsonb, $12))
       UPDATE workflow_enrollments SET status = $2, step_key = $3, next_at = $4, ended_at = $5, error = $6, step_seq = $7, attempts = 0, woken_by = NULL,
              waiting_since = CASE WHEN $2 = 'waiting' THEN now() END
        WHERE id = $1`,
      [
        id,
        a.status,
        a.stepKey,
        a.nextAt,
        a.endedAt,
        a.error,
        a.stepSeq,
        run.stepKey,
        run.stepType,
        run.outcome,
        run.detail === null ? null : JSON.stringify(run.detail),
        run.at,
      ],
    );
  }

  /**
   * advance() for many enrollments in one statement (a batch's step): the history rows `runs` in one
   * INSERT, the enrollments' new positions `moves` in one UPDATE (a batch moves an enrollment that
   * goes on at once only at the end of its transaction, so either list may lack the other's rows).
   */
  async advanceMany(runs: { id: number; run: StepRun; seq: number }[], moves: { id: number; a: Advance }[], tx: Tx): Promise<void> {
    if (!runs.length && !moves.length) return;
    const r = runs.map(({ id, run, seq }) => ({
      id,
      seq,
      step_key: run.stepKey,
      step_type: run.stepType,
      outcome: run.outcome,
      detail: run.detail,
      ran_at: run.at.toISOString(),
    }));
    const m = moves.map(({ id, a }) => ({
      id,
      status: a.status,
      step_key: a.stepKey,
      next_at: a.nextAt?.toISOString() ?? null,
      ended_at: a.endedAt?.toISOString() ?? null,
      error: a.error,
      seq: a.stepSeq,
    }));
    await tx.query(
      `WITH h AS (INSERT INTO workflow_step_runs (enrollment_id, seq, step_key, step_type, outcome, detail, ran_at)
                  SELECT id, seq, step_key, step_type, outcome, detail, ran_at
                    FROM jsonb_to_recordset($1::jsonb) AS r(id bigint, seq int, step_key text, step_type text, outcome text, detail jsonb, ran_at timestamptz)
                   ORDER BY id, seq)
       UPDATE workflow_enrollments e SET status = m.status, step_key = m.step_key, next_at = m.next_at, ended_at = m.ended_at, error = m.error,
              step_seq = m.seq, attempts = 0, woken_by = NULL, waiting_since = CASE WHEN m.status = 'waiting' THEN now() END
         FROM jsonb_to_recordset($2::jsonb) AS m(id bigint, status text, step_key text, next_at timestamptz, ended_at timestamptz, error text, seq int)
        WHERE e.id = m.id`,
      [JSON.stringify(r), JSON.stringify(m)],
    );
  }

  /** release() for a batch: lets go of the claims `token` still holds among `ids`. */
  async releaseMany(ids: number[], token: string): Promise<void> {
    if (!ids.length) return;
    await this.transactions.db.query(
      `UPDATE workflow_enrollments SET claim_token = NULL, claimed_until = NULL WHERE id = ANY($1::bigint[]) AND claim_token = $2`,
      [ids, token],
    );
  }

  /** Lets the claim go (the runner is done with it for now). */
  async release(id: number, token: string): Promise<void> {
    await this.transactions.db.query(`UPDATE workflow_enrollments SET claim_token = NULL, claimed_until = NULL WHERE id = $1 AND claim_token = $2`, [
      id,
      token,
    ]);
  }

  /**
   * A step that failed for a passing reason (the database, the queue): the claim is let go and the
   * enrollment skipped for 2^attempts seconds (at most a minute). Answers the attempts so far.
   */
  async retryLater(id: number, token: string): Promise<number> {
    const rows = await returning<{ attempts: number }>(
      this.transactions.db,
      `UPDATE workflow_enrollments SET attempts = attempts + 1, claim_token = NULL,
              claimed_until = clock_timestamp() + least(60000, 1000 * power(2, attempts + 1)) * interval '1 millisecond'
        WHERE id = $1 AND claim_token = $2 RETURNING attempts`,
      [id, token],
    );
    return rows[0]?.attempts ?? 0;
  }

  /**
   * Wakes the enrollments of `contacts` waiting at an untilEvent step (workflow, version, step key)
   * and not woken yet: due at `at`, with the event that woke them (the first given for a contact).
   * An enrollment that moved on meanwhile (its timeout ran) is not touched: its row lock and the
   * re-checked WHERE decide; nor one whose wait began after the event occurred (`occurredAt`, the
   * database's time as the change feed's). Answers how many woke.
   */
  async wake(
    w: { workflowId: number; version: number; stepKey: string },
    contacts: { contactId: number; event: Record<string, unknown>; occurredAt?: string }[],
    at: Date,
    tx: Tx,
  ): Promise<number> {
    if (!contacts.length) return 0;
    const rows = await returning<{ id: string }>(
      tx,
      `UPDATE workflow_enrollments e SET next_at = $5, woken_by = v.ev
         FROM (SELECT DISTINCT ON (c) c, ev, at FROM (SELECT (x->>'c')::int AS c, x->'ev' AS ev, (x->>'at')::timestamptz AS at, k
                                                       FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY AS t(x, k)) y
                ORDER BY c, k) v
        WHERE e.workflow_id = $1 AND e.version = $2 AND e.step_key = $3 AND e.status = 'waiting' AND e.woken_by IS NULL AND e.contact_id = v.c
          AND (v.at IS NULL OR e.waiting_since IS NULL OR v.at >= e.waiting_since)
        RETURNING e.id`,
      [w.workflowId, w.version, w.stepKey, JSON.stringify(contacts.map((c) => ({ c: c.contactId, ev: c.event, at: c.occurredAt ?? null }))), at],
    );
    return rows.length;
  }

  /** The contacts among `contacts` with an enrollment waiting at the step (a wake's candidates). */
  async waitingAt(w: { workflowId: number; version: number; stepKey: string }, contacts: number[], tx: Tx): Promise<number[]> {
    if (!contacts.length) return [];
    const rows: { contact_id: number }[] = await tx.query(
      `SELECT contact_id FROM workflow_enrollments WHERE workflow_id = $1 AND version = $2 AND step_key = $3 AND status = 'waiting' AND woken_by IS NULL
          AND contact_id = ANY($4::int[])`,
      [w.workflowId, w.version, w.stepKey, contacts],
    );
    return rows.map((r) => r.contact_id);
  }

  /** The indexes of `properties` that match a compiled filter over PROPERTIES_COLUMN (workflow-tracked.ts), one statement. */
  async matchingProperties(filter: CompiledFilter, properties: unknown[], tx: Tx): Promise<Set<number>> {
    if (!properties.length) return new Set();
    const qb = this.transactions
      .manager(tx)
      .createQueryBuilder()
      .select('p.k', 'k')
      .from('(SELECT x AS properties, k FROM jsonb_array_elements(CAST(:__props AS jsonb)) WITH ORDINALITY AS t(x, k))', 'p')
      .where(`COALESCE((${filter.sql}), FALSE)`, { ...filter.params, __props: JSON.stringify(properties) });
    const [sql, params] = qb.getQueryAndParameters();
    const rows: { k: string }[] = await tx.query(sql, params);
    return new Set(rows.map((r) => Number(r.k) - 1));
  }

  /** Whether the contact matches a compiled contacts filter now. */
  async contactMatches(contactId: number, filter: CompiledFilter, tx?: Tx): Promise<boolean> {
    const qb = this.transactions
      .manager(tx)
      .createQueryBuilder()
      .select('1', 'one')
      .from('contacts', 'c')
      .where('c.id = :contactId', { contactId })
      .andWhere(`(${filter.sql})`, filter.params);
    return (await qb.getRawMany()).length > 0;
  }

  /** The contacts among `ids` running in the workflow (goals are checked for them). */
  async runningContacts(workflowId: number, contactIds: number[], tx: Tx): Promise<number[]> {
    const rows: { contact_id: number }[] = await tx.query(
      `SELECT contact_id FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = ANY($2::int[]) AND status IN ('active', 'waiting')`,
      [workflowId, contactIds],
    );
    return rows.map((r) => r.contact_id);
  }

  /** Of `contactIds`, those matching a compiled contacts filter now (one statement). */
  async matchingContacts(contactIds: number[], filter: CompiledFilter, tx: Tx): Promise<number[]> {
    if (!contactIds.length) return [];
    const qb = this.transactions
      .manager(tx)
      .createQueryBuilder()
      .select('c.id', 'id')
      .from('contacts', 'c')
      .where('c.id IN (:...contactIds)', { contactIds })
      .andWhere(`(${filter.sql})`, filter.params);
    return (await qb.getRawMany<{ id: number }>()).map((r) => r.id);
  }

  page(workflowId: number, q: ListQuery, spec: ListSpec): Promise<ListPage<WorkflowEnrollment>> {
    return paginate(this.repo().createQueryBuilder('e').where('e.workflow_id = :workflowId', { workflowId }), q, spec);
  }

  find(workflowId: number, id: number, tx?: Tx): Promise<WorkflowEnrollment | null> {
    return this.repo(tx).findOne({ where: { id: String(id), workflowId } });
  }

  history(enrollmentId: number, tx?: Tx): Promise<StepRunRow[]> {
    return this.transactions
      .handle(tx)
      .query(`SELECT seq, step_key, step_type, outcome, detail, ran_at FROM workflow_step_runs WHERE enrollment_id = $1 ORDER BY seq`, [enrollmentId]);
  }

  ofContact(contactId: number): Promise<WorkflowEnrollment[]> {
    return this.repo().find({ where: { contactId }, order: { id: 'ASC' } });
  }

  /**
   * Moves the running enrollments of `fromVersion` to `toVersion`, their step keys mapped (keys not
   * in `map` stay as they are); due times are kept. One event each (workflow.step_completed is not
   * right for it: none is written, the enrollment's version says it). Answers how many moved.
   */
  async migrate(workflowId: number, fromVersion: number, toVersion: number, map: Record<string, string>, tx: Tx): Promise<number> {
    const rows = await returning<{ id: string }>(
      tx,
      `UPDATE workflow_enrollments e SET version = $3, step_key = coalesce(($4::jsonb)->>e.step_key, e.step_key)
        WHERE e.workflow_id = $1 AND e.version = $2 AND e.status IN ('active', 'waiting') RETURNING e.id`,
      [workflowId, fromVersion, toVersion, JSON.stringify(map)],
    );
    return rows.length;
  }

  /** The step keys running enrollments of a version are at (a migration must map each to a step of the target). */
  async runningStepKeys(workflowId: number, version: number, tx: Tx): Promise<string[]> {
    const rows: { step_key: string }[] = await tx.query(
      `SELECT DISTINCT step_key FROM workflow_enrollments WHERE workflow_id = $1 AND version = $2 AND status IN ('active', 'waiting') AND step_key IS NOT NULL`,
      [workflowId, version],
    );
    return rows.map((r) => r.step_key);
  }

  /** The earliest due time of running enrollments of active workflows (the runner sleeps until then). */
  async nextDue(): Promise<Date | null> {
    const rows: { at: Date | null }[] = await this.transactions.db.query(
      `SELECT e.next_at AS at FROM workflow_enrollments e WHERE e.status IN ('active', 'waiting')
          AND e.workflow_id = ANY (ARRAY(SELECT w.id FROM workflows w WHERE w.status = 'active'))
        ORDER BY e.next_at LIMIT 1`,
    );
    return rows[0]?.at ?? null;
  }
}
