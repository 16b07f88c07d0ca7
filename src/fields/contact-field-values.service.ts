import { Injectable, type OnModuleInit } from '@nestjs/common';
import { RedisService } from '../redis/redis.service.js';
import { conflict, validationError } from '../common/errors.js';
import type { Tx } from '../database/transactions.js';
import { ContactFieldValuesRepository } from './contact-field-values.repository.js';
import { applyCustomValues, type ContactFieldRule, type FieldObject, type ValuesMode } from './field-rules.js';
import { type ContactFieldDefinition, FieldsRepository } from './fields.repository.js';

const FIELDS_CHANGED = 'fields-changed';
/** Longest a field change can go unseen by an instance that missed the broadcast (Redis down or absent). */
const CACHE_TTL_MS = 10_000;

/**
 * Custom field values of contacts (`contact.fields`) and of companies (`company.fields`, with
 * `object` company): checks a request's values against the object's published fields, and keeps
 * unique-identifier values unique. ContactsService and CompaniesService call this.
 */
@Injectable()
export class ContactFieldValuesService implements OnModuleInit {
  /** Every contact field definition: read once, then on change (here or, through Redis, elsewhere) or after the TTL. */
  private cache = new Map<FieldObject, { loadedAt: number; rows: ContactFieldDefinition[] }>();

  constructor(
    private readonly fields: FieldsRepository,
    private readonly values: ContactFieldValuesRepository,
    private readonly redis: RedisService,
  ) {}

  onModuleInit(): void {
    this.redis.subscribe(FIELDS_CHANGED, () => this.cache.clear());
  }

  /** Called by FieldsService after a field change commits. */
  invalidate(): void {
    this.cache.clear();
    this.redis.publish(FIELDS_CHANGED, '1').catch(() => undefined);
  }

  /**
   * Published fields of the object: isPublished and inside their publishUp/publishDown window (at
   * this moment). Inside a transaction (`tx`), read fresh from the database.
   */
  async publishedRules(tx?: Tx, object: FieldObject = 'contact'): Promise<ContactFieldRule[]> {
    let rows: ContactFieldDefinition[];
    if (tx) rows = await this.fields.definitions(object, tx);
    else {
      let cached = this.cache.get(object);
      if (!cached || Date.now() - cached.loadedAt > CACHE_TTL_MS) {
        cached = { loadedAt: Date.now(), rows: await this.fields.definitions(object) };
        this.cache.set(object, cached);
      }
      rows = cached.rows;
    }
    const now = Date.now();
    return rows
      .filter(
        (r) => r.is_published && (!r.publish_up || new Date(r.publish_up).getTime() <= now) && (!r.publish_down || new Date(r.publish_down).getTime() > now),
      )
      .map((r) => ({
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
    object: FieldObject = 'contact',
  ): Promise<{ values: Record<string, unknown>; unique: string[] }> {
    return (await this.prepare(input, mode, object))(current);
  }

  /**
   * Reads the published rules now and answers a function that applies `input` to a contact's
   * current values (as apply does). A read-modify-write calls this before it takes the contact's
   * row lock, so it never waits for a pool connection while holding one with the lock.
   */
  async prepare(
    input: Record<string, unknown> | null | undefined,
    mode: ValuesMode,
    object: FieldObject = 'contact',
  ): Promise<(current: Record<string, unknown>) => { values: Record<string, unknown>; unique: string[] }> {
    if (mode === 'patch' && input === undefined) return (current) => ({ values: current, unique: [] });
    const rules = await this.publishedRules(undefined, object);
    const uniqueAliases = new Set(rules.filter((r) => r.isUniqueIdentifier).map((r) => r.alias));
    return (current) => {
      const { values, changed, errors } = applyCustomValues(rules, current, input, mode, object);
      if (errors.length) throw validationError(`Invalid custom field values: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
      return { values, unique: changed.filter((a) => uniqueAliases.has(a)).sort() };
    };
  }

  /**
   * prepare() for many bodies at once (a batch's set-based path): the published rules are read once,
   * and the answer applies one body's `input` to its record's current values exactly as prepare's
   * function does (400 with a `fields.<alias>` detail per problem).
   */
  async preparer(
    mode: ValuesMode,
    object: FieldObject = 'contact',
  ): Promise<(input: Record<string, unknown> | null | undefined, current: Record<string, unknown>) => { values: Record<string, unknown>; unique: string[] }> {
    const rules = await this.publishedRules(undefined, object);
    const uniqueAliases = new Set(rules.filter((r) => r.isUniqueIdentifier).map((r) => r.alias));
    return (input, current) => {
      if (mode === 'patch' && input === undefined) return { values: current, unique: [] };
      const { values, changed, errors } = applyCustomValues(rules, current, input, mode, object);
      if (errors.length) throw validationError(`Invalid custom field values: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
      return { values, unique: uniqueAliases.size ? changed.filter((a) => uniqueAliases.has(a)).sort() : [] };
    };
  }

  /** Whether `alias` is a published unique-identifier contact field (a batch may name contacts by it). */
  async isUniqueIdentifier(alias: string): Promise<boolean> {
    return (await this.publishedRules()).some((r) => r.alias === alias && r.isUniqueIdentifier);
  }

  /** For each value (JSON text) of the unique field, the contact that holds it (those held). */
  holdersOf(alias: string, values: string[], tx?: Tx): Promise<{ key: string; id: number }[]> {
    return values.length ? this.values.holdersOf(alias, values, tx) : Promise.resolve([]);
  }

  /**
   * The default values of the object's published fields (what a record created without `fields`
   * gets), without the required-field check: for records created in bulk (the companies backfill).
   */
  async defaults(object: FieldObject = 'contact'): Promise<Record<string, unknown>> {
    return applyCustomValues(await this.publishedRules(undefined, object), {}, undefined, 'create', object).values;
  }

  /**
   * Inside the transaction that saves the contact: takes the per-field advisory lock (in alias order,
   * so concurrent writers cannot deadlock) and refuses a value another contact already holds (409).
   * The lock is held until commit, so two concurrent requests with the same value cannot both pass.
   */
  async assertUnique(tx: Tx, contactId: number | null, values: Record<string, unknown>, aliases: string[], object: FieldObject = 'contact'): Promise<void> {
    for (const alias of aliases) {
      await this.values.lockUniqueValues(alias, tx, object);
      const value = JSON.stringify(values[alias]);
      const holder = await this.values.holderOf(alias, value, contactId, tx, object);
      if (holder !== null) {
        throw conflict(`Another ${object} already has the value ${value} in the unique field "${alias}"`, [
          { field: `fields.${alias}`, message: 'is already taken', existingId: holder },
        ]);
      }
    }
  }
}
