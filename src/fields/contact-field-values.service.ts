import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { conflict, validationError } from '../common/errors.js';
import { applyCustomValues, ContactFieldRule, FieldOption, FieldType, ValuesMode } from './field-rules.js';
import { UNIQUE_VALUE_LOCK } from './fields.service.js';

/**
 * Custom field values of contacts (`contact.fields`): checks a request's values against the
 * published contact fields, and keeps unique-identifier values unique. ContactsService calls this.
 */
@Injectable()
export class ContactFieldValuesService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Published contact fields: isPublished and inside their publishUp/publishDown window. */
  async publishedRules(manager?: EntityManager): Promise<ContactFieldRule[]> {
    const rows: {
      alias: string;
      type: FieldType;
      properties: { list?: FieldOption[] } | unknown[];
      is_required: boolean;
      is_unique_identifier: boolean;
      default_value: string | null;
    }[] = await (manager ?? this.db).query(
      `SELECT alias, type, properties, is_required, is_unique_identifier, default_value FROM fields
       WHERE object = 'contact' AND is_published
         AND (publish_up IS NULL OR publish_up <= now()) AND (publish_down IS NULL OR publish_down > now())
       ORDER BY field_order, id`,
    );
    return rows.map((r) => ({
      alias: r.alias,
      type: r.type,
      options: !Array.isArray(r.properties) && Array.isArray(r.properties?.list) ? r.properties.list.map((o) => o.value) : null,
      isRequired: r.is_required,
      isUniqueIdentifier: r.is_unique_identifier,
      defaultValue: r.default_value,
    }));
  }

  /**
   * The contact's new custom values (400 with a `fields.<alias>` detail per problem), and the
   * unique-identifier aliases whose value changed, to check with assertUnique when saving.
   */
  async apply(
    current: Record<string, unknown>,
    input: Record<string, unknown> | null | undefined,
    mode: ValuesMode,
  ): Promise<{ values: Record<string, unknown>; unique: string[] }> {
    if (mode === 'patch' && input === undefined) return { values: current, unique: [] };
    const rules = await this.publishedRules();
    const { values, changed, errors } = applyCustomValues(rules, current, input, mode);
    if (errors.length) throw validationError(`Invalid custom field values: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
    const uniqueAliases = new Set(rules.filter((r) => r.isUniqueIdentifier).map((r) => r.alias));
    return { values, unique: changed.filter((a) => uniqueAliases.has(a)).sort() };
  }

  /**
   * Inside the transaction that saves the contact: takes the per-field advisory lock (in alias order,
   * so concurrent writers cannot deadlock) and refuses a value another contact already holds (409).
   * The lock is held until commit, so two concurrent requests with the same value cannot both pass.
   */
  async assertUnique(m: EntityManager, contactId: number | null, values: Record<string, unknown>, aliases: string[]): Promise<void> {
    for (const alias of aliases) {
      await m.query(`SELECT ${UNIQUE_VALUE_LOCK}`, [alias]);
      const value = JSON.stringify(values[alias]);
      const rows: { id: number }[] = await m.query(
        `SELECT id FROM contacts WHERE fields @> jsonb_build_object($1::text, $2::jsonb) AND fields -> $1::text = $2::jsonb AND id <> $3 LIMIT 1`,
        [alias, value, contactId ?? 0],
      );
      if (rows.length) {
        throw conflict(`Another contact already has the value ${value} in the unique field "${alias}"`, [
          { field: `fields.${alias}`, message: 'is already taken', existingId: rows[0].id },
        ]);
      }
    }
  }
}
