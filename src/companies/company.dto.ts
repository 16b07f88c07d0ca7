import { PartialType } from '@nestjs/swagger';
import { IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NoNul } from '../common/validation.js';
import { MAX_DOMAIN_INPUT } from './company.rules.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

/** Company body. An optional property sent as null (or, for text, blank) is cleared. */
export class CreateCompanyDto {
  /** Company name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  /**
   * Internet domain, unique across companies (409 with the existing company's id). Normalised:
   * lower case, without scheme, `www.`, port, path or trailing dot (`https://www.Acme.com/about` →
   * `acme.com`); internationalised names are stored in ASCII (punycode). 400 when it is not a
   * hostname with a top-level domain.
   */
  @IsOptional()
  @IsString()
  @MaxLength(MAX_DOMAIN_INPUT)
  @NoNul()
  @Rule('an internet domain name with a top-level domain, e.g. example.com (a URL is reduced to its host)')
  domain?: string | null;

  /** Phone number; stored in E.164 when it parses (numbers without a country code are read as US numbers). */
  @IsOptional()
  @IsString()
  @MaxLength(40)
  @NoNul()
  phone?: string | null;

  /** Website, an http(s) URL; `https://` is added when the scheme is missing. */
  @IsOptional()
  @IsString()
  @MaxLength(MAX_DOMAIN_INPUT)
  @NoNul()
  @Rule('an http(s) URL with a top-level domain, e.g. https://example.com (https:// is added when no scheme is given)')
  website?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  industry?: string | null;

  /** Number of employees, a whole number >= 0. */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(2147483647)
  size?: number | null;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  address1?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  address2?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  city?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  state?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(64)
  @NoNul()
  zipcode?: string | null;

  /** Country, free text (e.g. `France` or `FR`). */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  country?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /** Id of the user who owns the company (400 when the user does not exist); null for none. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('user')
  ownerId?: number | null;

  /**
   * Custom field values by field alias, checked against the published company fields exactly as
   * contact values are (unknown alias, wrong type, option not in the list, missing required field:
   * 400 naming `fields.<alias>`; a unique-identifier value another company holds: 409). On create
   * and PUT, omitted fields take their default value; on PATCH the object is merged into the current
   * values and a key with null removes that value (not allowed for required fields).
   */
  @IsOptional()
  @IsObject({ message: 'fields must be an object of custom field values by alias' })
  @Rule('keys are aliases of published custom fields of the object, each value valid for its field type and options; required fields must be given')
  fields?: Record<string, unknown> | null;
}

/** PATCH body: any subset of the create properties (name must not be null). */
export class UpdateCompanyDto extends PartialType(CreateCompanyDto) {}

/** The user who owns a company. */
export class CompanyOwnerDto {
  id: number;
  name: string | null;
}

/** A company as the API returns it. */
export class CompanyRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  domain: string | null;
  /** E.164 when the number parsed. */
  phone: string | null;
  website: string | null;
  industry: string | null;
  size: number | null;
  address1: string | null;
  address2: string | null;
  city: string | null;
  state: string | null;
  zipcode: string | null;
  country: string | null;
  description: string | null;
  ownerId: number | null;
  owner: CompanyOwnerDto | null;
  /** Custom field values by field alias. */
  fields: Record<string, unknown>;
}

/** A company backfill run (POST /api/companies/backfill, CLI companies:backfill). */
export class CompanyBackfillDto {
  id: number;
  /** queued, running, completed or failed. */
  status: string;
  /** api or cli. */
  trigger: string;
  /** Companies the run created (null until it completed). */
  companiesCreated: number | null;
  /** Contacts the run linked to a company (null until it completed). */
  contactsLinked: number | null;
  /** Why the run failed, when it did. */
  error: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}
