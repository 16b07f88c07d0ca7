import { Injectable } from '@nestjs/common';
import { aliasFrom, withGeneratedAlias } from '../common/alias.js';
import { RESERVED_PROPERTY_NAMES } from '../server/request-text.middleware.js';
import { stampCreated, stampModified } from '../common/audit.js';
import { isUniqueViolation } from '../database/constraints.js';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { AppError, conflict, type ErrorDetail, fieldError, notFound, validationError } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import type { ListSpec } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { Field } from './field.entity.js';
import { FieldInObjectBodyDto, UpdateFieldDto } from './field.dto.js';
import { FIELD_OBJECTS, FIELD_TYPES, type FieldObject, normalizeProperties, OPTION_TYPES, parseDefaultValue } from './field-rules.js';
import { ContactFieldValuesRepository } from './contact-field-values.repository.js';
import { ContactFieldValuesService } from './contact-field-values.service.js';
import { FieldsRepository } from './fields.repository.js';

const SORTABLE = {
  id: 'f.id',
  label: 'f.label',
  alias: 'f.alias',
  type: 'f.type',
  group: 'f.field_group',
  order: 'f.field_order',
  object: 'f.object',
  isPublished: 'f.is_published',
  isRequired: 'f.is_required',
  dateAdded: 'f.created_at',
  dateModified: 'f.modified_at',
};
const SEARCH = 'sf_text(f.label, f.alias, f.description)';

/** Lists under `/api/fields/<object>`: the object comes from the path. */
export const FIELD_LIST_SPEC: ListSpec = {
  // Per object at request time (`contact fields`, `company fields`): see list().
  name: 'object fields',
  sortable: SORTABLE,
  searchExpression: SEARCH,
  filters: {
    isPublished: { type: 'boolean', column: 'f.is_published' },
    type: { type: 'string', column: 'f.type', values: FIELD_TYPES },
  },
  filterable: {
    id: { type: 'id', sql: 'f.id' },
    label: { type: 'string', sql: 'f.label' },
    alias: { type: 'string', sql: 'f.alias' },
    type: { type: 'enum', sql: 'f.type', values: FIELD_TYPES },
    group: { type: 'string', sql: 'f.field_group' },
    order: { type: 'int', sql: 'f.field_order' },
    isPublished: { type: 'boolean', sql: 'f.is_published' },
    isRequired: { type: 'boolean', sql: 'f.is_required' },
    isUniqueIdentifier: { type: 'boolean', sql: 'f.is_unique_identifier' },
    dateAdded: { type: 'datetime', sql: 'f.created_at' },
    dateModified: { type: 'datetime', sql: 'f.modified_at' },
  },
  properties: [
    'id',
    'isPublished',
    'publishUp',
    'publishDown',
    'dateAdded',
    'createdBy',
    'createdByUser',
    'dateModified',
    'modifiedBy',
    'modifiedByUser',
    'label',
    'alias',
    'description',
    'type',
    'group',
    'order',
    'object',
    'defaultValue',
    'isRequired',
    'isPubliclyUpdatable',
    'isUniqueIdentifier',
    'properties',
  ],
};

/** The collection-style list `/api/fields`: both objects, with an `object` filter. */
export const FIELD_COLLECTION_LIST_SPEC: ListSpec = {
  ...FIELD_LIST_SPEC,
  name: 'fields',
  filters: { ...FIELD_LIST_SPEC.filters, object: { type: 'string', column: 'f.object', values: FIELD_OBJECTS } },
  filterable: { ...FIELD_LIST_SPEC.filterable, object: { type: 'enum', sql: 'f.object', values: FIELD_OBJECTS } },
};

export type FieldRecord = ReturnType<FieldsService['toRecord']>;
type Mode = 'create' | 'replace' | 'patch';

export const isFieldObject = (v: string): v is FieldObject => (FIELD_OBJECTS as readonly string[]).includes(v);

@Injectable()
export class FieldsService {
  constructor(
    private readonly fields: FieldsRepository,
    private readonly contactValueRows: ContactFieldValuesRepository,
    private readonly transactions: Transactions,
    private readonly contactValues: ContactFieldValuesService,
    private readonly events: EventsService,
  ) {}

