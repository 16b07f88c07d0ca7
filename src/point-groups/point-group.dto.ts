import { PartialType } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { NoNul } from '../common/validation.js';

export class CreatePointGroupDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
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
  maximumPoints: number;

  /** A 6-digit hex colour, `#` optional (`4e5d9d` or `#4E5D9D`); returned as `#rrggbb` in lower case. */
  @IsOptional()
  @IsString()
  @MaxLength(16)
  color?: string | null;
}

/** PATCH body: any subset of the create properties; the resulting range must still hold. */
export class UpdatePointGroupDto extends PartialType(CreatePointGroupDto) {}

/** A point group as the API returns it. */
export class PointGroupRecordDto {
  id: number;
  name: string;
  description: string | null;
  isPublished: boolean;
  minimumPoints: number;
  maximumPoints: number;
  /** `#rrggbb` in lower case, or null when none was given. */
  color: string | null;
  createdAt: string;
  modifiedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
}
