import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsBoolean, IsIn, IsInt, IsObject, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { EMPTY_VALUES, EXPORT_FORMATS, IMPORT_MODES, IMPORT_OBJECTS, IMPORT_STATUSES } from './import.rules.js';
import type { EmptyValues, ExportFormat, ImportMode, ImportObject, ImportStatus } from './import.rules.js';
import { References, Rule } from '../common/documented-rules.js';

/** Rows a JSON import body takes (larger imports upload a CSV file). */
export const JSON_IMPORT_MAX_ROWS = 10_000;

/** The options of an import (JSON body properties, or multipart form fields beside `file`). */
export class ImportOptionsDto {
  /** What the rows become: `contacts`, `companies` or `deals`. */
  @IsIn(IMPORT_OBJECTS)
  @ApiProperty({ enum: IMPORT_OBJECTS })
  object: ImportObject;

  /**
   * Column (CSV header, or JSON row key) → target: a writable property of the object, `id`,
   * `fields.<alias>` (a published custom field), for contacts `points` (set through the point ledger,
   * source `import`) or `ignore`. An unmapped column whose name is itself
   * a target maps to it (a file exported here imports back without a mapping); other unmapped
   * columns are ignored. In a multipart upload, a JSON object as text.
   */
  @IsOptional()
  @IsObject()
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' } })
  mapping?: Record<string, string>;

  /** `create` (every row a new record), `update` (rows name existing records by idProperty; 404 rows fail), `upsert` (update when it exists, else create). */
  @IsIn(IMPORT_MODES)
  @ApiProperty({ enum: IMPORT_MODES })
  mode: ImportMode;

  /** The property naming a row's record: `id`; contacts also `email` (their default for create and upsert) or the alias of a unique-identifier custom field. */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @Rule('id on every object; on contacts also email or the alias of a published unique-identifier contact field')
  idProperty?: string;

  /** An empty cell: `ignore` (the default: the property is left as it is) or `clear` (set to null). */
  @IsOptional()
  @IsIn(EMPTY_VALUES)
  @ApiProperty({ enum: EMPTY_VALUES, required: false })
  emptyValues?: EmptyValues;

  /** Contacts only: every imported contact (created or updated) joins this campaign. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('campaign')
  @Rule('contact imports only')
  campaignId?: number;

  /** Contacts only: every imported contact (created or updated) joins this static segment (a dynamic segment's members follow its filter: 400). */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('segment')
  @Rule('contact imports only')
  segmentId?: number;

  /** true: every row is checked and written exactly as a real run would, then rolled back: the counts and errors are real, nothing is stored. */
  @IsOptional()
  @IsBoolean()
  dryRun?: boolean;
}

/** `POST /api/imports` with a JSON body: the options and the rows (objects). */
export class CreateImportDto extends ImportOptionsDto {
  /** The rows, each an object of column → value (values as the JSON routes take them), at most 10,000. */
  @IsArray()
  @ArrayMaxSize(JSON_IMPORT_MAX_ROWS)
  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: true } })
  rows: unknown[];
}

/** `POST /api/imports` as multipart/form-data: a CSV file and the options as form fields. */
export class ImportUploadFormDto {
  /** The CSV file: UTF-8 (with or without BOM), a header line, `,` `;` or tab separated (detected); at most IMPORT_MAX_BYTES. */
  @ApiProperty({ type: 'string', format: 'binary' })
  file: unknown;
  @ApiProperty({ enum: IMPORT_OBJECTS })
  object: string;
  @ApiProperty({ enum: IMPORT_MODES })
  mode: string;
  /** A JSON object as text: column → target. */
  @ApiProperty({ required: false })
  mapping?: string;
  @ApiProperty({ required: false })
  idProperty?: string;
  @ApiProperty({ enum: EMPTY_VALUES, required: false })
  emptyValues?: string;
  @ApiProperty({ required: false, type: 'integer' })
  campaignId?: string;
  @ApiProperty({ required: false, type: 'integer' })
  segmentId?: string;
  @ApiProperty({ required: false, enum: ['true', 'false'] })
  dryRun?: string;
}

