import { PartialType } from '@nestjs/swagger';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min, registerDecorator, type ValidationOptions } from 'class-validator';
import { IsDecimal } from './decimal.js';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { DEAL_STATUSES, isCalendarDate, MAX_DEAL_VALUE } from './deal.rules.js';
import type { DealStatus } from './deal.rules.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

/** A calendar date written YYYY-MM-DD. */
function IsCalendarDate(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isCalendarDate',
      target: object.constructor,
      propertyName,
      options: { message: `${propertyName} must be a date written YYYY-MM-DD, e.g. 2026-11-21`, ...options },
      validator: { validate: (v: unknown) => isCalendarDate(v) },
    });
}

/**
 * Deal body. Property names are snake_case (docs/decisions/wire-format.md). An optional property sent as null is
 * reset to its default (null, or `open` for status and 1 for quantity).
 */
export class CreateDealDto {
  /** Deal name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  title: string;

  /**
   * Deal value, a JSON number >= 0 with at most two decimals (400 otherwise; values with more
   * decimals, e.g. 1e-7, are refused, not rounded).
   */
  @IsDecimal(2)
  @Min(0)
  @Max(MAX_DEAL_VALUE)
  value: number;

  /** Id of an existing contact (400 when it does not exist). */
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('contact')
  contact_id: number;

  /** Expected closing date, YYYY-MM-DD. */
  @IsOptional()
  @IsCalendarDate()
  expected_close_date?: string | null;

  /**
   * Id of the pipeline the deal is in (400 when it does not exist). Omitted: the deal's pipeline, or
   * the default pipeline for a new deal. Moving a deal to another pipeline without a stage puts it in
   * that pipeline's first stage of its status's type.
   */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @Rule('a pipeline that exists')
  pipeline_id?: number | null;

  /** Id of a stage of the deal's pipeline (400 for a stage of another pipeline). Omitted: see `stage`. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @Rule("a current stage of the deal's pipeline")
  stage_id?: number | null;

  /**
   * The stage's name, e.g. `qualification`, `proposal`. In a pipeline with strictStages a name that
   * is not one of its stages is a 400 listing them; in the others (the default pipeline made from the
   * free-text stages of old) it is added as a new stage at the end, of the type `status` gives (open
   * by default). Omitted: the deal's stage (a new deal: the pipeline's first open stage); null: the
   * pipeline's first stage of the deal's status.
   */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  @Rule("in a strictStages pipeline, one of its stages' names")
  stage?: string | null;

  /** The deal's own win probability in percent, 0..100; omitted or null: the stage's. */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(100)
  probability?: number | null;

  /**
   * `open` (default), `won` or `lost`: the type of the deal's stage. Given without a stage, it moves
   * the deal to the pipeline's first stage of that type (400 when the pipeline has none), unless its
   * stage already has it; given with a stage of another type, a 400. Moving to won or lost without
   * `closed_at` stamps `closed_at` with the current time; moving back to open clears it.
   */
  @IsOptional()
  @IsIn(DEAL_STATUSES)
  status?: DealStatus | null;

  /** Product name (sales reports group by it). */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  product?: string | null;

  /** Quantity, a whole number >= 0 (default 1). */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(2147483647)
  quantity?: number | null;

  /**
   * When the deal was won or lost: ISO 8601 date-time with an offset. Only for won or lost deals
   * (400 with status open); when omitted on a closed deal it is kept, or set to now when the deal
   * is being closed.
   */
  @IsOptional()
  @IsIsoDateTime()
  @Rule('only for a won or lost deal: omitted or null while status is open')
  closed_at?: string | null;

  /** Id of the user who owns the deal (must exist); defaults to the user behind the token; null for none. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('user')
  owner_id?: number | null;

  /** Id of the company the deal is with (400 when it does not exist); null for none. Set to null when the company is deleted. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('company')
  company_id?: number | null;
}

/** PATCH body: any subset of the create properties (title, value and contact_id must not be null). */
export class UpdateDealDto extends PartialType(CreateDealDto) {}

/** A deal as the API returns it (snake_case like the request; audit fields camelCase). */
export class DealRecordDto extends AuditRecordDto {
  id: number;
  title: string;
  value: number;
  contact_id: number;
  /** YYYY-MM-DD. */
  expected_close_date: string | null;
  pipeline_id: number;
  stage_id: number;
  /** The stage's name. */
  stage: string;
  /** The deal's own probability, else its stage's. */
  probability: number;
  /** When the deal entered its stage. */
  entered_stage_at: string;
  /** open, won or lost: the type of the deal's stage. */
  status: string;
  product: string | null;
  quantity: number;
  closed_at: string | null;
  owner_id: number | null;
  company_id: number | null;
}

/** One stay of a deal in a stage, from its stage history. */
export class DealStageStayDto {
  /** The ledger row that moved the deal into the stage. */
  id: number;
  pipeline_id: number;
  stage_id: number;
  /** The stage's name (a removed stage keeps its last name). */
  stage: string | null;
  /** The stage the deal came from (null for the first stay). */
  from_stage_id: number | null;
  /** When the deal entered the stage. */
  entered_at: string;
  /** When it left (null: it is still there). */
  left_at: string | null;
  /** Seconds spent in the stage; for the current stage, up to now. */
  seconds: number;
  /** The user who moved it (null when unknown). */
  by: number | null;
  /** The deal's value and probability when it entered the stage. */
  value: number;
  probability: number;
}
