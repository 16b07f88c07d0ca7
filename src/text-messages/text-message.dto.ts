import { PartialType } from '@nestjs/swagger';
import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsIsoDateTime, IsPhone, NoNul } from '../common/validation.js';

export class CreateTextMessageDto {
  /** Message body, 1..1600 characters. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(1600)
  @NoNul()
  content: string;

  /** Phone number; stored in E.164 (numbers without a country code are read as US numbers). */
  @IsString()
  @IsPhone()
  recipient: string;

  /** Campaign the message belongs to (an existing campaign id); null clears it. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  campaignId?: number | null;

  /**
   * Send at this time (ISO 8601 with offset): the message is `queued` at once and handed to the
   * provider then (a time in the past sends it right away). Without it the message is a `draft`.
   */
  @IsOptional()
  @IsIsoDateTime()
  scheduledFor?: string | null;
}

/** PATCH body: any subset of the create properties. */
export class UpdateTextMessageDto extends PartialType(CreateTextMessageDto) {}

export class CampaignRefDto {
  id: number;
  name: string;
}

/** A text message as the API returns it. */
export class TextMessageRecordDto {
  id: number;
  content: string;
  /** E.164 */
  recipient: string;
  /** draft, queued, sent, delivered or failed */
  status: string;
  scheduledFor: string | null;
  sentAt: string | null;
  deliveredAt: string | null;
  failedAt: string | null;
  /** Why the message failed, when it did. */
  failureReason: string | null;
  /** provider_rejected, retries_exhausted, outcome_unknown or delivery_failed, when failed. */
  failureCode: string | null;
  /** The campaign, or null (also after the campaign was deleted: ON DELETE SET NULL). */
  campaign: CampaignRefDto | null;
  createdAt: string;
  modifiedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
}

/** A delivery report from the SMS gateway (signed; see the route's description). */
export class DeliveryReportDto {
  /** The Idempotency-Key of the send (`textmessage-<id>-<sendCount>`). */
  reference?: string;
  /** The gateway's message id (alternative to reference). */
  id?: string;
  /** delivered, failed or undelivered (others are acknowledged and ignored). */
  status: string;
  /** Failure detail. */
  error?: string;
  /** When it happened (ISO 8601); default now. */
  timestamp?: string;
}
