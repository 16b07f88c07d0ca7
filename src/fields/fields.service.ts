import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError, Repository } from 'typeorm';
import { aliasFrom, firstFreeAlias } from '../common/alias.js';
import { stampCreated, stampModified } from '../common/audit.js';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { AppError, conflict, type ErrorDetail, fieldError, notFound, validationError } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { Field } from './field.entity.js';
import { FieldInObjectBodyDto, UpdateFieldDto } from './field.dto.js';
import { FIELD_OBJECTS, FIELD_TYPES, type FieldObject, normalizeProperties, OPTION_TYPES, parseDefaultValue, UNIQUE_VALUE_LOCK } from './field-rules.js';
import { ContactFieldValuesService } from './contact-field-values.service.js';

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
  sortable: SORTABLE,
  searchExpression: SEARCH,
  filters: {
    isPublished: { type: 'boolean', column: 'f.is_published' },
    type: { type: 'string', column: 'f.type', values: FIELD_TYPES },
  },
};

/** The collection-style list `/api/fields`: both objects, with an `object` filter. */
export const FIELD_COLLECTION_LIST_SPEC: ListSpec = {
  ...FIELD_LIST_SPEC,
  filters: { ...FIELD_LIST_SPEC.filters, object: { type: 'string', column: 'f.object', values: FIELD_OBJECTS } },
};


export type FieldRecord = ReturnType<FieldsService['toRecord']>;
type Mode = 'create' | 'replace' | 'patch';

export const isFieldObject = (v: string): v is FieldObject => (FIELD_OBJECTS as readonly string[]).includes(v);

