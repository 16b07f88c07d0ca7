import { PartialType } from '@nestjs/swagger';
import { IsEmail, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
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
}

/** PATCH body: any subset of the create properties. */
export class UpdateContactDto extends PartialType(CreateContactDto) {}
