import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository, SelectQueryBuilder } from 'typeorm';
import type { CompiledFilter } from '../lists/filter-sql.js';
import type { ListQuery, ListSpec } from '../lists/list-spec.js';
import { type ListPage, type PageLoader, paginate } from '../lists/list-sql.js';
import { CONTACT_LIST_SPEC } from './contact.columns.js';
import type { Principal } from '../common/request.js';
import { type Db, prepared, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import { CONTACT_COLUMNS, type ContactPointGroup, type ContactRow, type ContactValues, dncJson, pointGroupsSql } from './contact.columns.js';
import { Contact, type DncReason } from './contact.entity.js';

/**
 * Every query of the `contacts` table. The single-record statements are raw SQL on the benchmark's
 * hot path (bench/run.mjs rows named at each method), their column lists and the record's jsonb
 * generated once from the column map (contact.columns.ts); each returns the full row with the
 * owner's name in the same statement. The owner's name is a read-only join on `users` (auth's
 * table), kept here because it saves a round trip on every record answer.
 */

/** Which contacts a do-not-contact change applies to: one (locked by the caller) or every contact with a phone number. */
export type DncTarget = { id: number } | { phone: string };

/** Who made a do-not-contact change: a user, or the gateway's inbound message (no user). */
export interface DncAuthor {
  userId: number | null;
  userName: string;
}

/** A contact as an export writes it: its id, its writable values and its timestamps as ISO 8601 (UTC, milliseconds). */
export type ContactExportRow = { id: number } & Omit<ContactValues, 'companyFromRef'> & {
    points: number;
    pointGroups: ContactPointGroup[];
    createdAt: string;
    modifiedAt: string | null;
  };

/** Narrows the contacts list (alias `c`), e.g. to a campaign's members. */
export type ContactListScope = (qb: SelectQueryBuilder<Contact>) => void;

/** Columns of a ContactRow from `c` (contacts, or a CTE over its RETURNING *): generated from the column map once. */
const ROW_COLUMNS = CONTACT_COLUMNS.selectList('c');

/** `company` as written: the company's name when the write takes it from companyId ($n, $m: companyId, companyFromRef). */
const companyValue = (company: string, companyId: string, fromRef: string) =>
  `CASE WHEN ${fromRef}::boolean THEN (SELECT x.name FROM companies x WHERE x.id = ${companyId}::int) ELSE ${company}::text END`;
const first = <T>(rows: T[]): T | null => rows[0] ?? null;

const W = CONTACT_COLUMNS.writable;
/** $1..$n of the single-row insert and update: the writable values in map order; then the writer's id and name, and whether `company` is taken from companyId. */
const writeParams = (v: ContactValues, who: Principal): unknown[] => [
  ...CONTACT_COLUMNS.writeParams(v),
  who.userId,
  who.userName,
  v.companyFromRef === true && v.companyId !== null,
];
const [WHO_ID, WHO_NAME, FROM_REF] = [`$${W.length + 1}`, `$${W.length + 2}`, `$${W.length + 3}`];
/** Each writable column's value in the single-row insert and update: its parameter, `company` possibly from companyId. */
const WRITE_VALUES = W.map((w, i) =>
  w.property === 'company' ? companyValue(`$${i + 1}`, `$${W.findIndex((x) => x.property === 'companyId') + 1}`, FROM_REF) : `$${i + 1}::${w.type}`,
);
const WRITE_COLUMNS = W.map((w) => w.column).join(', ');

/**
 * The contact record (exactly toContactRecord, checked by the events e2e suite) as jsonb, from a CTE
 * `r` of ROW_COLUMNS: the event data of the writes that insert their event in the same statement.
 */
const RECORD_JSON = CONTACT_COLUMNS.recordJson('r');

/** The single-row update: every writable column, by id (the parameter after writeParams). */
const UPDATE_ROW = `WITH c AS (UPDATE contacts SET ${W.map((w, i) => `${w.column} = ${WRITE_VALUES[i]}`).join(', ')},
                           modified_at = now(), modified_by = ${WHO_ID}, modified_by_user = ${WHO_NAME} WHERE id = $${W.length + 4} RETURNING *)
         SELECT ${ROW_COLUMNS} FROM c`;

/** Bench row "get contact by id": one statement with the owner's and company's names (prepared: planning it cost more than running it). */
const FIND_ROW = prepared(`SELECT ${ROW_COLUMNS} FROM contacts c WHERE c.id = $1`);

/**
 * Bench row "create contact": INSERT, the owner's and company's names and the contact.created event
 * (outbox) in one statement, prepared: the outbox adds no round trip and no planning to the hot path.
 */
const INSERT_ROW = prepared(`WITH c AS (INSERT INTO contacts (${WRITE_COLUMNS}, created_by, created_by_user, modified_by, modified_by_user)
                  VALUES (${WRITE_VALUES.join(', ')}, ${WHO_ID}, ${WHO_NAME}, ${WHO_ID}, ${WHO_NAME}) RETURNING *),
            r AS (SELECT ${ROW_COLUMNS} FROM c),
            e AS (${outboxInsertSql(`'contact.created'`, RECORD_JSON, 'NULL::jsonb', 'FROM r')})
       SELECT * FROM r`);

/** The batch fast path's set-based update: the writable columns of each row of the recordset $1. */
const UPDATE_MANY = `WITH v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(id int, ${CONTACT_COLUMNS.recordsetColumns})),
            c AS (UPDATE contacts x SET ${W.map((w) => `${w.column} = v.${w.column}`).join(', ')},
                         modified_at = now(), modified_by = $2, modified_by_user = $3
                    FROM v WHERE x.id = v.id RETURNING x.*)
       SELECT ${ROW_COLUMNS} FROM c`;

/** The batch fast path's set-based insert, with a contact.created event per row. */
const INSERT_MANY = `WITH c AS (INSERT INTO contacts (${WRITE_COLUMNS}, created_by, created_by_user, modified_by, modified_by_user)
                  SELECT ${W.map((w) => `v.${w.column}`).join(', ')}, $2, $3, $2, $3
                    FROM jsonb_to_recordset($1::jsonb) AS v(${CONTACT_COLUMNS.recordsetColumns})
                  RETURNING *),
            r AS (SELECT ${ROW_COLUMNS} FROM c),
            e AS (${outboxInsertSql(`'contact.created'`, RECORD_JSON, 'NULL::jsonb', 'FROM r')})
       SELECT r.id, lower(r.email) AS key FROM r`;

@Injectable()
export class ContactsRepository {
  constructor(
    @InjectRepository(Contact) private readonly contacts: Repository<Contact>,
    private readonly transactions: Transactions,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /** Bench row "get contact by id" (FIND_ROW). */
  async findRow(id: number, tx?: Tx): Promise<ContactRow | null> {
    return first(await this.db(tx).query(FIND_ROW, [id]));
  }

  /** The rows of these ids that exist (a workflow step's batch), in id order. */
  async findRows(ids: number[], tx?: Tx): Promise<ContactRow[]> {
    if (!ids.length) return [];
    return this.db(tx).query(`SELECT ${ROW_COLUMNS} FROM contacts c WHERE c.id = ANY($1::int[]) ORDER BY c.id`, [ids]);
  }

  /** The row, locked (FOR UPDATE) until `tx` ends: read-modify-write paths (PATCH, PUT) read through this. */
  async lockRow(id: number, tx: Tx): Promise<ContactRow | null> {
    return first(await tx.query(`SELECT ${ROW_COLUMNS} FROM contacts c WHERE c.id = $1 FOR UPDATE OF c`, [id]));
  }

  /** The ids of the contacts holding these emails (lower-cased), by the unique index on lower(email): one statement for a whole batch. */
  async idsByEmails(emails: string[], tx?: Tx): Promise<{ key: string; id: number }[]> {
    if (!emails.length) return [];
    return this.db(tx).query(`SELECT lower(email) AS key, id FROM contacts WHERE lower(email) = ANY($1::text[])`, [emails]);
  }

  /** The ids of the contacts with these external ids (the tracking intake's userIds), by the unique partial index. */
  async idsByExternalIds(externalIds: string[], tx?: Tx): Promise<{ key: string; id: number }[]> {
    if (!externalIds.length) return [];
    return this.db(tx).query(`SELECT external_id AS key, id FROM contacts WHERE external_id = ANY($1::text[])`, [externalIds]);
  }

  /**
   * Batch fast path: the rows of these lower-cased emails (or ids), locked FOR UPDATE in id order
   * (two batches on the same contacts lock them in the same order). Bench: bench/batch.mjs.
   */
  async lockByEmails(emails: string[], tx: Tx): Promise<ContactRow[]> {
    if (!emails.length) return [];
    return tx.query(`SELECT ${ROW_COLUMNS} FROM contacts c WHERE lower(c.email) = ANY($1::text[]) ORDER BY c.id FOR UPDATE OF c`, [emails]);
  }

  async lockByIds(ids: number[], tx: Tx): Promise<ContactRow[]> {
    if (!ids.length) return [];
    return tx.query(`SELECT ${ROW_COLUMNS} FROM contacts c WHERE c.id = ANY($1::int[]) ORDER BY c.id FOR UPDATE OF c`, [ids]);
  }

  /** Batch fast path: update() for many locked rows in one statement (rows in the recordset form of the column map). */
  async updateMany(changes: { id: number; v: ContactValues }[], who: Principal, tx: Tx): Promise<ContactRow[]> {
    if (!changes.length) return [];
    const rows = changes.map(({ id, v }) => ({ id, ...CONTACT_COLUMNS.recordsetRow(v) }));
    return tx.query(UPDATE_MANY, [JSON.stringify(rows), who.userId, who.userName]);
  }

  /** Batch fast path: insert() for many contacts in one statement, each with its contact.created event; answers id by lower(email). */
  async insertMany(values: ContactValues[], who: Principal, tx: Tx): Promise<{ id: number; key: string }[]> {
    if (!values.length) return [];
    return tx.query(INSERT_MANY, [JSON.stringify(values.map((v) => CONTACT_COLUMNS.recordsetRow(v))), who.userId, who.userName]);
  }

  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM contacts WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /** Bench row "create contact" (INSERT_ROW). */
  async insert(v: ContactValues, who: Principal, tx?: Tx): Promise<ContactRow> {
    const rows: ContactRow[] = await this.db(tx).query(INSERT_ROW, writeParams(v, who));
    return rows[0];
  }

  /** Writes every writable column (the caller holds the row lock, see lockRow); null when the row is gone. */
  async update(id: number, v: ContactValues, who: Principal, tx?: Tx): Promise<ContactRow | null> {
    return first(await this.db(tx).query(UPDATE_ROW, [...writeParams(v, who), id]));
  }

  /**
   * Deletes and answers the row as it was, writing contact.deleted in the same statement; null when
   * no row was deleted (so exactly one concurrent caller gets it, and only that one writes the event).
   */
  async remove(id: number, tx?: Tx): Promise<ContactRow | null> {
    return first(
      await this.db(tx).query(
        `WITH c AS (DELETE FROM contacts WHERE id = $1 RETURNING *),
              r AS (SELECT ${ROW_COLUMNS} FROM c),
              e AS (${outboxInsertSql(`'contact.deleted'`, RECORD_JSON, 'NULL::jsonb', 'FROM r')})
         SELECT * FROM r`,
        [id],
      ),
    );
  }

  /**
   * Sets (`reason` not null) or clears (`reason` null) the sms do-not-contact entry of the target
   * contacts, with one contact.updated event per contact that changed, in one statement (rows are
   * locked, so concurrent changes apply one after the other). Setting keeps `since` when an entry
   * exists; `onlyReasons` limits which existing entries a clear removes (null: any) and `onlyUnset`
   * makes a set leave existing entries alone. Answers the contacts that changed.
   */
  async writeDnc(
    target: DncTarget,
    change: { reason: DncReason | null; comment: string | null; onlyReasons?: readonly DncReason[] | null; onlyUnset?: boolean },
    who: DncAuthor,
    tx?: Tx,
  ): Promise<ContactRow[]> {
    const where = 'id' in target ? 'id = $1' : 'phone = $1';
    return this.db(tx).query(
      `WITH o AS (SELECT id, dnc_sms_reason, dnc_sms_since, dnc_sms_comment FROM contacts
                  WHERE ${where} AND ($7::boolean IS NOT TRUE OR dnc_sms_reason IS NULL) AND ($5::text[] IS NULL OR dnc_sms_reason = ANY($5::text[]))
                  ORDER BY id FOR UPDATE),
            c AS (UPDATE contacts t SET dnc_sms_reason = $2, dnc_sms_comment = $3,
                         dnc_sms_since = CASE WHEN $2::text IS NULL THEN NULL ELSE coalesce(o.dnc_sms_since, now()) END,
                         modified_at = now(), modified_by = $4, modified_by_user = $6
                  FROM o WHERE t.id = o.id
                    AND (o.dnc_sms_reason IS DISTINCT FROM $2 OR o.dnc_sms_comment IS DISTINCT FROM $3::text)
                  RETURNING t.*, o.dnc_sms_reason AS old_reason, o.dnc_sms_since AS old_since, o.dnc_sms_comment AS old_comment),
            r AS (SELECT ${ROW_COLUMNS}, c.old_reason, c.old_since, c.old_comment FROM c),
            e AS (${outboxInsertSql(
              `'contact.updated'`,
              RECORD_JSON,
              `jsonb_build_object('doNotContact', ${dncJson('r.old_reason', 'r.old_since', 'r.old_comment')})`,
              'FROM r ORDER BY r.id',
            )})
       SELECT * FROM r ORDER BY id`,
      [
        'id' in target ? target.id : target.phone,
        change.reason,
        change.comment,
        who.userId,
        change.onlyReasons ?? null,
        who.userName,
        change.onlyUnset ?? false,
      ],
    );
  }

  /** Which of these (E.164) phone numbers belong to a contact opted out of text messages. */
  async optedOutPhones(phones: string[], tx?: Tx): Promise<Set<string>> {
    if (!phones.length) return new Set();
    const rows: { phone: string }[] = await this.db(tx).query(
      `SELECT DISTINCT phone FROM contacts WHERE phone = ANY($1::text[]) AND dnc_sms_reason IS NOT NULL`,
      [phones],
    );
    return new Set(rows.map((r) => r.phone));
  }

  /**
   * Bench rows "list contacts page 1 with total", "list contacts page 1,000", "search ..." and "list a
   * campaign's contacts": the shared list helper (deferred join on the ordering index, the row
   * counter for the unfiltered total), then the page's owners' names in one query.
   */
  async page(
    q: ListQuery,
    scope?: ContactListScope,
    scopeCount?: () => Promise<number>,
    spec: ListSpec = CONTACT_LIST_SPEC,
  ): Promise<Omit<ListPage<ContactRow>, 'items'> & { rows: ContactRow[] }> {
    const qb = this.contacts.createQueryBuilder('c');
    scope?.(qb);
    // The page's rows in one statement of ROW_COLUMNS (with the owner's and company's names), mapped like a
    // single record (bench row "list contacts page 1 with total"; TypeORM's entity hydration and the
    // separate owner and company name queries cost more than the SQL).
    const load: PageLoader<ContactRow> = (where, params, order, page) =>
      this.transactions.db.query<ContactRow[]>(
        `SELECT ${ROW_COLUMNS} FROM contacts c WHERE ${where} ORDER BY ${order}${page ? ` LIMIT ${Math.trunc(page.limit)} OFFSET ${Math.trunc(page.offset)}` : ''}`,
        params,
      );
    const { total, items, next } = await paginate(qb, q, spec, { scoped: scope !== undefined, scopeCount, load });
    return { total, next, rows: items };
  }

  /**
   * Bench row "export 1M contacts" (bench/imports.mjs): the contacts after `afterId` matching a
   * compiled filter, in id order (a keyset walk on the primary key), as plain rows without the
   * entity mapping or the owner join.
   */
  exportPage(filter: CompiledFilter | undefined, afterId: number, limit: number): Promise<ContactExportRow[]> {
    const qb = this.contacts.createQueryBuilder('c').select('c.id', 'id');
    for (const w of W) qb.addSelect(`c.${w.column}`, w.property);
    // The lead score and its tiers (columns points and pointGroups of the export; an import sets points back).
    qb.addSelect('c.points', 'points').addSelect(pointGroupsSql('c.points'), 'pointGroups');
    // ISO 8601 text made by PostgreSQL (as iso() writes it): no Date per row on the hot path.
    qb.addSelect(`to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`, 'createdAt')
      .addSelect(`to_char(c.modified_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`, 'modifiedAt')
      .where('c.id > :__after', { __after: afterId });
    if (filter) qb.andWhere(filter.sql, filter.params);
    return qb.orderBy('c.id', 'ASC').limit(limit).getRawMany<ContactExportRow>();
  }

  /** Locks a company against deletion until `tx` ends (FOR KEY SHARE, what its foreign key check takes); nothing when it does not exist. */
  async lockCompanyReference(companyId: number, tx: Tx): Promise<void> {
    await tx.query(`SELECT 1 FROM companies WHERE id = $1 FOR KEY SHARE`, [companyId]);
  }

  /** Narrows a contacts query (alias `c`) to a company's contacts (index contacts_company_id_idx). */
  companyScope(companyId: number): ContactListScope {
    return (qb) => {
      qb.andWhere('c.company_id = :companyId', { companyId });
    };
  }

  /** Number of contacts of a company (an index-only count on contacts_company_id_idx). */
  async countByCompany(companyId: number): Promise<number> {
    const rows: { n: string }[] = await this.transactions.db.query(`SELECT count(*)::bigint AS n FROM contacts WHERE company_id = $1`, [companyId]);
    return Number(rows[0].n);
  }

  /**
   * Sets or clears the company of one locked contact without touching its other columns (company
   * membership: POST /api/companies/{id}/contact/{contactId}/add|remove). Setting it also sets
   * `company` to the company's name. Null when the row is gone.
   */
  async setCompany(id: number, companyId: number | null, who: Principal, tx: Tx): Promise<ContactRow | null> {
    return first(
      await tx.query(
        `WITH c AS (UPDATE contacts SET company_id = $2::int, company = ${companyValue('company', '$2', '($2::int IS NOT NULL)')},
                           modified_at = now(), modified_by = $3, modified_by_user = $4 WHERE id = $1 RETURNING *)
         SELECT ${ROW_COLUMNS} FROM c`,
        [id, companyId, who.userId, who.userName],
      ),
    );
  }

  /**
   * Detaches every contact of a company that is being deleted (one statement, whatever their
   * number): companyId becomes null, modifiedAt now, and each gets its contact.updated event in the
   * same statement. Answers how many were detached.
   */
  async detachCompany(companyId: number, companyName: string, who: Principal, tx: Tx): Promise<number> {
    const rows: { n: number }[] = await tx.query(
      `WITH c AS (UPDATE contacts SET company_id = NULL, modified_at = now(), modified_by = $2, modified_by_user = $3
                   WHERE company_id = $1 RETURNING *),
            r AS (SELECT ${ROW_COLUMNS} FROM c),
            e AS (${outboxInsertSql(
              `'contact.updated'`,
              RECORD_JSON,
              `jsonb_build_object('companyId', $1::int, 'companyRef', jsonb_build_object('id', $1::int, 'name', $4::text))`,
              'FROM r',
            )})
       SELECT count(*)::int AS n FROM r`,
      [companyId, who.userId, who.userName, companyName],
    );
    return rows[0].n;
  }

  /**
   * The backfill's second step (one statement, set-based): links every contact without a company
   * whose `company` string names a company case-insensitively (trimmed; the lowest id when several
   * companies share the name), writing contact.updated for each. Answers how many were linked.
   */
  async linkByCompanyName(who: { userId: number | null; userName: string }, tx: Tx): Promise<number> {
    const rows: { n: number }[] = await tx.query(
      `WITH m AS (SELECT DISTINCT ON (lower(name)) lower(name) AS key, id FROM companies ORDER BY lower(name), id),
            c AS (UPDATE contacts t SET company_id = m.id, modified_at = now(), modified_by = $1, modified_by_user = $2
                    FROM m WHERE t.company_id IS NULL AND t.company IS NOT NULL AND lower(btrim(t.company)) = m.key RETURNING t.*),
            r AS (SELECT ${ROW_COLUMNS} FROM c),
            e AS (${outboxInsertSql(`'contact.updated'`, RECORD_JSON, `jsonb_build_object('companyId', NULL, 'companyRef', NULL)`, 'FROM r')})
       SELECT count(*)::int AS n FROM r`,
      [who.userId, who.userName],
    );
    return rows[0].n;
  }

  /**
   * Points (the scoring feature's ledger total, see src/scoring): adds `delta` to a contact's points
   * in one statement, which holds the row lock until `tx` ends, so concurrent changes apply one after
   * the other and none is lost. Answers the points before and after; `null` when the contact does not
   * exist, `'out_of_bounds'` when the result would leave [min, max] (nothing written).
   */
  async changePoints(
    id: number,
    delta: number,
    bounds: { min: number; max: number },
    tx: Tx,
  ): Promise<{ before: number; after: number } | null | 'out_of_bounds'> {
    const rows: { after: number }[] = await returning(
      tx,
      `UPDATE contacts SET points = points + $2::int WHERE id = $1 AND points::bigint + $2::int BETWEEN $3::bigint AND $4::bigint RETURNING points AS after`,
      [id, delta, bounds.min, bounds.max],
    );
    if (rows[0]) return { before: rows[0].after - delta, after: rows[0].after };
    return (await this.lockPoints(id, tx)) === null ? null : 'out_of_bounds';
  }

  /** A contact's points, its row locked (FOR UPDATE) until `tx` ends; null when it does not exist. */
  async lockPoints(id: number, tx: Tx): Promise<number | null> {
    const rows: { points: number }[] = await tx.query(`SELECT points FROM contacts WHERE id = $1 FOR UPDATE`, [id]);
    return rows[0]?.points ?? null;
  }

  /**
   * Adds each change's delta to its contact's points in one statement (rows locked in id order;
   * the caller checked the bounds on rows it locked with pointsPage). Answers the points before and
   * after per contact that exists.
   */
  async applyPointDeltas(changes: { id: number; delta: number }[], tx: Tx): Promise<{ id: number; before: number; after: number }[]> {
    if (!changes.length) return [];
    return returning(
      tx,
      `UPDATE contacts c SET points = c.points + v.delta
         FROM unnest($1::int[], $2::int[]) AS v(id, delta) WHERE c.id = v.id
       RETURNING c.id, c.points - v.delta AS before, c.points AS after`,
      [changes.map((c) => c.id), changes.map((c) => c.delta)],
    );
  }

  /**
   * A page of contacts' points in id order after `afterId`, locked (FOR UPDATE) until `tx` ends:
   * every contact, or with `nonZero` only those with points (decay's walk).
   */
  async pointsPage(afterId: number, limit: number, nonZero: boolean, tx: Tx): Promise<{ id: number; points: number }[]> {
    return tx.query(`SELECT id, points FROM contacts WHERE id > $1 ${nonZero ? 'AND points <> 0' : ''} ORDER BY id LIMIT $2 FOR UPDATE`, [afterId, limit]);
  }

  /** A page of contacts' points in id order after `afterId`, not locked (a check that locks only what it must change: scoring's recompute). */
  async pointsPageUnlocked(afterId: number, limit: number): Promise<{ id: number; points: number }[]> {
    return this.db().query(`SELECT id, points FROM contacts WHERE id > $1 ORDER BY id LIMIT $2`, [afterId, limit]);
  }

  /** The points of these contacts (those that exist), their rows locked (FOR UPDATE, in id order) until `tx` ends. */
  async lockPointsOf(ids: number[], tx: Tx): Promise<Map<number, number>> {
    if (!ids.length) return new Map();
    const rows: { id: number; points: number }[] = await tx.query(`SELECT id, points FROM contacts WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE`, [ids]);
    return new Map(rows.map((r) => [r.id, r.points]));
  }

  /** The points of these contacts (those that exist). */
  async pointsOf(ids: number[], tx?: Tx): Promise<Map<number, number>> {
    if (!ids.length) return new Map();
    const rows: { id: number; points: number }[] = await this.db(tx).query(`SELECT id, points FROM contacts WHERE id = ANY($1::int[])`, [ids]);
    return new Map(rows.map((r) => [r.id, r.points]));
  }

  /**
   * How many contacts have points within each [min, max] range (in the given order), in one pass over
   * the table (`points` has no index: see docs/decisions/scoring-application.md).
   */
  async countInPointRanges(ranges: { min: number; max: number }[], tx?: Tx): Promise<number[]> {
    if (!ranges.length) return [];
    const counts = ranges.map((_, i) => `count(*) FILTER (WHERE points BETWEEN $${2 * i + 1}::int AND $${2 * i + 2}::int)::text`);
    const rows: { n: string[] }[] = await this.db(tx).query(
      `SELECT ARRAY[${counts.join(', ')}] AS n FROM contacts`,
      ranges.flatMap((r) => [r.min, r.max]),
    );
    return rows[0].n.map(Number);
  }
}
