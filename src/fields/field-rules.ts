/**
 * The rules of custom fields that need no database: allowed types, the shape of `properties`, and
 * how a value of each type is checked and normalized (contact values and field default values).
 * Pure logic, unit-tested in field-rules.spec.ts.
 */
import { isEmail, isURL } from 'class-validator';
import { isCalendarDate, iso, parseIsoWithOffset } from '../common/dates.js';
import { MAX_PHONE_LENGTH, toE164 } from '../common/phone.js';
import type { ErrorDetail } from '../common/errors.js';

export const FIELD_OBJECTS = ['contact', 'company'] as const;
export type FieldObject = (typeof FIELD_OBJECTS)[number];

export const FIELD_TYPES = [
  'text',
  'textarea',
  'email',
  'number',
  'tel',
  'url',
  'date',
  'datetime',
  'boolean',
  'select',
  'multiselect',
  'country',
  'locale',
  'timezone',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** Types whose values come from `properties.list`. */
export const OPTION_TYPES: ReadonlySet<FieldType> = new Set(['select', 'multiselect']);

export const MAX_OPTIONS = 500;
export const MAX_OPTION_LENGTH = 255;
export const MAX_TEXT_LENGTH = 255;
export const MAX_TEXTAREA_LENGTH = 65535;
export const MAX_URL_LENGTH = 2048;

/** A client-given alias: starts with a letter, then lower-case letters, digits and underscores. */
export const FIELD_ALIAS_PATTERN = /^[a-z][a-z0-9_]*$/;

export interface FieldOption {
  label: string;
  value: string;
}

/** `properties` as stored and returned: `{ list }` for select/multiselect, else `[]`. */
export type FieldProperties = { list: FieldOption[] } | never[];

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks `properties` for a field type and returns the stored form. select/multiselect need
 * `{ list: [{ label, value }, ...] }` with at least one option and distinct values; every other type
 * takes an empty array or object (or nothing) and is stored as `[]`.
 */
export function normalizeProperties(type: FieldType, raw: unknown): { properties: FieldProperties; errors: ErrorDetail[] } {
  const errors: ErrorDetail[] = [];
  if (!OPTION_TYPES.has(type)) {
    const empty = raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0) || (isPlainObject(raw) && Object.keys(raw).length === 0);
    if (!empty) errors.push({ field: 'properties', message: `must be empty ([] or {}) for ${type} fields` });
    return { properties: [], errors };
  }
  if (!isPlainObject(raw) || !('list' in raw)) {
    errors.push({ field: 'properties.list', message: `is required for ${type} fields: an array of { label, value } with at least one option` });
    return { properties: [], errors };
  }
  for (const key of Object.keys(raw)) {
    if (key !== 'list') errors.push({ field: `properties.${key}`, message: 'is not a known property' });
  }
  const list = raw.list;
  if (!Array.isArray(list) || list.length === 0) {
    errors.push({ field: 'properties.list', message: 'must be an array of { label, value } with at least one option' });
    return { properties: [], errors };
  }
  if (list.length > MAX_OPTIONS) {
    errors.push({ field: 'properties.list', message: `must have at most ${MAX_OPTIONS} options` });
    return { properties: [], errors };
  }
  const seen = new Set<string>();
  const out: FieldOption[] = [];
  list.forEach((item, i) => {
    const at = `properties.list[${i}]`;
    if (!isPlainObject(item)) {
      errors.push({ field: at, message: 'must be an object { label, value }' });
      return;
    }
    for (const key of Object.keys(item)) {
      if (key !== 'label' && key !== 'value') errors.push({ field: `${at}.${key}`, message: 'is not a known property' });
    }
    for (const key of ['label', 'value'] as const) {
      const v = item[key];
      if (typeof v !== 'string' || v.trim() === '') errors.push({ field: `${at}.${key}`, message: 'must be a non-empty string' });
      else if (v.length > MAX_OPTION_LENGTH || v.includes('\u0000')) {
        errors.push({ field: `${at}.${key}`, message: `must be at most ${MAX_OPTION_LENGTH} characters, without NUL` });
      }
    }
    if (typeof item.value === 'string' && typeof item.label === 'string') {
      if (seen.has(item.value)) errors.push({ field: `${at}.value`, message: `duplicates the option value "${item.value}"` });
      seen.add(item.value);
      out.push({ label: item.label, value: item.value });
    }
  });
  return { properties: errors.length ? [] : { list: out }, errors };
}

/** What a value check needs to know about a field. */
export interface ValueRule {
  type: FieldType;
  /** Allowed option values (select/multiselect), else null. */
  options: readonly string[] | null;
}

