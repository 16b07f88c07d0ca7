import { Injectable } from '@nestjs/common';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { type CompiledFilter, compileFilter, type FilterField, type FilterRegistry } from '../lists/filter-sql.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { parseListQuery } from '../lists/list-query.js';
import type { ListExtras } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import { type BatchAnswer, BatchRunner } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { Clock } from '../common/clock.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { CONTACT_LIST_SPEC, type ContactRecord, type ContactRow, type ContactValues, doNotContactOf, toContactRecord } from './contact.columns.js';
import { CreateContactDto, SetDoNotContactDto, UpdateContactDto } from './contact.dto.js';
import { assignContact, emptyValues, valuesOf } from './contact.rules.js';
import { ContactsBatch } from './contacts-batch.js';
import { type ContactExportRow, type ContactListScope, ContactsRepository, type DncAuthor } from './contacts.repository.js';

/** A narrowed contacts list: a company's, a campaign's or a segment's contacts. */
export interface ScopedContactList {
  /** The list's name, which its cursors carry (e.g. `campaign 5 contacts`): another list's cursor is refused. */
  name: string;
  /** Narrows the query (alias `c`). */
  where: ContactListScope;
  /** The scope's exact size when no search or filter applies, counted more cheaply than by counting rows. */
  count?: () => Promise<number>;
  /** What modifiedSince compares with, when the scope counts more as a change than the contact's modifiedAt. */
  changedExpression?: string;
}

export { doNotContactOf, toContactRecord, type ContactRecord };

/** Who changes do-not-contact entries on an inbound STOP/START (no user). */
const INBOUND_AUTHOR: DncAuthor = { userId: null, userName: 'SMS reply' };

/**
 * A custom field as a filter field on a jsonb `fields` column (`c.fields` for contacts, `co.fields`
 * for companies): equality and lists by containment (served by a GIN index on the column, where
 * there is one), ordering on the stored JSON value (numbers numerically, dates and date-times by
 * their fixed-width ISO text).
 */
export function customFilterField(alias: string, type: string, options: readonly string[] | null, column = 'c.fields'): FilterField {
  switch (type) {
    case 'number':
      return { type: 'json-scalar', sql: column, json: { key: alias, valueType: 'number' } };
    case 'date':
      return { type: 'json-scalar', sql: column, json: { key: alias, valueType: 'date' } };
    case 'datetime':
      return { type: 'json-scalar', sql: column, json: { key: alias, valueType: 'datetime' } };
    case 'boolean':
      return { type: 'json-scalar', sql: column, json: { key: alias, valueType: 'boolean' } };
    case 'select':
      return { type: 'json-scalar', sql: column, values: options, json: { key: alias, valueType: 'select' } };
    case 'multiselect':
      return { type: 'json-multi', sql: column, values: options, json: { key: alias, valueType: 'select' } };
    default:
      return { type: 'json-text', sql: column, json: { key: alias, valueType: 'string' } };
  }
}

@Injectable()
export class ContactsService {
  private readonly batches: ContactsBatch;

  constructor(
    private readonly contacts: ContactsRepository,
    private readonly transactions: Transactions,
    private readonly notifications: NotificationsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly events: EventsService,
    batches: BatchRunner,
    private readonly clock: Clock,
  ) {
    this.batches = new ContactsBatch(this, contacts, transactions, fieldValues, events, batches);
  }

  /** The contacts list, or with `scoped` a narrowed one (a company's, a campaign's, a segment's contacts). */
  async list(query: Record<string, unknown>, scoped?: ScopedContactList) {
    // A scope is its own list (its cursors name it), and may count more as a change than the
    // contact's own modifiedAt (e.g. joining a campaign).
    const spec = scoped
      ? { ...CONTACT_LIST_SPEC, name: scoped.name, ...(scoped.changedExpression ? { changedExpression: scoped.changedExpression } : {}) }
      : CONTACT_LIST_SPEC;
    const q = parseListQuery(query, spec, await this.listExtras(query));
    const page = await this.contacts.page(q, scoped?.where, scoped?.count, spec);
    return listEnvelope(q, 'contacts', page, page.rows.map(toContactRecord));
  }

