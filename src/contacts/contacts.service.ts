import { Injectable } from '@nestjs/common';
import { iso } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { type CompiledFilter, compileFilter, type FilterField, type FilterRegistry } from '../lists/filter-sql.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { parseListQuery } from '../lists/list-query.js';
import type { ListExtras } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import {
  assertBatchPermission,
  assertBatchSize,
  type BatchAnswer,
  type BatchOutcome,
  type BatchPlan,
  BatchRunner,
  itemObject,
  splitId,
} from '../batch/batch.js';
import type { BatchMode, BatchWriteDto } from '../batch/batch.dto.js';
import { isUniqueViolation } from '../database/constraints.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/phone.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { certainContactBody, CreateContactDto, SetDoNotContactDto, UpdateContactDto } from './contact.dto.js';
import {
  CONTACT_LIST_SPEC,
  type ContactExportRow,
  type ContactListScope,
  type ContactRow,
  ContactsRepository,
  type ContactValues,
  type DncAuthor,
} from './contacts.repository.js';

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

/** The one mapper from a stored contact (with its owner's name) to the API record. */
export function toContactRecord(r: ContactRow) {
  return {
    id: r.id,
    name: r.name,
    email: r.email,
    phone: r.phone,
    company: r.company,
    companyId: r.companyId,
    companyRef: r.companyId !== null ? { id: r.companyId, name: r.companyName ?? '' } : null,
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
    doNotContact: doNotContactOf(r),
  };
}

/** The record's `doNotContact` (the same object as dncJson in contacts.repository.ts builds for events). */
export function doNotContactOf(r: Pick<ContactRow, 'dncSmsReason' | 'dncSmsSince' | 'dncSmsComment'>) {
  return {
    sms: r.dncSmsReason ? { reason: r.dncSmsReason, since: iso(r.dncSmsSince) ?? '', comment: r.dncSmsComment ?? null } : null,
  };
}

/** Who changes do-not-contact entries on an inbound STOP/START (no user). */
const INBOUND_AUTHOR: DncAuthor = { userId: null, userName: 'SMS reply' };

