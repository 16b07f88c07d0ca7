import { ApiProperty, ApiPropertyOptional, getSchemaPath, PartialType } from '@nestjs/swagger';
import { Allow, IsBoolean, IsIn, IsInt, IsNotEmpty, IsNotIn, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { RESERVED_PROPERTY_NAMES } from '../server/request-text.middleware.js';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { FIELD_ALIAS_PATTERN, FIELD_OBJECTS, FIELD_TYPES } from './field-rules.js';
import type { FieldObject, FieldType } from './field-rules.js';
import { NotBlank, Rule } from '../common/documented-rules.js';

/** One option of a select or multiselect field. */
export class FieldOptionDto {
  /** What a person sees. */
  label: string;
  /** What is stored in a contact's value. */
  value: string;
}

/** `properties` of a select or multiselect field. Every other type takes an empty array or object. */
export class FieldPropertiesDto {
  /** At least one option; values are distinct. */
  list: FieldOptionDto[];
}

const PROPERTIES_SCHEMA = {
  description:
    'Options of the field type. select and multiselect need `{ "list": [{ "label", "value" }, ...] }` with at least one option (string label and value, values distinct); every other type takes `[]` or `{}`. Returned as `[]` when empty.',
  oneOf: [{ $ref: getSchemaPath(FieldPropertiesDto) }, { type: 'array', maxItems: 0, items: {} }],
};

/** The properties of a field body shared by every way of writing a field. */
export class FieldBodyDto {
  /** Name of the field. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  label: string;

  /**
   * Unique per object; a lower-case letter, then lower-case letters, digits and `_`. Generated from
   * `label` when omitted (made unique by a `_2`, `_3`... suffix); a given alias that is taken is a 409.
   * Omitted on PUT over an existing field: the field keeps its alias. Changing it renames the key of
   * every contact's value.
   */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @Matches(FIELD_ALIAS_PATTERN, { message: 'alias must start with a lower-case letter and contain only a-z, 0-9 and _' })
  // A custom value under such a key could not be sent (a body key named after an object member is refused).
  @IsNotIn([...RESERVED_PROPERTY_NAMES], { message: 'alias must not be the name of a built-in object member (e.g. constructor)' })
  alias?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /**
   * Field type (default `text`). It cannot be changed while contacts hold values for the field (409).
   */
  @IsOptional()
  @IsIn(FIELD_TYPES, { message: `type must be one of: ${FIELD_TYPES.join(', ')}` })
  type?: FieldType;

  /** Free-text group name, e.g. core, personal, professional. */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @NoNul()
  group?: string | null;

  /** Order number (default 0). */
  @IsOptional()
  @IsInt()
  @Min(-2147483648)
  @Max(2147483647)
  order?: number;

  /**
   * Value a new contact gets when it does not send one, written as text: numbers as decimals,
   * booleans as true/false, multiselect as option values separated by `|`. Must be a valid value of the type.
   */
  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  @Rule('a value of the field type (one of the options for select and multiselect)')
  defaultValue?: string | null;

  /** Contacts must have a value on create and PUT, and PATCH cannot clear it (default false). */
  @IsOptional()
  @IsBoolean()
  isRequired?: boolean;

  /** Whether public (untrusted) requests may change the value (default false). */
  @IsOptional()
  @IsBoolean()
  isPubliclyUpdatable?: boolean;

  /**
   * Values are unique across contacts (409 on a duplicate; default false). Turning it on while two
   * contacts share a value is a 409.
   */
  @IsOptional()
  @IsBoolean()
  isUniqueIdentifier?: boolean;

  /** Whether contacts can use the field (default true). */
  @IsOptional()
  @IsBoolean()
  isPublished?: boolean;

  /** The field is available from this time on. */
  @IsOptional()
  @IsIsoDateTime()
  publishUp?: string | null;

  /** The field is unavailable from this time on; must be after publishUp. */
  @IsOptional()
  @IsIsoDateTime()
  @Rule('must be after publishUp')
  publishDown?: string | null;

  @ApiPropertyOptional(PROPERTIES_SCHEMA)
  @Allow()
  @Rule('what the field type takes: a non-empty option list with distinct values for select and multiselect, empty ([] or {}) for every other type')
  properties?: FieldPropertiesDto | never[] | Record<string, never>;
}

/** Body under `/api/fields/<object>/...`: `object` may be omitted; when given it must match the path. */
export class FieldInObjectBodyDto extends FieldBodyDto {
  /** Must match the object in the path when given. */
  @IsOptional()
  @IsIn(FIELD_OBJECTS, { message: 'object must be contact or company' })
  @Rule('must match the object in the path; cannot be changed after creation')
  object?: FieldObject;
}

/** Body of the collection-style `POST /api/fields` and `PUT /api/fields/{id}`: `object` is required. */
export class FieldCollectionBodyDto extends FieldBodyDto {
  /** Which object uses the field. Cannot be changed after creation. */
  @IsIn(FIELD_OBJECTS, { message: 'object must be contact or company' })
  @Rule('cannot be changed after creation')
  object: FieldObject;
}

/** PATCH body: any subset of the create properties. */
export class UpdateFieldDto extends PartialType(FieldInObjectBodyDto) {}

/** A custom field as the API returns it. */
export class FieldRecordDto {
  id: number;
  isPublished: boolean;
  publishUp: string | null;
  publishDown: string | null;
  dateAdded: string;
  createdBy: number | null;
  createdByUser: string | null;
  dateModified: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
  label: string;
  alias: string;
  description: string | null;
  /** One of text, textarea, email, number, tel, url, date, datetime, boolean, select, multiselect, country, locale, timezone. */
  type: string;
  group: string | null;
  order: number;
  /** contact or company. */
  object: string;
  defaultValue: string | null;
  isRequired: boolean;
  isPubliclyUpdatable: boolean;
  isUniqueIdentifier: boolean;
  @ApiProperty(PROPERTIES_SCHEMA)
  properties: FieldPropertiesDto | never[];
}