  /**
   * The custom fields as filter fields (`fields.<alias>`, typed by the field) and sparse names,
   * read (from the field cache) only when the query has a filter or a fields selection.
   */
  private async listExtras(query: Record<string, unknown>): Promise<ListExtras> {
    // Relative dates and behavioural windows are resolved at the injected clock's time.
    if (query.filter === undefined && query.fields === undefined) return { now: this.clock.now() };
    const filterable: Record<string, FilterField> = {};
    const properties: string[] = [];
    for (const rule of await this.fieldValues.publishedRules()) {
      properties.push(`fields.${rule.alias}`);
      filterable[`fields.${rule.alias}`] = customFilterField(rule.alias, rule.type, rule.options);
    }
    return { filterable, properties, now: this.clock.now() };
  }

  /**
   * The filter registry of contacts: the list's fields and the published custom fields
   * (`fields.<alias>`), without the names in `exclude`. With `tx`, the custom fields are read in that
   * transaction (no second connection while it is open; the embedded database runs one at a time).
   */
  async filterRegistry(exclude: readonly string[] = [], tx?: Tx): Promise<FilterRegistry> {
    const registry: FilterRegistry = { ...(CONTACT_LIST_SPEC.filterable ?? {}) };
    for (const rule of await this.fieldValues.publishedRules(tx)) {
      registry[`fields.${rule.alias}`] = customFilterField(rule.alias, rule.type, rule.options);
    }
    for (const name of exclude) Reflect.deleteProperty(registry, name);
    return registry;
  }

  /**
   * A filter over contacts checked and compiled exactly as the list's `filter` (the same registry,
   * the published custom fields included), without the fields in `exclude`: a 400 names what is
   * wrong. Answers the normalised tree (to store) and the WHERE over the alias `c` with bound
   * parameters (relative dates such as now-7d resolved at `now`).
   */
  async compileFilter(filter: unknown, exclude: readonly string[] = [], now = this.clock.now()): Promise<{ node: FilterNode; compiled: CompiledFilter }> {
    if (typeof filter === 'string' && filter.trim() === '') throw fieldError('filter', 'must not be empty');
    if (typeof filter !== 'string' && (typeof filter !== 'object' || filter === null || Array.isArray(filter))) {
      throw fieldError('filter', 'must be a filter: the JSON form (an object) or the query-string form (a string)');
    }
    return compileFilter(filter, await this.filterRegistry(exclude), now);
  }

  /**
   * One page of a contacts export: the contacts after `afterId` (id order) matching `filter` (the
   * list's filter language, custom fields included; a bad filter is the list's 400).
   */
  async exportPage(filter: unknown, afterId: number, limit: number): Promise<ContactExportRow[]> {
    const query = filter === undefined || filter === null ? {} : { filter };
    const q = parseListQuery(query, CONTACT_LIST_SPEC, await this.listExtras(query));
    return this.contacts.exportPage(q.filter, afterId, limit);
  }

  /** A company's contacts (GET /api/companies/{id}/contacts): exactly the contacts list's parameters and envelope. */
  listOfCompany(companyId: number, query: Record<string, unknown>) {
    return this.list(query, {
      name: `company ${companyId} contacts`,
      where: this.contacts.companyScope(companyId),
      count: () => this.contacts.countByCompany(companyId),
    });
  }

  async get(id: number, tx?: Tx): Promise<ContactRecord> {
    const row = await this.contacts.findRow(id, tx);
    if (!row) throw notFound('Contact', id);
    return toContactRecord(row);
  }

  /** The records of these ids that exist, by id (a workflow step over a batch of enrollments). */
  async getMany(ids: number[], tx?: Tx): Promise<Map<number, ContactRecord>> {
    return new Map((await this.contacts.findRows(ids, tx)).map((r) => [r.id, toContactRecord(r)]));
  }

  /** Contact ids by external id (tracking's userId), for the ids that have one. */
  async idsByExternalIds(externalIds: string[], tx?: Tx): Promise<Map<string, number>> {
    return new Map((await this.contacts.idsByExternalIds(externalIds, tx)).map((r) => [r.key, r.id]));
  }

  /** Contact ids by lower-cased email, for the emails a contact holds. */
  async idsByEmails(emails: string[], tx?: Tx): Promise<Map<string, number>> {
    return new Map((await this.contacts.idsByEmails(emails, tx)).map((r) => [r.key, r.id]));
  }

