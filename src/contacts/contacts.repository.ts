import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository, SelectQueryBuilder } from 'typeorm';
import { type ListQuery, type ListSpec, paginate } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../events/events.repository.js';
import { Contact } from './contact.entity.js';

/**
 * Every query of the `contacts` table. The single-record statements are hand-written SQL on the
 * benchmark's hot path (bench/run.mjs rows named at each method); each returns the full row with
 * the owner's name in the same statement. The owner's name is a read-only join on `users` (auth's
 * table), kept here because it saves a round trip on every record answer.
 */

/** A contact with its owner's name: what every read and write here answers (see toContactRecord). */
export type ContactRow = Pick<
  Contact,
  | 'id'
  | 'name'
  | 'email'
  | 'phone'
  | 'company'
  | 'title'
  | 'ownerId'
  | 'fields'
  | 'createdAt'
  | 'modifiedAt'
  | 'createdBy'
  | 'createdByUser'
  | 'modifiedBy'
  | 'modifiedByUser'
> & { ownerName: string | null };

/** The writable columns of a contact. */
export type ContactValues = Pick<Contact, 'name' | 'email' | 'phone' | 'company' | 'title' | 'ownerId' | 'fields'>;

/** Narrows the contacts list (alias `c`), e.g. to a campaign's members. */
export type ContactListScope = (qb: SelectQueryBuilder<Contact>) => void;

export const CONTACT_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'c.id',
    name: 'c.name',
    email: 'c.email',
    phone: 'c.phone',
    company: 'c.company',
    title: 'c.title',
    createdAt: 'c.created_at',
    modifiedAt: 'c.modified_at',
  },
  // search_text is the lower-cased text of name, email, phone, company, title and custom field
  // values, kept by a trigger and indexed with pg_trgm (see the platform migration).
  searchExpression: 'c.search_text',
  countTable: 'contacts',
};

/** Columns of a ContactRow, from `c` (contacts, or a CTE over its RETURNING *) and `u` (the owner, read join on users). */
const ROW_COLUMNS = `c.id, c.name, c.email, c.phone, c.company, c.title, c.owner_id AS "ownerId", u.name AS "ownerName", c.fields,
  c.created_at AS "createdAt", c.modified_at AS "modifiedAt", c.created_by AS "createdBy", c.created_by_user AS "createdByUser",
  c.modified_by AS "modifiedBy", c.modified_by_user AS "modifiedByUser"`;

const first = <T>(rows: T[]): T | null => rows[0] ?? null;

const isoSql = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;

/**
 * The contact record (exactly toContactRecord in contacts.service.ts, checked by the events e2e
 * suite) as jsonb, from a CTE `r` of ROW_COLUMNS: the event data of the writes that insert their
 * event in the same statement.
 */
const RECORD_JSON = `jsonb_build_object('id', r.id, 'name', r.name, 'email', r.email, 'phone', r.phone, 'company', r.company,
  'title', r.title, 'ownerId', r."ownerId",
  'owner', CASE WHEN r."ownerId" IS NULL THEN NULL ELSE jsonb_build_object('id', r."ownerId", 'name', r."ownerName") END,
  'fields', coalesce(r.fields, '{}'::jsonb), 'createdAt', ${isoSql('r."createdAt"')}, 'modifiedAt', ${isoSql('r."modifiedAt"')},
  'createdBy', r."createdBy", 'createdByUser', r."createdByUser", 'modifiedBy', r."modifiedBy", 'modifiedByUser', r."modifiedByUser")`;

@Injectable()
export class ContactsRepository {
  constructor(
    @InjectRepository(Contact) private readonly contacts: Repository<Contact>,
    private readonly transactions: Transactions,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /** Bench row "get contact by id": one statement, owner joined. */
  async findRow(id: number, tx?: Tx): Promise<ContactRow | null> {
    return first(await this.db(tx).query(`SELECT ${ROW_COLUMNS} FROM contacts c LEFT JOIN users u ON u.id = c.owner_id WHERE c.id = $1`, [id]));
  }

  /** The row, locked (FOR UPDATE) until `tx` ends: read-modify-write paths (PATCH, PUT) read through this. */
  async lockRow(id: number, tx: Tx): Promise<ContactRow | null> {
    return first(await tx.query(`SELECT ${ROW_COLUMNS} FROM contacts c LEFT JOIN users u ON u.id = c.owner_id WHERE c.id = $1 FOR UPDATE OF c`, [id]));
  }

  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM contacts WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /**
   * Bench row "create contact": INSERT, the owner's name and the contact.created event (outbox) in
   * one statement, so the outbox adds no round trip to the hot path.
   */
  async insert(v: ContactValues, who: Principal, tx?: Tx): Promise<ContactRow> {
    const rows: ContactRow[] = await this.db(tx).query(
      `WITH c AS (INSERT INTO contacts (name, email, phone, company, title, owner_id, fields, created_by, created_by_user)
                  VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9) RETURNING *),
            r AS (SELECT ${ROW_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id),
            e AS (${outboxInsertSql(`'contact.created'`, RECORD_JSON, 'NULL::jsonb', 'FROM r')})
       SELECT * FROM r`,
      [v.name, v.email, v.phone, v.company, v.title, v.ownerId, JSON.stringify(v.fields ?? {}), who.userId, who.userName],
    );
    return rows[0];
  }

  /** Writes every writable column (the caller holds the row lock, see lockRow); null when the row is gone. */
  async update(id: number, v: ContactValues, who: Principal, tx?: Tx): Promise<ContactRow | null> {
    return first(
      await this.db(tx).query(
        `WITH c AS (UPDATE contacts SET name = $1, email = $2, phone = $3, company = $4, title = $5, owner_id = $6, fields = $7::jsonb,
                           modified_at = now(), modified_by = $8, modified_by_user = $9 WHERE id = $10 RETURNING *)
         SELECT ${ROW_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id`,
        [v.name, v.email, v.phone, v.company, v.title, v.ownerId, JSON.stringify(v.fields ?? {}), who.userId, who.userName, id],
      ),
    );
  }

  /**
   * Deletes and answers the row as it was, writing contact.deleted in the same statement; null when
   * no row was deleted (so exactly one concurrent caller gets it, and only that one writes the event).
   */
  async remove(id: number, tx?: Tx): Promise<ContactRow | null> {
    return first(
      await this.db(tx).query(
        `WITH c AS (DELETE FROM contacts WHERE id = $1 RETURNING *),
              r AS (SELECT ${ROW_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id),
              e AS (${outboxInsertSql(`'contact.deleted'`, RECORD_JSON, 'NULL::jsonb', 'FROM r')})
         SELECT * FROM r`,
        [id],
      ),
    );
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
  ): Promise<{ total: number; rows: ContactRow[] }> {
    const qb = this.contacts.createQueryBuilder('c');
    scope?.(qb);
    const { total, items } = await paginate(qb, q, spec, { scoped: scope !== undefined, scopeCount });
    const ownerIds = [...new Set(items.map((c) => c.ownerId).filter((id): id is number => id !== null))];
    const names = new Map<number, string>();
    if (ownerIds.length) {
      // Read join on users (auth's table) for the owners' names.
      const rows: { id: number; name: string }[] = await this.transactions.db.query(`SELECT id, name FROM users WHERE id = ANY($1)`, [ownerIds]);
      for (const r of rows) names.set(r.id, r.name);
    }
    return { total, rows: items.map((c) => Object.assign(c, { ownerName: c.ownerId !== null ? (names.get(c.ownerId) ?? null) : null })) };
  }
}
