import { ApiProperty } from '@nestjs/swagger';
import { IsArray, IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { Rule } from '../common/documented-rules.js';

export const BATCH_MODES = ['create', 'update', 'upsert', 'delete'] as const;
export type BatchMode = (typeof BATCH_MODES)[number];
/** Items one batch takes; more is a 413 naming the limit. */
export const BATCH_MAX_ITEMS = 500;

/** `POST /api/<resource>/batch`: up to 500 records written as the single-record routes would. */
export class BatchWriteDto {
  /**
   * `create` (each item a create body, 201), `update` (changes the supplied properties of the record
   * the item's `idProperty` names, 200; 404 when there is none), `upsert` (update when it exists, else
   * create) or `delete` (each item names a record by its `idProperty`, 200).
   */
  @IsIn(BATCH_MODES)
  @ApiProperty({ enum: BATCH_MODES })
  mode: BatchMode;

  /** The property that names an item's record: `id` (the default for update and delete); contacts also take `email` (the default for upsert) or the alias of a unique-identifier custom field. */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @Rule('id on every resource; on contacts also email or the alias of a published unique-identifier contact field')
  idProperty?: string;

  /** With true, one transaction: any failed item answers 422 with the results, and nothing is written. */
  @IsOptional()
  @IsBoolean()
  atomic?: boolean;

  /** The records, at most 500 (413 beyond); each is checked exactly as the single-record route checks its body. */
  @IsArray()
  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: true } })
  items: unknown[];
}

/** One item's error: what the single-record route would have answered. */
export class BatchItemErrorDto {
  code: string;
  message: string;
  status: number;
  /** What is wrong, per field (as in every error answer). */
  @ApiProperty({ type: 'array', required: false, items: { $ref: '#/components/schemas/ApiErrorDetail' } })
  details?: Record<string, unknown>[];
}

export class BatchItemResultDto {
  /** Position of the item in `items`. */
  index: number;
  /** The status the single-record route would have answered (201 created, 200 updated or deleted, 4xx). */
  status: number;
  /** The record's id (absent on failures, and on every item of an atomic batch that was refused). */
  id?: number;
  error?: BatchItemErrorDto;
}

export class BatchSummaryDto {
  created: number;
  updated: number;
  deleted: number;
  failed: number;
}

/** The answer of a batch: one result per item, in input order. */
export class BatchResultDto {
  results: BatchItemResultDto[];
  summary: BatchSummaryDto;
}

/** Ids one membership batch (a campaign's or a static segment's contacts) takes in `add`, and in `remove`; more is a 413. */
export const MEMBERSHIP_BATCH_MAX = 10_000;

/** `POST /api/<campaigns|segments>/{id}/contacts/batch`: contacts to add and to remove, by id. */
export class MembersBatchDto {
  /** Contact ids to add (at most 10,000; 413 beyond). Members already are counted as `alreadyMember`. */
  @IsOptional()
  @IsArray()
  @IsInt({ each: true })
  @Min(1, { each: true })
  @Max(2147483647, { each: true })
  add?: number[];

  /** Contact ids to remove (at most 10,000; 413 beyond). Contacts that are not members are counted as `notMember`. */
  @IsOptional()
  @IsArray()
  @IsInt({ each: true })
  @Min(1, { each: true })
  @Max(2147483647, { each: true })
  @Rule('must not name an id that add names')
  remove?: number[];
}

/** What a membership batch changed. */
export class MembersBatchResultDto {
  /** Memberships created (each wrote a `<campaign|segment>.contact_added` event where the resource has one). */
  added: number;
  /** Contacts in `add` that were members already. */
  alreadyMember: number;
  /** Memberships removed. */
  removed: number;
  /** Contacts in `remove` that were not members. */
  notMember: number;
  /** Ids in `add` or `remove` that name no contact, ascending. */
  notFound: number[];
}