  /** A contact's row as the API record, locked until `tx` ends (null when it does not exist). */
  async lockRecord(id: number, tx: Tx): Promise<ContactRecord | null> {
    const row = await this.contacts.lockRow(id, tx);
    return row ? toContactRecord(row) : null;
  }

  /** The aliases of the published contact custom fields. */
  async customFieldAliases(tx?: Tx): Promise<Set<string>> {
    return new Set((await this.fieldValues.publishedRules(tx)).map((r) => r.alias));
  }

  /** Whether the contact exists (for features that refer to contacts). */
  exists(id: number, tx?: Tx): Promise<boolean> {
    return this.contacts.exists(id, tx);
  }

  async create(dto: CreateContactDto, who: Principal, outer?: Tx): Promise<ContactRecord> {
    const values = assignContact(emptyValues(), dto, true);
    const custom = await this.fieldValues.apply({}, dto.fields, 'create');
    values.fields = custom.values;
    // The usual create is one statement (bench row "create contact"); a transaction is taken only
    // when a unique custom value must be checked under its lock, or an owner is notified with it.
    if (!custom.unique.length && values.ownerId === null) return toContactRecord(await this.contacts.insert(values, who, outer));
    const row = await this.transactions.run(async (tx) => {
      await this.fieldValues.assertUnique(tx, null, values.fields, custom.unique);
      const inserted = await this.contacts.insert(values, who, tx);
      await this.notifyAssigned(inserted, who, tx);
      return inserted;
    }, outer);
    return toContactRecord(row);
  }

