import { ApiPropertyOptional, PartialType } from '@nestjs/swagger';
import { COLOR_PATTERN } from '../common/color.js';
import { IsBoolean, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { NoNul } from '../common/validation.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, Rule } from '../common/documented-rules.js';

export class CreatePointGroupDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /** Whether the group is active (default true). */
  @IsOptional()
  @IsBoolean()
  isPublished?: boolean;

  /** Minimum points required; >= 0 and <= maximumPoints. */
  @IsInt()
  @Min(0)
  @Max(2147483647)
  minimumPoints: number;

  /** Maximum points allowed; >= minimumPoints. */
  @IsInt()
  @Min(0)
  @Max(2147483647)
  @Rule('must not be less than minimumPoints')
  maximumPoints: number;

  /** A 6-digit hex colour, `#` optional (`4e5d9d` or `#4E5D9D`); returned as `#rrggbb` in lower case. */
  @ApiPropertyOptional({ pattern: COLOR_PATTERN.source })
  @IsOptional()
  @IsString()
  @MaxLength(16)
  color?: string | null;
}

/** PATCH body: any subset of the create properties; the resulting range must still hold. */
export class UpdatePointGroupDto extends PartialType(CreatePointGroupDto) {}

/** A point group as the API returns it. */
export class PointGroupRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  description: string | null;
  isPublished: boolean;
  minimumPoints: number;
  maximumPoints: number;
  /** `#rrggbb` in lower case, or null when none was given. */
  color: string | null;
}
