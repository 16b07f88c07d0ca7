import { PartialType } from '@nestjs/swagger';
import { IsEmail, IsIn, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, isEmail, Max, MaxLength, maxLength, Min } from 'class-validator';
import { changedElsewhere, NoNul } from '../common/validation.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { DNC_REASONS, type DncReason } from './contact.entity.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

export class CreateContactDto {
  /** Full name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  /** Email address; unique across contacts, case-insensitively. */
  @IsEmail({}, { message: 'email must be a valid email address' })
  @MaxLength(254)
  email: string;

  /**
   * The id a tracking client knows the contact by (its Segment `userId`): unique across contacts
   * when set (409 naming externalId); null for none.
   */
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  externalId?: string | null;

  /** Phone number; stored in E.164 when it parses (numbers without a country code are read as US numbers). */
  @IsOptional()
  @IsString()
  @MaxLength(40)
  @NoNul()
  phone?: string | null;

  /**
   * Company name (free text, kept for compatibility). When `companyId` is set and `company` is not
   * given (on create and PUT, or a PATCH that changes companyId), it becomes the company's name.
   */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  company?: string | null;

  /**
   * Id of the contact's primary company (400 naming companyId when it does not exist); null for
   * none. Clearing it leaves `company` as it is.
   */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('company')
  companyId?: number | null;

  /** Job title. */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  title?: string | null;

  /** Id of the user the contact is assigned to; the user gets a `lead_assigned` notification. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('user')
  ownerId?: number | null;

  /**
   * Custom field values by field alias, checked against the published contact fields (unknown alias,
   * wrong type, option value not in the list, missing required field: 400 naming `fields.<alias>`;
   * a unique-identifier value another contact holds: 409). On create and PUT, omitted fields take
   * their default value; on PATCH the object is merged into the current values and a key with null
   * removes that value (not allowed for required fields).
   */
  @IsOptional()
  @IsObject({ message: 'fields must be an object of custom field values by alias' })
  @Rule('keys are aliases of published custom fields of the object, each value valid for its field type and options; required fields must be given')
  fields?: Record<string, unknown> | null;
}

/** PATCH body: any subset of the create properties. */
export class UpdateContactDto extends PartialType(CreateContactDto) {}

// Points are the sum of the point ledger, changed only by POST /api/contacts/{id}/points (and scoring): a body carrying them is a 400 naming that route.
changedElsewhere([CreateContactDto, UpdateContactDto], 'points', 'POST /api/contacts/{id}/points');

/** The properties of CreateContactDto (and so of UpdateContactDto): a body with any other key is left to the pipe. */
const CONTACT_BODY_KEYS = new Set(['name', 'email', 'externalId', 'phone', 'company', 'companyId', 'title', 'ownerId', 'fields']);

/** A string property as its decorators take it: IsString, MaxLength(max), NoNul (and IsNotEmpty when `notEmpty`). */
const goodString = (v: unknown, max: number, notEmpty = false): boolean =>
  typeof v === 'string' && (!notEmpty || v !== '') && maxLength(v, max) && !v.includes('\u0000');
/** IsInt, Min(1), Max(2147483647). */
const goodId = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 2147483647;
const absent = (v: unknown): boolean => v === undefined || v === null;

/**
 * The set-based batch and import path's check of a contact body (bench/batch.mjs, bench/imports.mjs):
 * answers the body as the DTO when it certainly passes the validation pipe for CreateContactDto
 * (`create`) or UpdateContactDto, checking each property with the same class-validator functions its
 * decorators call, and null for anything else, which the caller then hands to the pipe itself (so
 * every error a body gets is still the pipe's own). Conservative on purpose: a body with another
 * key, a null name or email on update, a custom field value that is not a scalar or an array of
 * scalars, goes to the pipe even when it may be valid. Per row it costs a fraction of the pipe
 * (class-transformer's copy and class-validator's metadata walk).
 */
