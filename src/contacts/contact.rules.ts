import { fieldError } from '../common/errors.js';
import { toE164 } from '../common/phone.js';
import { CONTACT_COLUMNS, type ContactRow, type ContactValues } from './contact.columns.js';
import type { UpdateContactDto } from './contact.dto.js';

/**
 * Pure rules of a contact write: how a create, PUT or PATCH body becomes the writable values. The
 * properties named here are the ones with a rule of their own; every other writable property of
 * the column map is copied as given (null when a replace omits it).
 */

/** Writable properties with a rule below (fields are the custom-field service's). */
const RULED = new Set(['name', 'email', 'phone', 'companyId', 'fields']);
const PLAIN = CONTACT_COLUMNS.writable.map((w) => w.property).filter((p) => !RULED.has(p)) as (keyof ContactValues & keyof UpdateContactDto)[];

/** The values of a contact not yet written: every writable property empty. */
export function emptyValues(): ContactValues {
  const nulls = Object.fromEntries(CONTACT_COLUMNS.writable.map((w) => [w.property, w.type === 'jsonb' ? {} : null]));
  return { ...nulls, name: '' } as ContactValues;
}

/** The writable values of a stored contact (a copy). */
export function valuesOf(r: ContactRow): ContactValues {
  return CONTACT_COLUMNS.valuesOf(r);
}

/** Copies DTO values onto the values; with `replace`, omitted optional properties are reset. */
export function assignContact(c: ContactValues, dto: UpdateContactDto, replace: boolean): ContactValues {
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
  for (const key of PLAIN) set(key, (v) => ((c as Record<string, unknown>)[key] = v ?? null));
  const previousCompanyId = c.companyId;
  set('companyId', (v) => (c.companyId = v ?? null));
  // A company set without a company name (on create and PUT, or changed by a PATCH): the name comes
  // from the company, read in the write's statement.
  c.companyFromRef = dto.companyId !== undefined && dto.companyId !== null && dto.company === undefined && (replace || dto.companyId !== previousCompanyId);
  return c;
}