export class ImportCountsDto {
  /** Data rows in the file (null until the validation pass has counted them). */
  total: number | null;
  /** Rows whose outcome is committed (the checkpoint). */
  processed: number;
  created: number;
  updated: number;
  /** Rows whose mapped cells were all empty. */
  skipped: number;
  failed: number;
}

/** An import job. */
export class ImportRecordDto {
  id: number;
  object: string;
  @ApiProperty({ enum: IMPORT_STATUSES })
  status: ImportStatus;
  mode: string;
  idProperty: string;
  emptyValues: string;
  dryRun: boolean;
  campaignId: number | null;
  segmentId: number | null;
  /** `csv` (an upload) or `json` (rows in the body). */
  source: string;
  fileName: string | null;
  fileSize: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'string' } })
  mapping: Record<string, string>;
  counts: ImportCountsDto;
  /** processed / total, 0..1 (0 while the total is unknown; 1 once completed). */
  progress: number;
  /** Why the import failed (the file is not valid CSV, the mapping does not fit its header...). */
  error: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** Milliseconds from start to finish (or to now while it runs). */
  durationMs: number | null;
  createdBy: number | null;
  createdByUser: string | null;
}

/** One problem of one row. */
export class ImportErrorDto {
  /** The data row (1 = the first row after the header; the n-th object of `rows`). */
  row: number;
  /** The column (header name) the problem is in, when it is about one. */
  column: string | null;
  /** The error code the single-record route would have answered (validation_failed, conflict, not_found...). */
  code: string;
  message: string;
}

export class CreateExportDto {
  @IsIn(IMPORT_OBJECTS)
  @ApiProperty({ enum: IMPORT_OBJECTS })
  object: ImportObject;

  /** A filter in the object's list filter language (text or JSON form), as its list's `filter` parameter takes it. */
  @IsOptional()
  @ApiProperty({ required: false, oneOf: [{ type: 'string' }, { $ref: '#/components/schemas/FilterNode' }] })
  @Rule('a filter over the filterable fields of the list of the object (GET /api/<object>), in its text or JSON form')
  filter?: unknown;

  /** The properties (columns) to export, in the order of the full list; default all, custom fields as `fields.<alias>`. */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(200)
  @IsString({ each: true })
  @Rule('exported properties of the object (the 400 lists them; fields.<alias> for custom fields)')
  fields?: string[];

  /** `csv` (a header line, custom fields as `fields.<alias>` columns, multiselect values joined with `|`) or `jsonl` (one record per line). */
  @IsIn(EXPORT_FORMATS)
  @ApiProperty({ enum: EXPORT_FORMATS })
  format: ExportFormat;

  /**
   * CSV: `true` (the default) writes a text cell that begins with `=`, `+`, `-`, `@`, a tab or a
   * carriage return with a leading `'`, so a spreadsheet shows it instead of running it as a formula
   * (a cell that is only a number, such as `-3.5` or `+14155550100`, is left as it is). `false` writes
   * every value exactly, for exports read by programs or imported back. No effect on JSON Lines.
   */
  @IsOptional()
  @IsBoolean()
  @ApiProperty({ required: false, default: true })
  escapeFormulas?: boolean;
}

export class ExportDownloadDto {
  /** Signed link to the result; no token needed, valid until expiresAt (EXPORT_LINK_TTL_SECONDS). */
  url: string;
  expiresAt: string;
}

/** An export job. */
export class ExportRecordDto {
  id: number;
  object: string;
  format: string;
  @ApiProperty({ enum: ['queued', 'running', 'completed', 'failed'] })
  status: string;
  @ApiProperty({ nullable: true, oneOf: [{ type: 'string' }, { type: 'object' }] })
  filter: unknown;
  @ApiProperty({ type: 'array', items: { type: 'string' }, nullable: true })
  fields: string[] | null;
  /** CSV: whether cells that a spreadsheet would run as formulas were neutralised with a leading `'`. */
  escapeFormulas: boolean;
  /** Records written (so far, while running). */
  rows: number;
  /** Size of the result in bytes, once completed. */
  size: number | null;
  error: string | null;
  /** Present once completed: a fresh signed link each time the export is read. */
  download: ExportDownloadDto | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
}