export function certainContactBody(body: Record<string, unknown>, create: true): CreateContactDto | null;
export function certainContactBody(body: Record<string, unknown>, create: false): UpdateContactDto | null;
export function certainContactBody(body: Record<string, unknown>, create: boolean): CreateContactDto | UpdateContactDto | null {
  if (!isPlainObject(body)) return null;
  for (const k of Object.keys(body)) if (!CONTACT_BODY_KEYS.has(k)) return null;
  const { name, email, externalId, phone, company, companyId, title, ownerId, fields } = body;
  if (create || name !== undefined) {
    if (!goodString(name, 255, true)) return null;
  }
  if (create || email !== undefined) {
    if (typeof email !== 'string' || !isEmail(email, {}) || !maxLength(email, 254)) return null;
  }
  if (!absent(externalId) && !goodString(externalId, 255, true)) return null;
  if (!absent(phone) && !goodString(phone, 40)) return null;
  if (!absent(company) && !goodString(company, 255)) return null;
  if (!absent(title) && !goodString(title, 255)) return null;
  if (!absent(companyId) && !goodId(companyId)) return null;
  if (!absent(ownerId) && !goodId(ownerId)) return null;
  if (!absent(fields)) {
    if (!isPlainObject(fields)) return null;
    for (const [k, v] of Object.entries(fields)) {
      if (k === '__proto__' || !(scalar(v) || (Array.isArray(v) && v.every(scalar)))) return null;
    }
  }
  return body;
}

/** An object literal or a parsed JSON object (of any realm), not an array or a class instance. */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

function scalar(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** A user a contact is assigned to. */
export class OwnerRefDto {
  id: number;
  name: string | null;
}

/** The company a contact belongs to. */
export class CompanyRefDto {
  id: number;
  name: string;
}

/** A point group a contact is in. */
export class ContactPointGroupDto {
  id: number;
  name: string;
  /** `#rrggbb`, or null. */
  color: string | null;
}

/** A do-not-contact entry of one channel. */
export class DoNotContactEntryDto {
  /** unsubscribed (the contact replied STOP, or was unsubscribed), bounced or manual. */
  reason: string;
  /** Since when (ISO 8601). */
  since: string;
  /** A note, when one was given. */
  comment: string | null;
}

export class DoNotContactDto {
  /** Text messages: single sends to the contact's number are refused (409) and broadcasts skip it. */
  sms: DoNotContactEntryDto | null;
}

/** POST /api/contacts/{id}/dnc/sms body. */
export class SetDoNotContactDto {
  /** Why the contact must not be texted. */
  @IsString()
  @IsIn(DNC_REASONS)
  reason: DncReason;

  /** A note (up to 1000 characters); null or omitted for none. */
  @IsOptional()
  @IsString()
  @MaxLength(1000)
  @NoNul()
  comment?: string | null;
}

/** A contact as the API returns it. */
export class ContactRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  /** Null only for a contact created by the tracking intake from a userId alone. */
  email: string | null;
  /** The id a tracking client knows the contact by (Segment's userId), or null. */
  externalId: string | null;
  /** E.164 when the number parsed. */
  phone: string | null;
  /** The company name as free text (compatibility); see companyRef for the company record. */
  company: string | null;
  /** The primary company's id. */
  companyId: number | null;
  /** The primary company, or null. */
  companyRef: CompanyRefDto | null;
  title: string | null;
  ownerId: number | null;
  owner: OwnerRefDto | null;
  /** Custom field values by field alias. */
  fields: Record<string, unknown>;
  /** The lead score: the sum of the contact's point ledger (GET /api/contacts/{id}/points/history); changed by POST /api/contacts/{id}/points and scoring rules. */
  points: number;
  /** The published point groups whose range holds the contact's points (its tiers), in id order. */
  pointGroups: ContactPointGroupDto[];
  /** Do-not-contact entries by channel (null: the contact may be contacted on that channel). */
  doNotContact: DoNotContactDto;
}
