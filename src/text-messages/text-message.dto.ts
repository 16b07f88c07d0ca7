import { PartialType } from '@nestjs/swagger';
import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsIsoDateTime, IsPhone, NoNul } from '../common/validation.js';
import { NotBlank, References } from '../common/documented-rules.js';

export class CreateTextMessageDto {
  /** Message body, 1..1600 characters. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(1600)
  @NoNul()
  @NotBlank()
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
  @References('campaign')
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
  /** draft, queued, sent, delivered, failed or canceled (terminal: never handed to the provider; see failureCode) */
  status: string;
  scheduledFor: string | null;
  sentAt: string | null;
  deliveredAt: string | null;
  failedAt: string | null;
  /** When the message was canceled, if it was. */
  canceledAt: string | null;
  /** Why the message failed or was canceled, when it was. */
  failureReason: string | null;
  /** provider_rejected, retries_exhausted, outcome_unknown or delivery_failed when failed; opted_out (the recipient opted out before the send) or canceled (its broadcast was canceled) when canceled. */
  failureCode: string | null;
  /** The campaign, or null (also after the campaign was deleted: ON DELETE SET NULL). */
  campaign: CampaignRefDto | null;
  /** The broadcast that created the message, or null. */
  broadcastId: number | null;
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

/** An inbound text message (a reply) from the SMS gateway (signed; see the route's description). */
export class InboundMessageDto {
  /** The sender's phone number (normalised to E.164). */
  from: string;
  /** Our number the reply was sent to. */
  to?: string;
  /** The text, up to 1600 characters. */
  body: string;
  /** The gateway's id of the message: a repeat with the same id is not acted on again. */
  messageId?: string;
  /** When the gateway received it (ISO 8601 with offset); default now. */
  receivedAt?: string;
}

/** What an inbound message did. */
export class InboundResultDto {
  /** False for a repeated messageId (nothing done again). */
  accepted: boolean;
  /** opt_out (STOP...), opt_in (START/UNSTOP) or none. */
  action: string;
  /** Contacts whose sms do-not-contact entry changed. */
  contactsUpdated: number;
  /** Id of the stored inbound message (null for a repeat). */
  id: number | null;
}