export type ContactRecord = ReturnType<typeof toContactRecord>;

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
  constructor(
    private readonly contacts: ContactsRepository,
    private readonly transactions: Transactions,
    private readonly notifications: NotificationsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly events: EventsService,
    private readonly batches: BatchRunner,
  ) {}

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
    if (query.filter === undefined && query.fields === undefined) return {};
    const filterable: Record<string, FilterField> = {};
    const properties: string[] = [];
    for (const rule of await this.fieldValues.publishedRules()) {
      properties.push(`fields.${rule.alias}`);
      filterable[`fields.${rule.alias}`] = customFilterField(rule.alias, rule.type, rule.options);
    }
    return { filterable, properties };
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
  async compileFilter(filter: unknown, exclude: readonly string[] = [], now = new Date()): Promise<{ node: FilterNode; compiled: CompiledFilter }> {
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

  async get(id: number): Promise<ContactRecord> {
    const row = await this.contacts.findRow(id);
    if (!row) throw notFound('Contact', id);
    return toContactRecord(row);
  }

  /** Whether the contact exists (for features that refer to contacts). */
  exists(id: number, tx?: Tx): Promise<boolean> {
    return this.contacts.exists(id, tx);
  }

  async create(dto: CreateContactDto, who: Principal, outer?: Tx): Promise<ContactRecord> {
    const values = this.assign(emptyValues(), dto, true);
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
      const values = this.assign(valuesOf(current), dto, false);
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
      const values = this.assign(valuesOf(current), dto, true);
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
   * single-record route. Records are named by `id`, `email` (the default for upsert) or the alias of a
   * unique-identifier custom field; the keys of the whole batch are resolved by one SELECT, then each
   * item runs in its own savepoint. An upsert whose create loses a race for the email (another request
   * inserted it meanwhile) updates that contact instead. With `outer`, inside that transaction (imports).
   */
  async batch(dto: BatchWriteDto, who: Principal, outer?: Tx): Promise<BatchAnswer> {
    assertBatchSize(dto.items);
    assertBatchPermission(dto, who, 'contacts:delete');
    const by = dto.idProperty ?? (dto.mode === 'upsert' ? 'email' : 'id');
    if (by !== 'id' && by !== 'email' && !(await this.fieldValues.isUniqueIdentifier(by))) {
      throw fieldError('idProperty', 'must be id, email or the alias of a published unique-identifier contact field');
    }
    const holders = new Map<string, number>();
    const items: (Record<string, unknown> | null)[] = [];
    const plans = dto.items.map((raw, index): BatchPlan => {
      items[index] = null;
      try {
        const item = itemObject(raw);
        items[index] = item;
        return this.batchPlan(dto.mode, by, item, holders, who);
      } catch (error) {
        return { error };
      }
    });
    return this.batches.execute(
      plans,
      dto.atomic === true,
      async (tx, live) => {
        const keys = [...new Set(live.flatMap((i) => (plans[i].key ? [plans[i].key.value] : [])))];
        const lockBy = dto.mode === 'create' || by === 'email' ? 'email' : by === 'id' ? 'id' : null;
        if (lockBy === null) {
          for (const r of await this.fieldValues.holdersOf(by, keys, tx)) holders.set(r.key, r.id);
          return;
        }
        // The named contacts, locked in id order: one statement for the whole batch.
        const rows = lockBy === 'email' ? await this.contacts.lockByEmails(keys, tx) : await this.contacts.lockByIds(keys.map(Number), tx);
        const current = new Map(rows.map((r) => [lockBy === 'email' ? r.email.toLowerCase() : String(r.id).padStart(10, '0'), r]));
        for (const [key, r] of current) holders.set(key, r.id);
        if (dto.mode !== 'delete') await this.writeSimpleItems(dto.mode, by, live, plans, items, current, who, tx);
      },
      outer,
    );
  }

  /**
   * The batch fast path: items that need nothing but their own row (no unique custom value to check
   * under its lock, no owner change to notify) are written set-based: one UPDATE for the existing
   * contacts and one INSERT for the new ones, with their events, exactly the values and events the
   * single-record routes write. Anything else, and every item when a set statement fails (a race for
   * an email, a foreign key), is left to the item's own run, which answers exactly as its route.
   * Bench: bench/batch.mjs.
   */
  private async writeSimpleItems(
    mode: BatchMode,
    by: string,
    live: number[],
    plans: BatchPlan[],
    items: (Record<string, unknown> | null)[],
    current: Map<string, ContactRow>,
    who: Principal,
    tx: Tx,
  ): Promise<void> {
    const updates: { index: number; before: ContactRow; values: ContactValues }[] = [];
    const creates: { index: number; values: ContactValues; key: string }[] = [];
    // The published custom fields read once for the whole batch, not once per item.
    const applyPatch = mode !== 'create' ? await this.fieldValues.preparer('patch') : null;
    const applyCreate = mode !== 'update' ? await this.fieldValues.preparer('create') : null;
    for (const index of live) {
      const item = items[index];
      if (!item) continue;
      // The id names the record only in update and upsert by id; in a create it is a property the body may not have.
      const { id: _id, ...rest } = item;
      const body = by === 'id' && mode !== 'create' ? rest : item;
      const row = plans[index].key ? current.get(plans[index].key.value) : undefined;
      try {
        if (row && applyPatch) {
          // A body that certainly passes the pipe skips it; any other goes through it (its errors are the pipe's).
          const dto = certainContactBody(body, false) ?? (await this.batches.validate(UpdateContactDto, body));
          const values = this.assign(valuesOf(row), dto, false);
          const custom = applyPatch(dto.fields, row.fields ?? {});
          // A unique value, an owner change or a company change takes the item's own run (locks, notification, company name).
          if (custom.unique.length || values.ownerId !== row.ownerId || values.companyId !== row.companyId) continue;
          values.fields = custom.values;
          updates.push({ index, before: row, values });
        } else if (!row && applyCreate) {
          const dto = certainContactBody(body, true) ?? (await this.batches.validate(CreateContactDto, body));
          const values = this.assign(emptyValues(), dto, true);
          const custom = applyCreate(dto.fields, {});
          if (custom.unique.length || values.ownerId !== null || values.companyId !== null) continue;
          values.fields = custom.values;
          creates.push({ index, values, key: values.email.toLowerCase() });
        }
      } catch {
        continue; // refused: the item's own run answers the error exactly as the route would
      }
    }
    if (!updates.length && !creates.length) return;
    // New emails in one order in every batch, so two batches inserting the same ones cannot deadlock.
    creates.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    try {
      const outcomes = await this.transactions.run(async (sp) => {
        const after = new Map(
          (
            await this.contacts.updateMany(
              updates.map((u) => ({ id: u.before.id, v: u.values })),
              who,
              sp,
            )
          ).map((r) => [r.id, r]),
        );
        const changes = updates.map((u) => {
          const row = after.get(u.before.id);
          if (!row) throw new Error(`contact ${u.before.id} was not updated`);
          return { before: toContactRecord(u.before), after: toContactRecord(row) };
        });
        if (changes.length) await this.events.recordUpdates(sp, 'contact.updated', changes);
        const ids = new Map(
          (
            await this.contacts.insertMany(
              creates.map((c) => c.values),
              who,
              sp,
            )
          ).map((r) => [r.key, r.id]),
        );
        return [
          ...updates.map((u) => ({ index: u.index, done: { kind: 'updated' as const, id: u.before.id } })),
          ...creates.map((c) => {
            const id = ids.get(c.key);
            if (id === undefined) throw new Error(`contact ${c.key} was not inserted`);
            return { index: c.index, done: { kind: 'created' as const, id } };
          }),
        ];
      }, tx);
      for (const o of outcomes) plans[o.index].done = o.done;
    } catch {
      // Rolled back to the savepoint: every item runs on its own instead.
    }
  }

  private batchPlan(mode: BatchMode, by: string, item: Record<string, unknown>, holders: Map<string, number>, who: Principal): BatchPlan {
    const create = async (body: unknown, tx: Tx): Promise<BatchOutcome> => ({
      kind: 'created',
      id: (await this.create(await this.batches.validate(CreateContactDto, body), who, tx)).id,
    });
    const update = async (id: number, body: unknown, tx: Tx): Promise<BatchOutcome> => ({
      kind: 'updated',
      id: (await this.patch(id, await this.batches.validate(UpdateContactDto, body), who, tx)).id,
    });
    const emailKey = typeof item.email === 'string' ? item.email.trim().toLowerCase() : undefined;
    if (mode === 'create') return { key: emailKey !== undefined ? { field: 'email', value: emailKey } : undefined, run: (tx) => create(item, tx) };
    if (by === 'id') {
      if (mode === 'upsert' && item.id === undefined) return { run: (tx) => create(item, tx) };
      const { id, rest } = splitId(item);
      const key = { field: 'id', value: String(id).padStart(10, '0') };
      if (mode === 'delete') {
        assertOnly(rest, []);
        return { key, run: async (tx) => ({ kind: 'deleted', id: (await this.remove(id, tx)).id }) };
      }
      if (mode === 'update') return { key, run: (tx) => update(id, rest, tx) };
      return { key, run: (tx) => this.upsert(id, rest, tx, update, create) };
    }
    // Named by email or by a unique custom field: the key is in the body itself.
    const field = by === 'email' ? 'email' : `fields.${by}`;
    const value = by === 'email' ? emailKey : keyOfFieldValue(item.fields, by);
    if (value === undefined) throw fieldError(field, `is required (the batch names its contacts by ${field})`);
    const key = { field, value };
    const missing = () => new AppError('not_found', `No contact has the ${field} ${value}`);
    if (mode === 'delete') {
      assertOnly(item, [by === 'email' ? 'email' : 'fields']);
      return {
        key,
        run: async (tx) => {
          const id = holders.get(value);
          if (id === undefined) throw missing();
          return { kind: 'deleted', id: (await this.remove(id, tx)).id };
        },
      };
    }
    if (mode === 'update') {
      return {
        key,
        run: (tx) => {
          const id = holders.get(value);
          if (id === undefined) throw missing();
          return update(id, item, tx);
        },
      };
    }
    return {
      key,
      run: async (tx) => {
        const id = holders.get(value);
        if (id !== undefined) return this.upsert(id, item, tx, update, create);
        try {
          return await this.transactions.run((t) => create(item, t), tx);
        } catch (e) {
          // Another request created the contact since the batch looked: update it instead.
          const holder = by === 'email' && isUniqueViolation(e, 'contacts_email_lower_uq') ? (await this.contacts.idsByEmails([value], tx))[0]?.id : undefined;
          const taken = e instanceof AppError && e.code === 'conflict' ? e.details?.find((d) => d.field === field)?.existingId : undefined;
          const existing = holder ?? (typeof taken === 'number' ? taken : undefined);
          if (existing === undefined) throw e;
          return update(existing, item, tx);
        }
      },
    };
  }

  /** An upsert of a known id: the update, or the create when the contact is gone (as PUT does). */
  private async upsert(
    id: number,
    body: Record<string, unknown>,
    tx: Tx,
    update: (id: number, body: unknown, tx: Tx) => Promise<BatchOutcome>,
    create: (body: unknown, tx: Tx) => Promise<BatchOutcome>,
  ): Promise<BatchOutcome> {
    try {
      return await this.transactions.run((t) => update(id, body, t), tx);
    } catch (e) {
      if (!(e instanceof AppError) || e.code !== 'not_found') throw e;
    }
    return create(body, tx);
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
    const previousCompanyId = c.companyId;
    set('companyId', (v) => (c.companyId = v ?? null));
    // A company set without a company name (on create and PUT, or changed by a PATCH): the name comes
    // from the company, read in the write's statement.
    c.companyFromRef = dto.companyId !== undefined && dto.companyId !== null && dto.company === undefined && (replace || dto.companyId !== previousCompanyId);
    return c;
  }
}

function emptyValues(): ContactValues {
  return { name: '', email: '', phone: null, company: null, title: null, ownerId: null, companyId: null, fields: {} };
}

function valuesOf(r: ContactRow): ContactValues {
  return {
    name: r.name,
    email: r.email,
    phone: r.phone,
    company: r.company,
    title: r.title,
    ownerId: r.ownerId,
    companyId: r.companyId,
    fields: r.fields ?? {},
  };
}

/** The key of a custom field value in a batch (JSON text, as the holders query compares it). */
function keyOfFieldValue(fields: unknown, alias: string): string | undefined {
  if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) return undefined;
  const v = (fields as Record<string, unknown>)[alias];
  return v === undefined || v === null ? undefined : JSON.stringify(v);
}

/** A delete item names its record and nothing else. */
function assertOnly(item: Record<string, unknown>, allowed: string[]): void {
  const extra = Object.keys(item).filter((k) => !allowed.includes(k));
  if (!extra.length) return;
  const details = extra.map((field) => ({ field, message: 'should not exist' }));
  throw new AppError('validation_failed', `Validation failed: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details);
}
