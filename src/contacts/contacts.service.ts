import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError, Repository } from 'typeorm';
import { auditOut } from '../common/audit.js';
import { iso } from '../common/dates.js';
import { AppError, conflict, fieldError, notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/validation.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { Contact } from './contact.entity.js';
import { CreateContactDto, UpdateContactDto } from './contact.dto.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';

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

/** A contact row as the hot-path SQL reads it (with the owner's name joined). */
interface ContactRow {
  id: number;
  name: string;
  email: string;
  phone: string | null;
  company: string | null;
  title: string | null;
  owner_id: number | null;
  owner_name: string | null;
  fields: Record<string, unknown>;
  created_at: Date;
  modified_at: Date | null;
  created_by: number | null;
  created_by_user: string | null;
  modified_by: number | null;
  modified_by_user: string | null;
}

/** The writable state of a contact while a request changes it. */
type ContactState = Pick<Contact, 'name' | 'email' | 'phone' | 'company' | 'title' | 'ownerId' | 'fields'> & { id?: number };

const RECORD_COLUMNS = `c.id, c.name, c.email, c.phone, c.company, c.title, c.owner_id, u.name AS owner_name, c.fields,
  c.created_at, c.modified_at, c.created_by, c.created_by_user, c.modified_by, c.modified_by_user`;

export type ContactRecord = ReturnType<ContactsService['toRecord']>;

type Queryable = Pick<DataSource | EntityManager, 'query'>;

@Injectable()
export class ContactsService {
  constructor(
    @InjectRepository(Contact) private readonly contacts: Repository<Contact>,
    @InjectDataSource() private readonly db: DataSource,
    private readonly notifications: NotificationsService,
    private readonly fieldValues: ContactFieldValuesService,
  ) {}

  toRecord(c: Contact, owners: Map<number, string>) {
    return {
      id: c.id,
      name: c.name,
      email: c.email,
      phone: c.phone,
      company: c.company,
      title: c.title,
      ownerId: c.ownerId,
      owner: c.ownerId !== null ? { id: c.ownerId, name: owners.get(c.ownerId) ?? null } : null,
      fields: c.fields ?? {},
      ...auditOut(c),
    };
  }

  private rowToRecord(r: ContactRow): ContactRecord {
    return {
      id: r.id,
      name: r.name,
      email: r.email,
      phone: r.phone,
      company: r.company,
      title: r.title,
      ownerId: r.owner_id,
      owner: r.owner_id !== null ? { id: r.owner_id, name: r.owner_name } : null,
      fields: r.fields ?? {},
      createdAt: iso(r.created_at),
      modifiedAt: iso(r.modified_at),
      createdBy: r.created_by,
      createdByUser: r.created_by_user,
      modifiedBy: r.modified_by,
      modifiedByUser: r.modified_by_user,
    };
  }

  /** Records for a batch of contacts, with their owners' names in one query. */
  async toRecords(list: Contact[]): Promise<ContactRecord[]> {
    const ids = [...new Set(list.map((c) => c.ownerId).filter((id): id is number => id !== null))];
    const owners = new Map<number, string>();
    if (ids.length) {
      const rows: { id: number; name: string }[] = await this.db.query(`SELECT id, name FROM users WHERE id = ANY($1)`, [ids]);
      for (const r of rows) owners.set(r.id, r.name);
    }
    return list.map((c) => this.toRecord(c, owners));
  }

  /**
   * The contacts list; `scope` narrows it (alias `c`), and `scopeCount` gives that scope's exact size
   * cheaply when no search or filter applies.
   */
  async list(
    query: Record<string, unknown>,
    scope?: (qb: ReturnType<Repository<Contact>['createQueryBuilder']>) => void,
    scopeCount?: () => Promise<number>,
  ) {
    const q = parseListQuery(query, CONTACT_LIST_SPEC);
    const qb = this.contacts.createQueryBuilder('c');
    scope?.(qb);
    const { total, items } = await paginate(qb, q, CONTACT_LIST_SPEC, { scoped: scope !== undefined, scopeCount });
    return { total, contacts: await this.toRecords(items) };
  }

  private async loadRow(id: number, q: Queryable = this.db, lock = false): Promise<ContactRow> {
    const rows: ContactRow[] = await q.query(
      `SELECT ${RECORD_COLUMNS} FROM contacts c LEFT JOIN users u ON u.id = c.owner_id WHERE c.id = $1${lock ? ' FOR UPDATE OF c' : ''}`,
      [id],
    );
    if (!rows.length) throw notFound('Contact', id);
    return rows[0];
  }

  async get(id: number): Promise<ContactRecord> {
    return this.rowToRecord(await this.loadRow(id));
  }

  async create(dto: CreateContactDto, who: Principal): Promise<ContactRecord> {
    const state = this.assign(emptyState(), dto, true);
    const custom = await this.fieldValues.apply({}, dto.fields, 'create');
    state.fields = custom.values;
    return this.persist(state, null, who, custom.unique);
  }

  async patch(id: number, dto: UpdateContactDto, who: Principal): Promise<ContactRecord> {
    const row = await this.loadRow(id);
    const state = this.assign(stateOf(row), dto, false);
    const custom = await this.fieldValues.apply(row.fields ?? {}, dto.fields, 'patch');
    state.fields = custom.values;
    return this.persist(state, row.owner_id, who, custom.unique);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new contact. */
  async put(id: number, dto: CreateContactDto, who: Principal): Promise<{ created: boolean; contact: ContactRecord }> {
    const rows: ContactRow[] = await this.db.query(`SELECT ${RECORD_COLUMNS} FROM contacts c LEFT JOIN users u ON u.id = c.owner_id WHERE c.id = $1`, [id]);
    if (!rows.length) return { created: true, contact: await this.create(dto, who) };
    const state = this.assign(stateOf(rows[0]), dto, true);
    const custom = await this.fieldValues.apply(rows[0].fields ?? {}, dto.fields, 'replace');
    state.fields = custom.values;
    return { created: false, contact: await this.persist(state, rows[0].owner_id, who, custom.unique) };
  }

  async remove(id: number): Promise<ContactRecord> {
    const rows: ContactRow[] = await this.db.query(
      `WITH c AS (DELETE FROM contacts WHERE id = $1 RETURNING *) SELECT ${RECORD_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id`,
      [id],
    );
    if (!rows.length) throw notFound('Contact', id);
    return this.rowToRecord(rows[0]);
  }

  /** Copies DTO values onto the state; with `replace`, omitted optional properties are reset. */
  private assign(c: ContactState, dto: UpdateContactDto, replace: boolean): ContactState {
    const set = <K extends keyof UpdateContactDto>(key: K, apply: (v: UpdateContactDto[K]) => void) => {
      if (dto[key] !== undefined) apply(dto[key]);
      else if (replace) apply(null as UpdateContactDto[K]);
    };
    if (dto.name === null) throw fieldError('name', 'must not be null');
    if (dto.email === null) throw fieldError('email', 'must not be null');
    if (dto.name !== undefined) c.name = dto.name.trim();
    if (dto.name !== undefined && c.name === '') throw fieldError('name', 'must not be empty');
    if (dto.email !== undefined) c.email = dto.email.trim();
    set('phone', (v) => (c.phone = v ? (toE164(v) ?? v.trim()) : null));
    set('company', (v) => (c.company = v ?? null));
    set('title', (v) => (c.title = v ?? null));
    set('ownerId', (v) => (c.ownerId = v ?? null));
    return c;
  }

  /**
   * Writes the contact in one statement that returns the full record. A transaction is taken only
   * when the write needs one: a unique custom value to check under its lock, or an owner to notify
   * together with the assignment.
   */
  private async persist(state: ContactState, previousOwner: number | null, who: Principal, uniqueFields: string[] = []): Promise<ContactRecord> {
    const ownerChanged = state.ownerId !== null && state.ownerId !== previousOwner;
    const write = async (q: Queryable): Promise<ContactRow> => {
      const values = [state.name, state.email, state.phone, state.company, state.title, state.ownerId, JSON.stringify(state.fields ?? {}), who.userId, who.userName];
      const rows: ContactRow[] =
        state.id === undefined
          ? await q.query(
              `WITH c AS (INSERT INTO contacts (name, email, phone, company, title, owner_id, fields, created_by, created_by_user)
                          VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9) RETURNING *)
               SELECT ${RECORD_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id`,
              values,
            )
          : await q.query(
              `WITH c AS (UPDATE contacts SET name = $1, email = $2, phone = $3, company = $4, title = $5, owner_id = $6, fields = $7::jsonb,
                                 modified_at = now(), modified_by = $8, modified_by_user = $9 WHERE id = $10 RETURNING *)
               SELECT ${RECORD_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.owner_id`,
              [...values, state.id],
            );
      if (!rows.length) throw notFound('Contact', state.id);
      return rows[0];
    };
    try {
      if (!uniqueFields.length && !ownerChanged) return this.rowToRecord(await write(this.db));
      const row = await this.db.transaction(async (m) => {
        await this.fieldValues.assertUnique(m, state.id ?? null, state.fields, uniqueFields);
        const r = await write(m);
        if (ownerChanged) {
          await this.notifications.notify(r.owner_id!, 'lead_assigned', `${who.userName} assigned the contact ${r.name} to you`, { leadId: r.id, leadName: r.name }, m);
        }
        return r;
      });
      return this.rowToRecord(row);
    } catch (e) {
      throw await this.translate(e, state);
    }
  }

  private async translate(e: unknown, contact: ContactState): Promise<unknown> {
    const code = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
    if (e instanceof QueryFailedError && code?.code === '23503' && code.constraint === 'contacts_owner_id_fkey') {
      return fieldError('ownerId', `user ${contact.ownerId} does not exist`);
    }
    if (e instanceof QueryFailedError && code?.code === '23505' && code.constraint === 'contacts_email_lower_uq') {
      const rows: { id: number }[] = await this.db.query(`SELECT id FROM contacts WHERE lower(email) = lower($1)`, [contact.email]);
      return conflict(`A contact with the email ${contact.email} already exists`, [
        { field: 'email', message: 'is already taken', existingId: rows[0]?.id ?? null },
      ]);
    }
    if (e instanceof AppError) return e;
    return e;
  }
}

function emptyState(): ContactState {
  return { name: '', email: '', phone: null, company: null, title: null, ownerId: null, fields: {} };
}

function stateOf(r: ContactRow): ContactState {
  return { id: r.id, name: r.name, email: r.email, phone: r.phone, company: r.company, title: r.title, ownerId: r.owner_id, fields: r.fields ?? {} };
}
