import { ApiProperty, PartialType } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsBoolean, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NoNul } from '../common/validation.js';
import { EVENT_TYPES } from './event-types.js';
import { Rule } from '../common/documented-rules.js';

export class CreateWebhookDto {
  /** The receiver: https (http only with WEBHOOK_ALLOW_HTTP=true), not resolving to a loopback, link-local or private address. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(2048)
  @NoNul()
  @Rule('an https URL (http only when the server allows it) whose host does not resolve to a loopback, link-local or private address')
  url: string;

  /** Event types from the catalogue, or ["*"] for every type. */
  @ApiProperty({ type: [String], enum: ['*', ...EVENT_TYPES] })
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(200)
  @IsString({ each: true })
  @Rule('"*" (every event type) stands alone')
  events: string[];

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /** Default true. */
  @IsOptional()
  @IsBoolean()
  isActive?: boolean;
}

export class UpdateWebhookDto extends PartialType(CreateWebhookDto) {
  /** With isActive: true on a webhook that was inactive: queue its dead deliveries again. */
  @IsOptional()
  @IsBoolean()
  requeueDead?: boolean;
}

/** A webhook as the API returns it (never with its secret, except once at creation). */
export class WebhookRecordDto extends AuditRecordDto {
  id: number;
  url: string;
  events: string[];
  description: string | null;
  isActive: boolean;
  /** Why the service disabled it (a 410 answer, 72 h without a success); null otherwise. */
  disabledReason: string | null;
  lastSuccessAt: string | null;
  /** First failed attempt since the last success; null while deliveries succeed. */
  failingSince: string | null;
  /** Until when the secret before the last rotation still signs beside the current one. */
  previousSecretExpiresAt: string | null;
  /** Only in the answer to the creation and to rotate-secret (not in a replay of it with the same Idempotency-Key): `whsec_` + base64. */
  secret?: string;
}

export class WebhookAttemptDto {
  attempt: number;
  at: string;
  code: number | null;
  durationMs: number;
  error: string | null;
  /** The start of the receiver's answer (at most 4 KiB) as text: bytes that are not valid UTF-8, and NUL, read as U+FFFD. */
  response: string;
  nextAttemptAt: string | null;
}

export class WebhookDeliveryDto {
  id: number;
  webhookId: number;
  eventId: string;
  eventType: string;
  sequence: number | null;
  /** pending, succeeded, failed (a retry is scheduled) or dead. */
  status: string;
  attemptCount: number;
  attempts: WebhookAttemptDto[];
  nextAttemptAt: string | null;
  lastError: string | null;
  createdAt: string;
  completedAt: string | null;
}

export class WebhookTestResultDto {
  eventId: string;
  success: boolean;
  /** The receiver's status, null when it did not answer. */
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** The start of the receiver's answer (at most 4 KiB) as text: bytes that are not valid UTF-8, and NUL, read as U+FFFD. */
  response: string;
}
