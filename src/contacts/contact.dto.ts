import { PartialType } from '@nestjs/swagger';
import { IsEmail, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { NoNul } from '../common/validation.js';

export class CreateContactDto {
  /** Full name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  name: string;

  /** Email address; unique across contacts, case-insensitively. */
  @IsEmail({}, { message: 'email must be a valid email address' })
  @MaxLength(254)
  email: string;

  /** Phone number; stored in E.164 when it parses (numbers without a country code are read as US numbers). */
  @IsOptional()
  @IsString()
  @MaxLength(40)
  @NoNul()
  phone?: string | null;

  /** Company name. */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  company?: string | null;

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
  fields?: Record<string, unknown> | null;
}

/** PATCH body: any subset of the create properties. */
export class UpdateContactDto extends PartialType(CreateContactDto) {}

/** A user a contact is assigned to. */
export class OwnerRefDto {
  id: number;
  name: string | null;
}

/** A contact as the API returns it. */
export class ContactRecordDto {
  id: number;
  name: string;
  email: string;
  /** E.164 when the number parsed. */
  phone: string | null;
  company: string | null;
  title: string | null;
  ownerId: number | null;
  owner: OwnerRefDto | null;
  /** Custom field values by field alias. */
  fields: Record<string, unknown>;
  createdAt: string;
  modifiedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
}
