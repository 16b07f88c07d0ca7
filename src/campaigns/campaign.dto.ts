import { OmitType, PartialType } from '@nestjs/swagger';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { CAMPAIGN_STATUSES, CREATE_STATUSES } from './campaign.rules.js';
import type { CampaignStatus } from './campaign.rules.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { MembersBatchDto, MembersBatchResultDto } from '../batch/batch.dto.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

export class CreateCampaignDto {
  /** Campaign name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  /** Free text; null clears it. */
  @IsOptional()
  @IsString()
  @MaxLength(10000)
  @NoNul()
  description?: string | null;

  /** Free text, e.g. `email` or `sms`; null clears it. */
  @IsOptional()
  @IsString()
  @MaxLength(100)
  @NoNul()
  type?: string | null;

  /** `active` (default) or `inactive` on create; edits also accept `completed`. Null means the default. */
  @IsOptional()
  @IsIn(CREATE_STATUSES)
  status?: CampaignStatus | null;

  /** ISO 8601 date-time with an offset, e.g. `2026-11-21T10:15:00+00:00`; null clears it. */
  @IsOptional()
  @IsIsoDateTime()
  startDate?: string | null;

  /**
   * ISO 8601 date-time with an offset; must not be before `startDate` (400). Once it has passed, a
   * periodic job marks the campaign `completed`. Null clears it (no end).
   */
  @IsOptional()
  @IsIsoDateTime()
  @Rule('must not be before startDate')
  endDate?: string | null;

  /**
   * A segment whose members the campaign mirrors (400 when it does not exist): when set, the
   * campaign's members become exactly the segment's (members added by hand that are not in the
   * segment leave, each with campaign.contact_removed), and they follow every later change of the
   * segment's membership. Meanwhile the campaign refuses membership changes by hand (409). Null
   * (or clearing it) stops the mirroring: the current members stay, managed by hand again.
   */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('segment')
  segmentId?: number | null;
}

/** PUT body: the create properties; `status` may also be `completed` when the campaign exists. */
export class ReplaceCampaignDto extends OmitType(CreateCampaignDto, ['status'] as const) {
  /** `active`, `inactive` or `completed` (`completed` only when the id exists; a PUT that creates refuses it). */
  @IsOptional()
  @IsIn(CAMPAIGN_STATUSES)
  status?: CampaignStatus | null;
}

/** PATCH body: any subset of the create properties; `status` may also be `completed`. */
export class UpdateCampaignDto extends PartialType(ReplaceCampaignDto) {}

/** A campaign as the API returns it. */
export class CampaignRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  description: string | null;
  type: string | null;
  /** active, inactive or completed. */
  status: string;
  startDate: string | null;
  endDate: string | null;
  /** The segment whose members the campaign mirrors, or null. */
  segmentId: number | null;
}

/** Answer of the membership routes. */
export class SuccessDto {
  success: boolean;
}

export { MEMBERSHIP_BATCH_MAX } from '../batch/batch.dto.js';

/** `POST /api/campaigns/{id}/contacts/batch`: contacts to add and to remove, by id. */
export class CampaignMembersBatchDto extends MembersBatchDto {}

/** What a campaign membership batch changed. */
export class CampaignMembersBatchResultDto extends MembersBatchResultDto {}
