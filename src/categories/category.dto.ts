import { ApiPropertyOptional, PartialType } from '@nestjs/swagger';
import { COLOR_PATTERN } from '../common/color.js';
import { IsIn, IsNotEmpty, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { NoNul } from '../common/validation.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank } from '../common/documented-rules.js';

/** Kinds of items a category can hold. */
export const CATEGORY_BUNDLES = ['global', 'asset', 'campaign', 'contact', 'point', 'report', 'sms'] as const;
export type CategoryBundle = (typeof CATEGORY_BUNDLES)[number];

/** A client-given category alias: lower-case letters and digits, separated by single `-` or `_`. */
export const CATEGORY_ALIAS_PATTERN = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/;

export class CreateCategoryDto {
  /** Name of the category. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  title: string;

  /**
   * URL-friendly name, unique per bundle (409 when a given alias is taken). Generated from `title`
   * when omitted (lower case, `-` separated, made unique by a `-2`, `-3`... suffix). Omitted on PUT
   * over an existing category: it keeps its alias.
   */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @Matches(CATEGORY_ALIAS_PATTERN, { message: 'alias must be lower-case letters and digits separated by single - or _' })
  alias?: string | null;

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /** A 6-digit hex colour, `#` optional (`4e5d9d` or `#4E5D9D`); returned as `#rrggbb` in lower case. */
  @ApiPropertyOptional({ pattern: COLOR_PATTERN.source })
  @IsOptional()
  @IsString()
  @MaxLength(16)
  color?: string | null;

  /** Type of items in the category. */
  @IsIn(CATEGORY_BUNDLES, { message: `bundle must be one of: ${CATEGORY_BUNDLES.join(', ')}` })
  bundle: CategoryBundle;
}

/** PATCH body: any subset of the create properties. */
export class UpdateCategoryDto extends PartialType(CreateCategoryDto) {}

/** A category as the API returns it. */
export class CategoryRecordDto extends AuditRecordDto {
  id: number;
  title: string;
  alias: string;
  description: string | null;
  /** `#rrggbb` in lower case, or null. */
  color: string | null;
  bundle: string;
}