@Injectable()
export class FieldsService {
  constructor(
    @InjectRepository(Field) private readonly fields: Repository<Field>,
    @InjectDataSource() private readonly db: DataSource,
    private readonly contactValues: ContactFieldValuesService,
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
      isUniqueIdentifier: f.isUniqueIdentifier === true,
      properties: empty ? [] : props,
    };
  }

  /** `object` given: the path-style list of that object; omitted: the collection-style list of both. */
  async list(query: Record<string, unknown>, object?: FieldObject) {
    const spec = object ? FIELD_LIST_SPEC : FIELD_COLLECTION_LIST_SPEC;
    const q = parseListQuery(query, spec);
    const qb = this.fields.createQueryBuilder('f');
    if (object) qb.andWhere('f.object = :object', { object });
    const { total, items } = await paginate(qb, q, spec);
    return { total, fields: items.map((f) => this.toRecord(f)) };
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

  private async findEntity(id: number, object?: FieldObject, manager?: EntityManager): Promise<Field> {
    const f = await (manager ? manager.getRepository(Field) : this.fields).findOne({ where: { id } });
    if (!f || (object && f.object !== object)) throw notFound(object ? `${object[0].toUpperCase()}${object.slice(1)} field` : 'Field', id);
    return f;
  }

  async get(id: number, object?: FieldObject): Promise<FieldRecord> {
    return this.toRecord(await this.findEntity(id, object));
  }

  async create(dto: FieldInObjectBodyDto, who: Principal, pathObject?: FieldObject): Promise<FieldRecord> {
    if (pathObject && dto.object !== undefined && dto.object !== null && dto.object !== pathObject) {
      throw fieldError('object', `must match the object in the path (${pathObject})`);
    }
    const object = pathObject ?? dto.object;
    if (!object) throw fieldError('object', 'is required');
    const field = this.fields.create({ object });
    this.assign(field, dto, 'create');
    stampCreated(field, who);
    return this.persist(field, 'create', null, dto.alias ?? null);
  }

  async patch(id: number, dto: UpdateFieldDto, who: Principal, pathObject?: FieldObject): Promise<FieldRecord> {
    const field = await this.findEntity(id, pathObject);
    const before = { ...field };
    this.checkObject(field, dto.object, pathObject);
    this.assign(field, dto, 'patch');
    stampModified(field, who);
    return this.persist(field, 'patch', before, dto.alias ?? null);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset, alias kept), else a new field. */
  async put(id: number, dto: FieldInObjectBodyDto, who: Principal, pathObject?: FieldObject): Promise<{ created: boolean; field: FieldRecord }> {
    const existing = await this.fields.findOne({ where: { id } });
    if (!existing || (pathObject && existing.object !== pathObject)) {
      return { created: true, field: await this.create(dto, who, pathObject) };
    }
    const before = { ...existing };
    this.checkObject(existing, dto.object, pathObject);
    this.assign(existing, dto, 'replace');
    stampModified(existing, who);
    return { created: false, field: await this.persist(existing, 'replace', before, dto.alias ?? null) };
  }

  /** Deletes the field and, for a contact field, its value in every contact, in one transaction. */
  async remove(id: number, pathObject?: FieldObject): Promise<FieldRecord> {
    const removed = await this.db.transaction(async (m) => {
      const field = await this.findEntity(id, pathObject, m);
      const record = this.toRecord(field);
      await m.getRepository(Field).delete({ id });
      if (field.object === 'contact') {
        await m.query(`UPDATE contacts SET fields = fields - $1::text WHERE fields ? $1::text`, [field.alias]);
      }
      return record;
    });
    this.contactValues.invalidate();
    return removed;
  }

  private checkObject(field: Field, given: FieldObject | null | undefined, pathObject?: FieldObject) {
    if (given === undefined || given === null || given === field.object) return;
    if (pathObject) throw fieldError('object', `must match the object in the path (${pathObject})`);
    throw fieldError('object', `cannot be changed after creation (the field belongs to ${field.object})`);
  }

  /** Copies a body onto the entity and checks the result as a whole (type, properties, default, window). */
  private assign(f: Field, dto: UpdateFieldDto, mode: Mode) {
    const errors: ErrorDetail[] = [];
    const has = <K extends keyof UpdateFieldDto>(k: K) => dto[k] !== undefined;
    const take = <K extends keyof UpdateFieldDto, V>(k: K, fallback: V, apply: (v: NonNullable<UpdateFieldDto[K]> | V) => void) => {
      if (dto[k] !== undefined && dto[k] !== null) apply(dto[k] as NonNullable<UpdateFieldDto[K]>);
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

  /**
   * Saves in one transaction: the alias (given, kept, or generated and made unique), the rename of
   * contact values when the alias changes, and the checks that depend on contact values.
   */
  private async persist(field: Field, mode: Mode, before: Field | null, givenAlias: string | null): Promise<FieldRecord> {
    const generate = !givenAlias && mode === 'create';
    if (givenAlias) field.alias = givenAlias;
    const base = aliasFrom(field.label, '_', 'field');
    const generatedBase = /^[a-z]/.test(base) ? base : `field_${base}`.slice(0, 64);
    for (let attempt = 0; ; attempt++) {
      try {
        const saved = await this.db.transaction(async (m) => {
          if (generate) field.alias = await this.freeAlias(m, field.object, generatedBase);
          if (before && field.object === 'contact') await this.checkContactValues(m, field, before);
          const s = await m.getRepository(Field).save(field);
          if (before && before.alias !== s.alias && s.object === 'contact') {
            await m.query(
              `UPDATE contacts SET fields = (fields - $1::text) || jsonb_build_object($2::text, fields -> $1::text) WHERE fields ? $1::text`,
              [before.alias, s.alias],
            );
          }
          return s;
        });
        this.contactValues.invalidate();
        return this.toRecord(await this.findEntity(saved.id));
      } catch (e) {
        const pg = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
        if (e instanceof QueryFailedError && pg?.code === '23505' && pg.constraint === 'fields_object_alias_uq') {
          if (generate && attempt < 5) continue;
          const rows: { id: number }[] = await this.db.query(`SELECT id FROM fields WHERE object = $1 AND alias = $2`, [field.object, field.alias]);
          throw conflict(`The ${field.object} field alias "${field.alias}" is already taken`, [
            { field: 'alias', message: 'is already taken', existingId: rows[0]?.id ?? null },
          ]);
        }
        throw e;
      }
    }
  }

  private async freeAlias(m: EntityManager, object: FieldObject, base: string): Promise<string> {
    const rows: { alias: string }[] = await m.query(
      `SELECT alias FROM fields WHERE object = $1 AND (alias = $2 OR alias LIKE $3)`,
      [object, base, `${base.replace(/_/g, '\\_')}\\_%`],
    );
    return firstFreeAlias(base, new Set(rows.map((r) => r.alias)));
  }

  /** Edits that contacts' stored values would contradict are refused with 409. */
  private async checkContactValues(m: EntityManager, field: Field, before: Field) {
    if (field.type !== before.type) {
      const used = await m.query(`SELECT 1 FROM contacts WHERE fields ? $1::text LIMIT 1`, [before.alias]);
      if (used.length) {
        throw new AppError('conflict', `The type of field "${before.alias}" cannot change while contacts hold values for it`, [
          { field: 'type', message: 'cannot change while contacts hold values for the field' },
        ]);
      }
    }
    if (field.isUniqueIdentifier && !before.isUniqueIdentifier) {
      await m.query(`SELECT ${UNIQUE_VALUE_LOCK}`, [field.alias]);
      const dup: { value: unknown }[] = await m.query(
        `SELECT fields -> $1::text AS value FROM contacts WHERE fields ? $1::text GROUP BY fields -> $1::text HAVING count(*) > 1 LIMIT 1`,
        [before.alias],
      );
      if (dup.length) {
        throw conflict(`Contacts share the value ${JSON.stringify(dup[0].value)} of field "${before.alias}", so it cannot be a unique identifier`, [
          { field: 'isUniqueIdentifier', message: 'contacts already share a value of this field' },
        ]);
      }
    }
  }
}