export type ValueResult = { ok: true; value: unknown } | { ok: false; message: string };

const ok = (value: unknown): ValueResult => ({ ok: true, value });
const bad = (message: string): ValueResult => ({ ok: false, message });

const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });
/** Region codes Intl knows that are not countries. */
const NOT_COUNTRIES = new Set(['ZZ', 'QO', 'EU', 'EZ', 'UN']);

function textOf(raw: unknown, max: number): string | null {
  if (typeof raw !== 'string' || raw.length > max || raw.includes('\u0000')) return null;
  return raw;
}

/**
 * Checks one custom field value (as sent in JSON) against its field and returns the stored form:
 * numbers and booleans as JSON numbers/booleans, phone numbers in E.164, date-times in the API's
 * ISO form, countries as upper-case ISO 3166-1 alpha-2 codes, locales and time zones canonical.
 */
export function parseValue(rule: ValueRule, raw: unknown): ValueResult {
  switch (rule.type) {
    case 'text': {
      const s = textOf(raw, MAX_TEXT_LENGTH);
      return s === null ? bad(`must be a string of at most ${MAX_TEXT_LENGTH} characters`) : ok(s);
    }
    case 'textarea': {
      const s = textOf(raw, MAX_TEXTAREA_LENGTH);
      return s === null ? bad(`must be a string of at most ${MAX_TEXTAREA_LENGTH} characters`) : ok(s);
    }
    case 'email': {
      const s = textOf(raw, 254);
      return s !== null && isEmail(s.trim()) ? ok(s.trim()) : bad('must be a valid email address');
    }
    case 'url': {
      const s = textOf(raw, MAX_URL_LENGTH);
      return s !== null && isURL(s.trim(), { protocols: ['http', 'https'], require_protocol: true }) ? ok(s.trim()) : bad('must be an http(s) URL');
    }
    case 'tel': {
      const s = textOf(raw, MAX_PHONE_LENGTH);
      const e164 = s !== null ? toE164(s) : null;
      return e164 !== null ? ok(e164) : bad('must be a valid phone number, e.g. +14155550100');
    }
    case 'number':
      return typeof raw === 'number' && Number.isFinite(raw) ? ok(raw) : bad('must be a number');
    case 'boolean':
      return typeof raw === 'boolean' ? ok(raw) : bad('must be true or false');
    case 'date':
      return isCalendarDate(raw) ? ok(raw) : bad('must be a date in the form YYYY-MM-DD');
    case 'datetime': {
      const d = typeof raw === 'string' ? parseIsoWithOffset(raw) : null;
      return d ? ok(iso(d)) : bad('must be an ISO 8601 date-time with an offset, e.g. 2026-11-21T10:15:00+00:00');
    }
    case 'select': {
      const options = rule.options ?? [];
      return typeof raw === 'string' && options.includes(raw) ? ok(raw) : bad(`must be one of the option values: ${options.join(', ')}`);
    }
    case 'multiselect': {
      const options = rule.options ?? [];
      if (!Array.isArray(raw) || !raw.every((v) => typeof v === 'string' && options.includes(v))) {
        return bad(`must be an array of option values (${options.join(', ')})`);
      }
      return ok([...new Set(raw as string[])]);
    }
    case 'country': {
      const code = typeof raw === 'string' ? raw.trim().toUpperCase() : '';
      return /^[A-Z]{2}$/.test(code) && !NOT_COUNTRIES.has(code) && regionNames.of(code) !== undefined
        ? ok(code)
        : bad('must be an ISO 3166-1 alpha-2 country code, e.g. US');
    }
    case 'locale': {
      const s = textOf(raw, 64);
      if (s === null || s.trim() === '') return bad('must be a locale code, e.g. en-US');
      try {
        return ok(Intl.getCanonicalLocales(s.trim().replace(/_/g, '-'))[0]);
      } catch {
        return bad('must be a locale code, e.g. en-US');
      }
    }
    case 'timezone': {
      const s = textOf(raw, 64);
      if (s === null || s.trim() === '') return bad('must be an IANA time zone, e.g. Europe/Paris');
      try {
        return ok(new Intl.DateTimeFormat('en', { timeZone: s.trim() }).resolvedOptions().timeZone);
      } catch {
        return bad('must be an IANA time zone, e.g. Europe/Paris');
      }
    }
  }
}

/**
 * A field's `defaultValue` is a string; this reads it as a value of the field's type: numbers as
 * decimal text, booleans as true/false/1/0, multiselect as option values separated by `|`.
 */
