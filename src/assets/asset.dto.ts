import { ApiProperty, PartialType } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsNotEmpty, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { ALIAS_MAX, ALIAS_PATTERN } from './asset-file.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

/**
 * Asset metadata. On create (multipart/form-data) these are form fields beside the file in
 * `file`: `isPublished` reads true/false/1/0, `category` a category id, and an empty
 * `description`, `category`, `publishUp` or `publishDown` clears the value. PATCH and PUT take the
 * same properties as JSON, or as multipart with a new `file`.
 */
export class CreateAssetDto {
  /** Title. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  title: string;

  @IsOptional()
  @IsString()
  @MaxLength(10000)
  @NoNul()
  description?: string | null;

  /**
   * Part of the public download URL `{base_url}/api/assets/<id>:<alias>`: lower-case letters,
   * digits, `-` and `_`; unique across assets (409 when taken). Generated from the title when
   * omitted (`-2`, `-3`, ... appended when the generated one is taken).
   */
  @IsOptional()
  @IsString()
  @MaxLength(ALIAS_MAX)
  @Matches(ALIAS_PATTERN, { message: 'alias must hold only lower-case letters, digits, "-" and "_" (e.g. price-list_2026)' })
  alias?: string;

  /** Locale code, e.g. `en` or `pt_BR`; default `en`. */
  @IsOptional()
  @IsString()
  @Matches(/^[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/, { message: 'language must be a locale code such as en, de or pt_BR' })
  @MaxLength(35)
  language?: string;

  /** Whether the download URL serves the file (inside the publishUp/publishDown window); default true. */
  @IsOptional()
  @IsBoolean()
  isPublished?: boolean;

  /** The download URL serves the file from this time on (null: no start). */
  @IsOptional()
  @IsIsoDateTime()
  publishUp?: string | null;

  /** The download URL stops serving the file at this time (null: no end); must be after publishUp. */
  @IsOptional()
  @IsIsoDateTime()
  @Rule('must be later than publishUp')
  publishDown?: string | null;

  /** Id of an existing category (400 otherwise); null for none. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('category')
  category?: number | null;
}

/** PATCH body: any subset of the create properties. */
export class UpdateAssetDto extends PartialType(CreateAssetDto) {}

/** The multipart/form-data body of an upload: the file plus the metadata form fields. */
export class AssetUploadFormDto extends CreateAssetDto {
  /** The file (required on create). Stored under a server-generated name; its type is detected from the content. */
  @ApiProperty({ type: 'string', format: 'binary' })
  file: unknown;
}

/** The multipart/form-data body of an edit: an optional new file (increments revision) and any metadata fields. */
export class AssetEditFormDto extends UpdateAssetDto {
  @ApiProperty({ type: 'string', format: 'binary', required: false })
  file?: unknown;
}

/** The category of an asset, as the asset record embeds it. */
export class AssetCategoryDto {
  id: number;
  title: string;
  alias: string;
  description: string | null;
  /** Hex colour, e.g. #4e5e9e. */
  color: string | null;
  bundle: string;
  createdByUser: string | null;
  modifiedByUser: string | null;
}

/** An asset as the API returns it. */
export class AssetRecordDto {
  id: number;
  title: string;
  description: string | null;
  alias: string;
  language: string;
  isPublished: boolean;
  publishUp: string | null;
  publishDown: string | null;
  dateAdded: string;
  createdBy: number | null;
  createdByUser: string | null;
  dateModified: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
  /** Downloads served (full downloads and ranges starting at byte 0). */
  downloadCount: number;
  /** Distinct clients (address + user agent) that downloaded the asset. */
  uniqueDownloadCount: number;
  /** 1 on upload, +1 each time the file is replaced. */
  revision: number;
  category: AssetCategoryDto | null;
  /** Extension matching the detected type (e.g. png, pdf, txt). */
  extension: string;
  /** Media type detected from the content. */
  mime: string;
  /** Size in bytes. */
  size: number;
  /** The uploaded file's name (sanitised), used in Content-Disposition. */
  originalFilename: string;
  /** Public download URL: {base_url}/api/assets/<id>:<alias>. */
  downloadUrl: string;
}
