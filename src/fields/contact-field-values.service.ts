import { Injectable, type OnModuleInit } from '@nestjs/common';
import { RedisService } from '../redis/redis.service.js';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { conflict, validationError } from '../common/errors.js';
import { applyCustomValues, type ContactFieldRule, type FieldOption, type FieldType, UNIQUE_VALUE_LOCK, type ValuesMode } from './field-rules.js';

/**
 * Custom field values of contacts (`contact.fields`): checks a request's values against the
 * published contact fields, and keeps unique-identifier values unique. ContactsService calls this.
 */
interface FieldRow {
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

const FIELDS_CHANGED = 'fields-changed';
/** Longest a field change can go unseen by an instance that missed the broadcast (Redis down or absent). */
const CACHE_TTL_MS = 10_000;

@Injectable()
export class ContactFieldValuesService implements OnModuleInit {
  /** Every contact field definition: read once, then on change (here or, through Redis, elsewhere) or after the TTL. */
  private cache: { loadedAt: number; rows: FieldRow[] } | null = null;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly redis: RedisService,
  ) {}

  onModuleInit(): void {
    this.redis.subscribe(FIELDS_CHANGED, () => (this.cache = null));
  }

  /** Called by FieldsService after a field change commits. */
  invalidate(): void {
    this.cache = null;
    this.redis.publish(FIELDS_CHANGED, '1').catch(() => undefined);
  }

  /**
   * Published contact fields: isPublished and inside their publishUp/publishDown window (at this
   * moment). Inside a transaction (`manager`), read fresh from the database.
   */
  async publishedRules(manager?: EntityManager): Promise<ContactFieldRule[]> {
    let rows: FieldRow[];
    if (manager) rows = await this.load(manager);
    else {
      if (!this.cache || Date.now() - this.cache.loadedAt > CACHE_TTL_MS) this.cache = { loadedAt: Date.now(), rows: await this.load(this.db) };
      rows = this.cache.rows;
    }
    const now = Date.now();
    return rows
      .filter((r) => r.is_published && (!r.publish_up || new Date(r.publish_up).getTime() <= now) && (!r.publish_down || new Date(r.publish_down).getTime() > now))
      .map((r) => ({
        alias: r.alias,
        type: r.type,
        options: !Array.isArray(r.properties) && Array.isArray(r.properties?.list) ? r.properties.list.map((o) => o.value) : null,
        isRequired: r.is_required,
        isUniqueIdentifier: r.is_unique_identifier,
        defaultValue: r.default_value,
      }));
  }

  private load(q: Pick<DataSource, 'query'>): Promise<FieldRow[]> {
    return q.query(
      `SELECT alias, type, properties, is_required, is_unique_identifier, default_value, is_published, publish_up, publish_down
         FROM fields WHERE object = 'contact' ORDER BY field_order, id`,
    );
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