export function parseDefaultValue(rule: ValueRule, raw: string): ValueResult {
  switch (rule.type) {
    case 'number': {
      const t = raw.trim();
      return /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(t) && Number.isFinite(Number(t)) ? ok(Number(t)) : bad('must be a number for number fields');
    }
    case 'boolean': {
      const t = raw.trim().toLowerCase();
      if (t === 'true' || t === '1') return ok(true);
      if (t === 'false' || t === '0') return ok(false);
      return bad('must be true, false, 1 or 0 for boolean fields');
    }
    case 'multiselect':
      return parseValue(
        rule,
        raw
          .split('|')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
      );
    default:
      return parseValue(rule, raw);
  }
}

/** What applying contact values needs to know about a published contact field. */
export interface ContactFieldRule extends ValueRule {
  alias: string;
  isRequired: boolean;
  isUniqueIdentifier: boolean;
  defaultValue: string | null;
}

/** create: a new contact; replace: PUT over an existing one; patch: merge into the current values. */
export type ValuesMode = 'create' | 'replace' | 'patch';

const isMissing = (v: unknown) => v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0);

/**
 * Applies a request's `fields` to a record's current custom values (a contact's, or with `object`
 * company, a company's).
 * - Unknown (or unpublished) aliases are refused, each as `fields.<alias>`.
 * - create/replace: the published fields' values are the given ones (omitted ones take the field's
 *   default value); values of unpublished fields are kept as they are. Required fields must end up
 *   with a value.
 * - patch: the given values are merged in; a key with null removes that value; `input` null removes
 *   every published field's value. A required field cannot be cleared.
 * Returns the new values, the aliases whose value changed to a non-empty value (for uniqueness
 * checks), and every problem found.
 */
export function applyCustomValues(
  rules: readonly ContactFieldRule[],
  current: Readonly<Record<string, unknown>>,
  input: Readonly<Record<string, unknown>> | null | undefined,
  mode: ValuesMode,
  object: FieldObject = 'contact',
): { values: Record<string, unknown>; changed: string[]; errors: ErrorDetail[] } {
  const byAlias = new Map(rules.map((r) => [r.alias, r]));
  const errors: ErrorDetail[] = [];
  const values: Record<string, unknown> = {};
  const cleared = new Set<string>();
  for (const [k, v] of Object.entries(current ?? {})) {
    if (mode === 'patch' || !byAlias.has(k)) values[k] = v;
  }
  if (input === null) {
    for (const alias of byAlias.keys()) {
      delete values[alias];
      cleared.add(alias);
    }
  } else if (input !== undefined) {
    for (const [k, v] of Object.entries(input)) {
      const rule = byAlias.get(k);
      if (!rule) {
        errors.push({ field: `fields.${k}`, message: `is not a published ${object} field` });
        continue;
      }
      if (v === null) {
        delete values[k];
        cleared.add(k);
        continue;
      }
      const r = parseValue(rule, v);
      if (r.ok) values[k] = r.value;
      else errors.push({ field: `fields.${k}`, message: r.message });
    }
  }
  if (mode !== 'patch') {
    for (const rule of rules) {
      if (rule.defaultValue === null || (input && Object.prototype.hasOwnProperty.call(input, rule.alias))) continue;
      const r = parseDefaultValue(rule, rule.defaultValue);
      if (r.ok) values[rule.alias] = r.value;
    }
  }
  for (const rule of rules) {
    if (!rule.isRequired || errors.some((e) => e.field === `fields.${rule.alias}`)) continue;
    if (mode !== 'patch' && isMissing(values[rule.alias])) errors.push({ field: `fields.${rule.alias}`, message: 'is required' });
    if (mode === 'patch' && (cleared.has(rule.alias) || (input && Object.prototype.hasOwnProperty.call(input, rule.alias))) && isMissing(values[rule.alias])) {
      errors.push({ field: `fields.${rule.alias}`, message: 'is required and cannot be cleared' });
    }
  }
  const changed = rules
    .filter((r) => !isMissing(values[r.alias]) && JSON.stringify(values[r.alias]) !== JSON.stringify(current?.[r.alias]))
    .map((r) => r.alias);
  return { values, changed, errors };
}

/**
 * Advisory-lock key space for "values of this field are unique" (FieldsService and
 * ContactFieldValuesService); $1 is uniqueLockKey(object, alias).
 */
export const UNIQUE_VALUE_LOCK = `pg_advisory_xact_lock(hashtext('sf:contact-field-unique'), hashtext($1))`;

/** The key of a field's uniqueness lock: the alias for contact fields (as before companies existed), `company:<alias>` for company fields. */
export const uniqueLockKey = (object: FieldObject, alias: string): string => (object === 'contact' ? alias : `${object}:${alias}`);
