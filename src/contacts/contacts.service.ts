import { Injectable } from '@nestjs/common';
import { iso } from '../common/dates.js';
import { fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/phone.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { CreateContactDto, UpdateContactDto } from './contact.dto.js';
import { CONTACT_LIST_SPEC, type ContactListScope, type ContactRow, ContactsRepository, type ContactValues } from './contacts.repository.js';

export { CONTACT_LIST_SPEC, type ContactListScope };

/** The one mapper from a stored contact (with its owner's name) to the API record. */
export function toContactRecord(r: ContactRow) {
  return {
    id: r.id,
    name: r.name,
    email: r.email,
    phone: r.phone,
    company: r.company,
    title: r.title,
    ownerId: r.ownerId,
    owner: r.ownerId !== null ? { id: r.ownerId, name: r.ownerName } : null,
    fields: r.fields ?? {},
    createdAt: iso(r.createdAt),
    modifiedAt: iso(r.modifiedAt),
    createdBy: r.createdBy,
    createdByUser: r.createdByUser,
    modifiedBy: r.modifiedBy,
    modifiedByUser: r.modifiedByUser,
  };
}

export type ContactRecord = ReturnType<typeof toContactRecord>;

@Injectable()
export class ContactsService {
  constructor(
    private readonly contacts: ContactsRepository,
    private readonly transactions: Transactions,
    private readonly notifications: NotificationsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly events: EventsService,
  ) {}

  /**
   * The contacts list; `scope` narrows it (alias `c`), and `scopeCount` gives that scope's exact size
   * cheaply when no search or filter applies; `changedExpression` replaces what modifiedSince compares with.
   */
  async list(query: Record<string, unknown>, scope?: ContactListScope, scopeCount?: () => Promise<number>, changedExpression?: string) {
    // A scope may count more as a change than the contact's own modifiedAt (e.g. joining a campaign).
    const spec = changedExpression ? { ...CONTACT_LIST_SPEC, changedExpression } : CONTACT_LIST_SPEC;
    const q = parseListQuery(query, spec);
    const { total, rows } = await this.contacts.page(q, scope, scopeCount, spec);
    return { total, contacts: rows.map(toContactRecord) };
  }

  async get(id: number): Promise<ContactRecord> {
    const row = await this.contacts.findRow(id);
    if (!row) throw notFound('Contact', id);
    return toContactRecord(row);
  }

  /** Whether the contact exists (for features that refer to contacts). */
  exists(id: number, tx?: Tx): Promise<boolean> {
    return this.contacts.exists(id, tx);
  }

  async create(dto: CreateContactDto, who: Principal): Promise<ContactRecord> {
    const values = this.assign(emptyValues(), dto, true);
    const custom = await this.fieldValues.apply({}, dto.fields, 'create');
    values.fields = custom.values;
    // The usual create is one statement (bench row "create contact"); a transaction is taken only
    // when a unique custom value must be checked under its lock, or an owner is notified with it.
    if (!custom.unique.length && values.ownerId === null) return toContactRecord(await this.contacts.insert(values, who));
    const row = await this.transactions.run(async (tx) => {
      await this.fieldValues.assertUnique(tx, null, values.fields, custom.unique);
      const inserted = await this.contacts.insert(values, who, tx);
      await this.notifyAssigned(inserted, who, tx);
      return inserted;
    });
    return toContactRecord(row);
  }

  /**
   * PATCH: reads the row under a lock (FOR UPDATE), so concurrent edits of different properties all
   * survive. The custom-field rules are read before the lock is taken.
   */
  async patch(id: number, dto: UpdateContactDto, who: Principal): Promise<ContactRecord> {
    const applyFields = await this.fieldValues.prepare(dto.fields, 'patch');
    const row = await this.transactions.run(async (tx) => {
      const current = await this.contacts.lockRow(id, tx);
      if (!current) throw notFound('Contact', id);
      const values = this.assign(valuesOf(current), dto, false);
      const custom = applyFields(current.fields ?? {});
      values.fields = custom.values;
      return this.write(current, values, who, custom.unique, tx);
    });
    return toContactRecord(row);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new contact. */
  async put(id: number, dto: CreateContactDto, who: Principal): Promise<{ created: boolean; contact: ContactRecord }> {
    const applyFields = await this.fieldValues.prepare(dto.fields, 'replace');
    const replaced = await this.transactions.run(async (tx) => {
      const current = await this.contacts.lockRow(id, tx);
      if (!current) return null;
      const values = this.assign(valuesOf(current), dto, true);
      const custom = applyFields(current.fields ?? {});
      values.fields = custom.values;
      return this.write(current, values, who, custom.unique, tx);
    });
    if (!replaced) return { created: true, contact: await this.create(dto, who) };
    return { created: false, contact: toContactRecord(replaced) };
  }

  /** Exactly one of concurrent deletes gets the record; the others a 404. */
  async remove(id: number): Promise<ContactRecord> {
    const row = await this.contacts.remove(id);
    if (!row) throw notFound('Contact', id);
    return toContactRecord(row);
  }

  /** Writes a locked contact: unique custom values checked under their lock; its events and the new owner's notification in the same transaction. */
  private async write(current: ContactRow, values: ContactValues, who: Principal, uniqueFields: string[], tx: Tx): Promise<ContactRow> {
    await this.fieldValues.assertUnique(tx, current.id, values.fields, uniqueFields);
    const row = await this.contacts.update(current.id, values, who, tx);
    if (!row) throw notFound('Contact', current.id);
    const before = toContactRecord(current);
    const after = toContactRecord(row);
    await this.events.recordUpdate(tx, 'contact.updated', before, after);
    if (row.ownerId !== current.ownerId) {
      await this.events.record(tx, 'contact.owner_changed', after, { ownerId: before.ownerId, owner: before.owner });
      await this.notifyAssigned(row, who, tx);
    }
    return row;
  }

  private async notifyAssigned(row: ContactRow, who: Principal, tx: Tx): Promise<void> {
    if (row.ownerId === null) return;
    await this.notifications.notify(
      row.ownerId,
      'lead_assigned',
      `${who.userName} assigned the contact ${row.name} to you`,
      { leadId: row.id, leadName: row.name },
      tx,
    );
  }

  /** Copies DTO values onto the values; with `replace`, omitted optional properties are reset. */
  private assign(c: ContactValues, dto: UpdateContactDto, replace: boolean): ContactValues {
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
}

function emptyValues(): ContactValues {
  return { name: '', email: '', phone: null, company: null, title: null, ownerId: null, fields: {} };
}

function valuesOf(r: ContactRow): ContactValues {
  return { name: r.name, email: r.email, phone: r.phone, company: r.company, title: r.title, ownerId: r.ownerId, fields: r.fields ?? {} };
}