  /**
   * PATCH: reads the row under a lock (FOR UPDATE), so concurrent edits of different properties all
   * survive. The custom-field rules are read before the lock is taken.
   */
  async patch(id: number, dto: UpdateContactDto, who: Principal, outer?: Tx): Promise<ContactRecord> {
    const applyFields = await this.fieldValues.prepare(dto.fields, 'patch');
    const row = await this.transactions.run(async (tx) => {
      await this.lockCompany(dto.companyId, tx);
      const current = await this.contacts.lockRow(id, tx);
      if (!current) throw notFound('Contact', id);
      const values = assignContact(valuesOf(current), dto, false);
      const custom = applyFields(current.fields ?? {});
      values.fields = custom.values;
      return this.write(current, values, who, custom.unique, tx);
    }, outer);
    return toContactRecord(row);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new contact. */
  async put(id: number, dto: CreateContactDto, who: Principal): Promise<{ created: boolean; contact: ContactRecord }> {
    const applyFields = await this.fieldValues.prepare(dto.fields, 'replace');
    const replaced = await this.transactions.run(async (tx) => {
      await this.lockCompany(dto.companyId, tx);
      const current = await this.contacts.lockRow(id, tx);
      if (!current) return null;
      const values = assignContact(valuesOf(current), dto, true);
      const custom = applyFields(current.fields ?? {});
      values.fields = custom.values;
      return this.write(current, values, who, custom.unique, tx);
    });
    if (!replaced) return { created: true, contact: await this.create(dto, who) };
    return { created: false, contact: toContactRecord(replaced) };
  }

  /**
   * Sets the contact's sms do-not-contact entry (200 with the contact; an existing entry takes the
   * new reason and comment and keeps its `since`). contact.updated when something changed.
   */
  async setDoNotContact(id: number, dto: SetDoNotContactDto, who: Principal): Promise<ContactRecord> {
    const comment = dto.comment?.trim() ? dto.comment.trim() : null;
    const row = await this.transactions.run(async (tx) => {
      const current = await this.contacts.lockRow(id, tx);
      if (!current) throw notFound('Contact', id);
      const [changed] = await this.contacts.writeDnc({ id }, { reason: dto.reason, comment }, who, tx);
      return changed ?? current;
    });
    return toContactRecord(row);
  }

  /**
   * Removes the contact's sms do-not-contact entry. 404 when the contact does not exist or has no
   * entry, so of concurrent removals exactly one succeeds.
   */
  async clearDoNotContact(id: number, who: Principal): Promise<ContactRecord> {
    const row = await this.transactions.run(async (tx) => {
      const current = await this.contacts.lockRow(id, tx);
      if (!current) throw notFound('Contact', id);
      const [changed] = await this.contacts.writeDnc({ id }, { reason: null, comment: null }, who, tx);
      if (!changed) throw new AppError('not_found', `Contact ${id} has no sms do-not-contact entry`);
      return changed;
    });
    return toContactRecord(row);
  }

  /**
   * An inbound STOP (`opt_out`): every contact with this (E.164) number not yet opted out gets the
   * entry `unsubscribed`; existing entries keep their reason. START (`opt_in`): entries `unsubscribed`
   * and `bounced` are removed (the person asks for messages and the number works); `manual` entries,
   * a user's decision, stay. Answers how many contacts changed.
   */
  async applySmsReply(phone: string, action: 'opt_out' | 'opt_in', tx: Tx): Promise<number> {
    const rows =
      action === 'opt_out'
        ? await this.contacts.writeDnc({ phone }, { reason: 'unsubscribed', comment: 'replied STOP', onlyUnset: true }, INBOUND_AUTHOR, tx)
        : await this.contacts.writeDnc({ phone }, { reason: null, comment: null, onlyReasons: ['unsubscribed', 'bounced'] }, INBOUND_AUTHOR, tx);
    return rows.length;
  }

  /** Which of these E.164 numbers belong to a contact opted out of text messages. */
  optedOutPhones(phones: string[], tx?: Tx): Promise<Set<string>> {
    return this.contacts.optedOutPhones(phones, tx);
  }

  /** Exactly one of concurrent deletes gets the record; the others a 404. */
  async remove(id: number, tx?: Tx): Promise<ContactRecord> {
    const row = await this.contacts.remove(id, tx);
    if (!row) throw notFound('Contact', id);
    return toContactRecord(row);
  }

  /**
   * A PATCH or PUT that sets companyId locks that company against deletion before it locks the
   * contact: the order a company's deletion takes them in (company, then its contacts), so the two
   * cannot deadlock. A company that does not exist is left to the foreign key (400 naming companyId).
   */
  private async lockCompany(companyId: number | null | undefined, tx: Tx): Promise<void> {
    if (typeof companyId === 'number') await this.contacts.lockCompanyReference(companyId, tx);
  }

  /**
   * Sets a contact's company (companyId, and company to the company's name), for company membership.
   * The caller holds a lock on the company (so it cannot be deleted meanwhile). Answers false when
   * the contact already belonged to the company (nothing written). 404 when the contact does not exist.
   */
  async joinCompany(contactId: number, companyId: number, who: Principal, tx: Tx): Promise<boolean> {
    const current = await this.contacts.lockRow(contactId, tx);
    if (!current) throw notFound('Contact', contactId);
    if (current.companyId === companyId) return false;
    await this.writeCompany(current, companyId, who, tx);
    return true;
  }

  /** Clears a contact's company; 404 when the contact does not exist or does not belong to `companyId`. */
  async leaveCompany(contactId: number, companyId: number, who: Principal, tx: Tx): Promise<void> {
    const current = await this.contacts.lockRow(contactId, tx);
    if (!current) throw notFound('Contact', contactId);
    if (current.companyId !== companyId) throw new AppError('not_found', `Contact ${contactId} does not belong to company ${companyId}`);
    await this.writeCompany(current, null, who, tx);
  }

  private async writeCompany(current: ContactRow, companyId: number | null, who: Principal, tx: Tx): Promise<void> {
    const row = await this.contacts.setCompany(current.id, companyId, who, tx);
    if (!row) throw notFound('Contact', current.id);
    await this.events.recordUpdate(tx, 'contact.updated', toContactRecord(current), toContactRecord(row));
  }

  /** Detaches every contact of a company being deleted (each gets contact.updated); answers how many. */
  detachCompany(companyId: number, companyName: string, who: Principal, tx: Tx): Promise<number> {
    return this.contacts.detachCompany(companyId, companyName, who, tx);
  }

  /** The backfill's linking step: contacts without a company join the company their `company` string names (case-insensitive). */
  linkByCompanyName(who: { userId: number | null; userName: string }, tx: Tx): Promise<number> {
    return this.contacts.linkByCompanyName(who, tx);
  }

  /**
   * `POST /api/contacts/batch`: up to 500 creates, updates, upserts or deletes, each exactly as its
   * single-record route (see contacts-batch.ts). With `outer`, inside that transaction (imports).
   */
  batch(dto: BatchWriteDto, who: Principal, outer?: Tx): Promise<BatchAnswer> {
    return this.batches.run(dto, who, outer);
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
}