  toRecord(f: Field) {
    const props = f.properties;
    const empty = !props || (Array.isArray(props) ? props.length === 0 : Object.keys(props).length === 0);
    return {
      id: f.id,
      isPublished: f.isPublished,
      publishUp: iso(f.publishUp),
      publishDown: iso(f.publishDown),
      dateAdded: isoRequired(f.createdAt),
      createdBy: f.createdBy,
      createdByUser: f.createdByUser,
      dateModified: iso(f.modifiedAt),
      modifiedBy: f.modifiedBy,
      modifiedByUser: f.modifiedByUser,
      label: f.label,
      alias: f.alias,
      description: f.description,
      type: f.type,
      group: f.group,
      order: f.order,
      object: f.object,
      defaultValue: f.defaultValue,
      isRequired: f.isRequired,
      isPubliclyUpdatable: f.isPubliclyUpdatable,
      isUniqueIdentifier: f.isUniqueIdentifier,
      properties: empty ? [] : props,
    };
  }

  /** `object` given: the path-style list of that object; omitted: the collection-style list of both. */
  async list(query: Record<string, unknown>, object?: FieldObject) {
    const spec = object ? { ...FIELD_LIST_SPEC, name: `${object} fields` } : FIELD_COLLECTION_LIST_SPEC;
    const q = parseListQuery(query, spec);
    const page = await this.fields.page(q, spec, object);
    return listEnvelope(
      q,
      'fields',
      page,
      page.items.map((f) => this.toRecord(f)),
    );
  }

  /**
   * `GET /api/fields/<segment>` is both the path-style list (`contact`, `company`) and the
   * collection-style single GET (a numeric id); anything else names nothing (404).
   */
  async listOrGet(segment: string, query: Record<string, unknown>): Promise<{ total: number; fields: FieldRecord[] } | { field: FieldRecord }> {
    if (isFieldObject(segment)) return this.list(query, segment);
    if (/^[1-9]\d{0,9}$/.test(segment) && Number(segment) <= 2147483647) return { field: await this.get(Number(segment)) };
    throw notFound(`Unknown fields path "${segment.slice(0, 40)}"; use contact, company or a field id`);
  }

  /** The field (locked when `tx` is given), or 404; under /api/fields/<object>/..., a field of the other object is a 404. */
  private async findEntity(id: number, object?: FieldObject, tx?: Tx): Promise<Field> {
    const f = tx ? await this.fields.lock(id, tx) : await this.fields.find(id);
    if (!f || (object && f.object !== object)) throw notFound(object ? `${object[0].toUpperCase()}${object.slice(1)} field` : 'Field', id);
    return f;
  }

  async get(id: number, object?: FieldObject): Promise<FieldRecord> {
    return this.toRecord(await this.findEntity(id, object));
  }

  /**
   * A new field. Without an alias, one is generated from the label and the next free candidate is
   * taken when a concurrent create wins the first (never a 409); a given alias that is taken is a
   * 409 from the constraint (fields_object_alias_uq, registered in field.entity.ts).
   */
  async create(dto: FieldInObjectBodyDto, who: Principal, pathObject?: FieldObject): Promise<FieldRecord> {
    if (pathObject && dto.object !== undefined && dto.object !== null && dto.object !== pathObject) {
      throw fieldError('object', `must match the object in the path (${pathObject})`);
    }
    const object = pathObject ?? dto.object;
    if (!object) throw fieldError('object', 'is required');
    const field = new Field();
    field.object = object;
    this.assign(field, dto, 'create');
    stampCreated(field, who);
    const record = await this.transactions.run(async (tx) => {
      let saved: Field;
      if (dto.alias) saved = await this.fields.insert(Object.assign(field, { alias: dto.alias }), tx);
      else {
        const raw = aliasFrom(field.label, '_', 'field');
        const base = /^[a-z]/.test(raw) ? raw : `field_${raw}`.slice(0, 64);
        saved = await withGeneratedAlias(
          base,
          // Names of built-in object members are never aliases (their values could not be sent).
          new Set([...(await this.fields.aliasesLike(object, base, tx)), ...RESERVED_PROPERTY_NAMES]),
          // A savepoint, so a taken alias does not abort the transaction.
          (alias) => this.transactions.run((s) => this.fields.insert(Object.assign(field, { alias }), s), tx),
          (e) => isUniqueViolation(e, 'fields_object_alias_uq'),
        );
      }
      const created = await this.recordIn(saved.id, tx);
      await this.events.record(tx, 'field.created', created);
      return created;
    });
    this.contactValues.invalidate();
    return record;
  }

