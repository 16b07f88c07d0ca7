import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import type { ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';
import { COMPANY_COLUMNS, COMPANY_LIST_SPEC } from './company.columns.js';
import { Company } from './company.entity.js';

/** Who a backfill acts as: the calling user, or nobody (the CLI). */
export interface BackfillActor {
  userId: number | null;
  userName: string;
}

export interface BackfillRunRow {
  id: number;
  status: 'queued' | 'running' | 'completed' | 'failed';
  trigger: 'api' | 'cli';
  companies_created: number | null;
  contacts_linked: number | null;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  created_by: number | null;
  created_by_user: string | null;
}

/**
 * The company record (exactly toCompanyRecord, from the column map) as jsonb over `r`, a relation of
 * the map's SELECT list: the event data of the backfill's set-based insert.
 */
const RECORD_JSON = COMPANY_COLUMNS.recordJson('r');

/** Serialises backfill runs (two at once could both create a company for one name). */
const BACKFILL_LOCK = `pg_advisory_xact_lock(hashtext('sf:companies-backfill'))`;

/**
 * Every query of the companies and company_backfills tables. The owners' names are a read join on
 * `users` (auth's table); the backfill reads the contacts' `company` strings (a read of contacts'
 * column in the same set-based statement; contacts are written only by ContactsRepository).
 */
@Injectable()
export class CompaniesRepository {
  constructor(
    @InjectRepository(Company) private readonly companies: Repository<Company>,
    private readonly transactions: Transactions,
  ) {}

  private repo(tx?: Tx): Repository<Company> {
    return this.transactions.manager(tx).getRepository(Company);
  }

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  create(): Company {
    return this.companies.create();
  }

  page(q: ListQuery): Promise<ListPage<Company>> {
    return paginate(this.companies.createQueryBuilder('co'), q, COMPANY_LIST_SPEC);
  }

  /** Names of the given users (the companies' owners), by id. */
  async ownerNames(ids: number[], tx?: Tx): Promise<Map<number, string>> {
    const unique = [...new Set(ids)];
    if (!unique.length) return new Map();
    const rows: { id: number; name: string }[] = await this.db(tx).query(`SELECT id, name FROM users WHERE id = ANY($1)`, [unique]);
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  findRecord(id: number, tx?: Tx): Promise<Company | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked (FOR UPDATE) until `tx` ends: edits and deletes read through this. */
  findForUpdate(id: number, tx: Tx): Promise<Company | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /**
   * The company's id and name, locked FOR KEY SHARE until `tx` ends: it cannot be deleted meanwhile
   * (membership changes hold this while they set a contact's company). Null when absent.
   */
  async lockForReference(id: number, tx: Tx): Promise<{ id: number; name: string } | null> {
    const rows: { id: number; name: string }[] = await tx.query(`SELECT id, name FROM companies WHERE id = $1 FOR KEY SHARE`, [id]);
    return rows[0] ?? null;
  }

  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM companies WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /**
   * Inserts a new company or writes the columns of a loaded one; answers its id. A taken domain
   * fails with companies_domain_uq (409 with the holder's id), a missing owner with
   * companies_owner_id_fkey (400 naming ownerId): both registered beside the entity.
   */
  async save(c: Company, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(c)).id;
  }

  async delete(id: number, tx: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** Waits for any other backfill to finish (held until `tx` ends). */
  async lockBackfill(tx: Tx): Promise<void> {
    await tx.query(`SELECT ${BACKFILL_LOCK}`);
  }

  /**
   * The backfill's first step, one set-based statement: a company for every distinct contact
   * `company` string (trimmed, compared case-insensitively) of contacts without a company, unless a
   * company of that name exists; the name is the spelling of the lowest contact id. Each new
   * company gets `fields` (the company fields' defaults) and its company.created event in the same
   * statement. Answers how many were created.
   */
  async insertFromContactCompanies(actor: BackfillActor, fields: Record<string, unknown>, tx: Tx): Promise<number> {
    const rows: { n: number }[] = await tx.query(
      `WITH s AS (SELECT DISTINCT ON (lower(btrim(company))) lower(btrim(company)) AS key, btrim(company) AS name
                    FROM contacts WHERE company_id IS NULL AND company IS NOT NULL AND btrim(company) <> ''
                   ORDER BY lower(btrim(company)), id),
            ins AS (INSERT INTO companies (name, fields, created_by, created_by_user, modified_by, modified_by_user)
                    SELECT s.name, $3::jsonb, $1, $2, $1, $2 FROM s WHERE NOT EXISTS (SELECT 1 FROM companies x WHERE lower(x.name) = s.key)
                    ORDER BY s.key RETURNING *),
            r AS (SELECT ${COMPANY_COLUMNS.selectList('ins')} FROM ins),
            e AS (${outboxInsertSql(`'company.created'`, RECORD_JSON, 'NULL::jsonb', 'FROM r ORDER BY r.id')})
       SELECT count(*)::int AS n FROM ins`,
      [actor.userId, actor.userName, JSON.stringify(fields)],
    );
    return rows[0].n;
  }

  async createRun(trigger: 'api' | 'cli', actor: BackfillActor): Promise<BackfillRunRow> {
    const rows: BackfillRunRow[] = await this.transactions.db.query(
      `INSERT INTO company_backfills (trigger, created_by, created_by_user) VALUES ($1, $2, $3) RETURNING *`,
      [trigger, actor.userId, actor.userName],
    );
    return rows[0];
  }

  async findRun(id: number): Promise<BackfillRunRow | null> {
    const rows: BackfillRunRow[] = await this.transactions.db.query(`SELECT * FROM company_backfills WHERE id = $1`, [id]);
    return rows[0] ?? null;
  }

  /** The run, locked until `tx` ends (a duplicate delivery of its job waits, then sees it completed). */
  async lockRun(id: number, tx: Tx): Promise<BackfillRunRow | null> {
    const rows: BackfillRunRow[] = await tx.query(`SELECT * FROM company_backfills WHERE id = $1 FOR UPDATE`, [id]);
    return rows[0] ?? null;
  }

  async completeRun(id: number, created: number, linked: number, tx: Tx): Promise<void> {
    await tx.query(
      `UPDATE company_backfills SET status = 'completed', companies_created = $2, contacts_linked = $3, error = NULL,
              started_at = coalesce(started_at, now()), finished_at = clock_timestamp() WHERE id = $1`,
      [id, created, linked],
    );
  }

  async markRun(id: number, status: 'running' | 'failed', error: string | null = null): Promise<void> {
    await returning(
      this.transactions.db,
      `UPDATE company_backfills SET status = $2, error = $3,
              started_at = CASE WHEN $2 = 'running' THEN coalesce(started_at, now()) ELSE started_at END,
              finished_at = CASE WHEN $2 = 'failed' THEN now() ELSE NULL END
        WHERE id = $1 AND status <> 'completed'`,
      [id, status, error],
    );
  }
}
