import { AppError, fieldError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import {
  assertBatchPermission,
  assertBatchSize,
  type BatchAnswer,
  type BatchOutcome,
  type BatchPlan,
  type BatchRunner,
  itemObject,
  splitId,
} from '../batch/batch.js';
import type { BatchMode, BatchWriteDto } from '../batch/batch.dto.js';
import { isUniqueViolation } from '../database/constraints.js';
import type { Transactions, Tx } from '../database/transactions.js';
import type { EventsService } from '../events/events.service.js';
import type { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { type ContactRecord, type ContactRow, type ContactValues, toContactRecord } from './contact.columns.js';
import { certainContactBody, CreateContactDto, UpdateContactDto } from './contact.dto.js';
import { assignContact, emptyValues, valuesOf } from './contact.rules.js';
import type { ContactsRepository } from './contacts.repository.js';

/** The single-record writes a batch item runs, exactly as their routes (ContactsService's). */
export interface ContactWrites {
  create(dto: CreateContactDto, who: Principal, outer?: Tx): Promise<ContactRecord>;
  patch(id: number, dto: UpdateContactDto, who: Principal, outer?: Tx): Promise<ContactRecord>;
  remove(id: number, tx?: Tx): Promise<ContactRecord>;
}

/**
 * `POST /api/contacts/batch` (and the imports that run through it): the items' plans, each run as
 * its single-record route, and the set-based fast path for the items that need nothing but their
 * own row. Part of ContactsService, which builds it with its own writes.
 */
export class ContactsBatch {
  constructor(
    private readonly writes: ContactWrites,
    private readonly contacts: ContactsRepository,
    private readonly transactions: Transactions,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly events: EventsService,
    private readonly batches: BatchRunner,
  ) {}

  /**
   * `POST /api/contacts/batch`: up to 500 creates, updates, upserts or deletes, each exactly as its
   * single-record route. Records are named by `id`, `email` (the default for upsert) or the alias of a
   * unique-identifier custom field; the keys of the whole batch are resolved by one SELECT, then each
   * item runs in its own savepoint. An upsert whose create loses a race for the email (another request
   * inserted it meanwhile) updates that contact instead. With `outer`, inside that transaction (imports).
   */
  async run(dto: BatchWriteDto, who: Principal, outer?: Tx): Promise<BatchAnswer> {
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
        const current = new Map(rows.map((r) => [lockBy === 'email' ? (r.email ?? '').toLowerCase() : String(r.id).padStart(10, '0'), r]));
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
          const values = assignContact(valuesOf(row), dto, false);
          const custom = applyPatch(dto.fields, row.fields ?? {});
          // A unique value, an owner change or a company change takes the item's own run (locks, notification, company name).
          if (custom.unique.length || values.ownerId !== row.ownerId || values.companyId !== row.companyId) continue;
          values.fields = custom.values;
          updates.push({ index, before: row, values });
        } else if (!row && applyCreate) {
          const dto = certainContactBody(body, true) ?? (await this.batches.validate(CreateContactDto, body));
          const values = assignContact(emptyValues(), dto, true);
          const custom = applyCreate(dto.fields, {});
          if (custom.unique.length || values.ownerId !== null || values.companyId !== null) continue;
          values.fields = custom.values;
          creates.push({ index, values, key: (values.email ?? '').toLowerCase() });
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
      id: (await this.writes.create(await this.batches.validate(CreateContactDto, body), who, tx)).id,
    });
    const update = async (id: number, body: unknown, tx: Tx): Promise<BatchOutcome> => ({
      kind: 'updated',
      id: (await this.writes.patch(id, await this.batches.validate(UpdateContactDto, body), who, tx)).id,
    });
    const emailKey = typeof item.email === 'string' ? item.email.trim().toLowerCase() : undefined;
    if (mode === 'create') return { key: emailKey !== undefined ? { field: 'email', value: emailKey } : undefined, run: (tx) => create(item, tx) };
    if (by === 'id') {
      if (mode === 'upsert' && item.id === undefined) return { run: (tx) => create(item, tx) };
      const { id, rest } = splitId(item);
      const key = { field: 'id', value: String(id).padStart(10, '0') };
      if (mode === 'delete') {
        assertOnly(rest, []);
        return { key, run: async (tx) => ({ kind: 'deleted', id: (await this.writes.remove(id, tx)).id }) };
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
          return { kind: 'deleted', id: (await this.writes.remove(id, tx)).id };
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
