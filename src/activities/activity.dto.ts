import { PartialType } from '@nestjs/swagger';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { ACTIVITY_TYPES } from './activity.rules.js';
import type { ActivityType } from './activity.rules.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, References } from '../common/documented-rules.js';

/** Activity body. Property names are snake_case (docs/decisions/wire-format.md); an optional property sent as null is cleared. */
export class CreateActivityDto {
  /** call, email or meeting. */
  @IsIn(ACTIVITY_TYPES)
  type: ActivityType;

  /** Subject line. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  subject: string;

  /** Id of an existing contact (400 when it does not exist). */
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('contact')
  contact_id: number;

  /** When the activity is due: ISO 8601 date-time with an offset, e.g. `2026-11-21T10:15:00+00:00`. */
  @IsOptional()
  @IsIsoDateTime()
  due_date?: string | null;

  /** Additional notes. */
  @IsOptional()
  @IsString()
  @MaxLength(20000)
  @NoNul()
  notes?: string | null;

  /** Outcome of the activity, free text. */
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  @NoNul()
  outcome?: string | null;
}

/** PATCH body: any subset of the create properties (type, subject and contact_id must not be null). */
export class UpdateActivityDto extends PartialType(CreateActivityDto) {}

/** An activity as the API returns it (snake_case like the request; audit fields camelCase). */
export class ActivityRecordDto extends AuditRecordDto {
  id: number;
  /** call, email or meeting. */
  type: string;
  subject: string;
  contact_id: number;
  due_date: string | null;
  notes: string | null;
  outcome: string | null;
}