  /** The record of a field written in `tx` (for its event). */
  private async recordIn(id: number, tx: Tx): Promise<FieldRecord> {
    const f = await this.fields.find(id, tx);
    if (!f) throw notFound('Field', id);
    return this.toRecord(f);
  }

  /** PATCH: reads the field under a lock, so concurrent edits of different properties all survive. */
  async patch(id: number, dto: UpdateFieldDto, who: Principal, pathObject?: FieldObject): Promise<FieldRecord> {
    await this.transactions.run(async (tx) => {
      const field = await this.findEntity(id, pathObject, tx);
      const before = this.toRecord(field);
      await this.change(field, dto, 'patch', who, pathObject, tx);
      await this.events.recordUpdate(tx, 'field.updated', before, await this.recordIn(id, tx));
    });
    this.contactValues.invalidate();
    return this.get(id);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset, alias kept), else a new field. */
  async put(id: number, dto: FieldInObjectBodyDto, who: Principal, pathObject?: FieldObject): Promise<{ created: boolean; field: FieldRecord }> {
    const replaced = await this.transactions.run(async (tx) => {
      const existing = await this.fields.lock(id, tx);
      if (!existing || (pathObject && existing.object !== pathObject)) return false;
      const before = this.toRecord(existing);
      await this.change(existing, dto, 'replace', who, pathObject, tx);
      await this.events.recordUpdate(tx, 'field.updated', before, await this.recordIn(id, tx));
      return true;
    });
    if (!replaced) return { created: true, field: await this.create(dto, who, pathObject) };
    this.contactValues.invalidate();
    return { created: false, field: await this.get(id) };
  }

  /**
   * Deletes the field and its value in every contact (or company, for a company field), in one transaction. The
   * row lock makes concurrent deletes wait: exactly one gets the field, the others a 404.
   */
  async remove(id: number, pathObject?: FieldObject): Promise<FieldRecord> {
    const removed = await this.transactions.run(async (tx) => {
      const field = await this.findEntity(id, pathObject, tx);
      const record = this.toRecord(field);
      await this.fields.delete(id, tx);
      await this.contactValueRows.removeKey(field.alias, tx, field.object);
      await this.events.record(tx, 'field.deleted', record);
      return record;
    });
    this.contactValues.invalidate();
    return removed;
  }

  /**
   * Applies a PATCH or PUT body to a locked field and saves it with what depends on it: the rename of
   * contact values when the alias changes, and the checks against contacts' stored values.
   */
  private async change(field: Field, dto: UpdateFieldDto, mode: 'patch' | 'replace', who: Principal, pathObject: FieldObject | undefined, tx: Tx) {
    const before = Object.assign(new Field(), field);
    this.checkObject(field, dto.object, pathObject);
    this.assign(field, dto, mode);
    if (dto.alias) field.alias = dto.alias;
    stampModified(field, who);
    const object = field.object;
    const holders = object === 'contact' ? 'contacts' : 'companies';
    if (field.type !== before.type && (await this.contactValueRows.anyHolds(before.alias, tx, object))) {
      throw new AppError('conflict', `The type of field "${before.alias}" cannot change while ${holders} hold values for it`, [
        { field: 'type', message: `cannot change while ${holders} hold values for the field` },
      ]);
    }
    await this.fields.update(field, tx);
    // Record rows are locked (by the rename) before the unique-value lock, the order record writes take them in.
    if (before.alias !== field.alias) await this.contactValueRows.renameKey(before.alias, field.alias, tx, object);
    if (field.isUniqueIdentifier && !before.isUniqueIdentifier) {
      await this.contactValueRows.lockUniqueValues(field.alias, tx, object);
      const shared = await this.contactValueRows.sharedValue(field.alias, tx, object);
      if (shared !== undefined) {
        throw conflict(
          `${holders[0].toUpperCase()}${holders.slice(1)} share the value ${JSON.stringify(shared)} of field "${before.alias}", so it cannot be a unique identifier`,
          [{ field: 'isUniqueIdentifier', message: `${holders} already share a value of this field` }],
        );
      }
    }
  }

