import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import type { ListQuery, ListSpec } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { Field } from './field.entity.js';
import type { FieldObject, FieldOption, FieldType } from './field-rules.js';

/** A contact or company field definition as the custom-value rules read it. */
export interface ContactFieldDefinition {
  alias: string;
  type: FieldType;
  properties: { list?: FieldOption[] } | unknown[];
  is_required: boolean;
  is_unique_identifier: boolean;
  default_value: string | null;
  is_published: boolean;
  publish_up: Date | null;
  publish_down: Date | null;
}

/** Every query of the `fields` table. */
@Injectable()
export class FieldsRepository {
  constructor(
    @InjectRepository(Field) private readonly fields: Repository<Field>,
    private readonly transactions: Transactions,
  ) {}

  private repo(tx?: Tx): Repository<Field> {
    return this.transactions.manager(tx).getRepository(Field);
  }

  /** A page of the list, narrowed to one object when given. */
  page(q: ListQuery, spec: ListSpec, object?: FieldObject): Promise<ListPage<Field>> {
    const qb = this.fields.createQueryBuilder('f');
    if (object) qb.andWhere('f.object = :object', { object });
    return paginate(qb, q, spec);
  }

  find(id: number, tx?: Tx): Promise<Field | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The field, locked (FOR UPDATE) until `tx` ends: every read-modify-write of a field reads through this. */
  lock(id: number, tx: Tx): Promise<Field | null> {
    return tx.getRepository(Field).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /** Inserts a new field (its alias set); a taken alias is a unique violation of fields_object_alias_uq. */
  insert(field: Field, tx?: Tx): Promise<Field> {
    return this.repo(tx).save(Object.assign(new Field(), field), { transaction: false });
  }

  /** Saves the changed columns of a field read with lock(). */
  update(field: Field, tx: Tx): Promise<Field> {
    return tx.getRepository(Field).save(field);
  }

  async delete(id: number, tx: Tx): Promise<void> {
    await tx.getRepository(Field).delete({ id });
  }

  /** Aliases of the object's fields that are `base` or `base_<something>`: a hint for the first free generated alias. */
  async aliasesLike(object: FieldObject, base: string, tx?: Tx): Promise<Set<string>> {
    const rows: { alias: string }[] = await (tx ?? this.transactions.db).query(`SELECT alias FROM fields WHERE object = $1 AND (alias = $2 OR alias LIKE $3)`, [
      object,
      base,
      `${base.replace(/_/g, '\\_')}\\_%`,
    ]);
    return new Set(rows.map((r) => r.alias));
  }

  /** Every field definition of an object (contact or company), in display order. */
  definitions(object: FieldObject, tx?: Tx): Promise<ContactFieldDefinition[]> {
    return (tx ?? this.transactions.db).query(
      `SELECT alias, type, properties, is_required, is_unique_identifier, default_value, is_published, publish_up, publish_down
         FROM fields WHERE object = $1 ORDER BY field_order, id`,
      [object],
    );
  }
}