  private checkObject(field: Field, given: FieldObject | null | undefined, pathObject?: FieldObject) {
    if (given === undefined || given === null || given === field.object) return;
    if (pathObject) throw fieldError('object', `must match the object in the path (${pathObject})`);
    throw fieldError('object', `cannot be changed after creation (the field belongs to ${field.object})`);
  }

  /** Copies a body onto the entity and checks the result as a whole (type, properties, default, window). */
  private assign(f: Field, dto: UpdateFieldDto, mode: Mode) {
    const errors: ErrorDetail[] = [];
    const has = (k: keyof UpdateFieldDto) => dto[k] !== undefined;
    const take = <K extends keyof UpdateFieldDto, V>(k: K, fallback: V, apply: (v: NonNullable<UpdateFieldDto[K]> | V) => void) => {
      if (dto[k] !== undefined && dto[k] !== null) apply(dto[k]);
      else if (mode !== 'patch' || dto[k] === null) apply(fallback);
    };
    for (const k of ['label', 'type', 'order', 'isRequired', 'isPubliclyUpdatable', 'isUniqueIdentifier', 'isPublished'] as const) {
      if (dto[k] === null) errors.push({ field: k, message: 'must not be null' });
    }
    if (mode !== 'patch' && dto.label === undefined) errors.push({ field: 'label', message: 'is required' });
    if (dto.label !== undefined && dto.label !== null) {
      f.label = dto.label.trim();
      if (!f.label) errors.push({ field: 'label', message: 'must not be empty' });
    }
    const previousType = f.type;
    take('type', 'text' as const, (v) => (f.type = v));
    take('description', null, (v) => (f.description = v));
    take('group', null, (v) => (f.group = v === null ? null : v.trim() || null));
    take('order', 0, (v) => (f.order = v));
    take('defaultValue', null, (v) => (f.defaultValue = v));
    take('isRequired', false, (v) => (f.isRequired = v));
    take('isPubliclyUpdatable', false, (v) => (f.isPubliclyUpdatable = v));
    take('isUniqueIdentifier', false, (v) => (f.isUniqueIdentifier = v));
    take('isPublished', true, (v) => (f.isPublished = v));
    take('publishUp', null, (v) => (f.publishUp = v === null ? null : parseIsoWithOffset(v)));
    take('publishDown', null, (v) => (f.publishDown = v === null ? null : parseIsoWithOffset(v)));

    // properties: given → checked for the (new) type; omitted → kept when the type is unchanged,
    // else reset (a select type then needs a list).
    const source = has('properties') ? dto.properties : mode === 'patch' && previousType === f.type ? f.properties : undefined;
    const props = normalizeProperties(f.type, source);
    errors.push(...props.errors);
    f.properties = props.properties;

    if (f.defaultValue !== null && !props.errors.length) {
      const options = OPTION_TYPES.has(f.type) && !Array.isArray(f.properties) ? f.properties.list.map((o) => o.value) : null;
      const r = parseDefaultValue({ type: f.type, options }, f.defaultValue);
      if (!r.ok) errors.push({ field: 'defaultValue', message: r.message });
    }
    if (f.publishUp && f.publishDown && f.publishDown <= f.publishUp) {
      errors.push({ field: 'publishDown', message: 'must be after publishUp' });
    }
    if (errors.length) throw validationError(`Validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`, errors);
  }
}
