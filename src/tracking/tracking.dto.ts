import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Rule } from '../common/documented-rules.js';

/**
 * What Segment's track and identify calls share (one definition; each call type adds its own fields
 * below). The intake checks calls with its own rules (tracking.rules.ts); these classes document them.
 */
abstract class SegmentCallDto {
  /** The id your system knows the person by: the contact's externalId. userId or anonymousId is required. */
  @ApiProperty({ required: false, oneOf: [{ type: 'string', maxLength: 255 }, { type: 'number' }] })
  @Rule('userId or anonymousId is required (a non-empty string or a number, up to 255 characters)')
  userId?: string;
  /** A device or browser id, before the person is known; linked to a contact by an identify that carries both ids. */
  @ApiProperty({ required: false, oneOf: [{ type: 'string', maxLength: 255 }, { type: 'number' }] })
  @Rule('userId or anonymousId is required (a non-empty string or a number, up to 255 characters)')
  anonymousId?: string;
  /** Context of the call (library, page, ip...), kept as sent. */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  context?: Record<string, unknown>;
  /** When it happened (ISO 8601); default: the receive time. More than 24 h ahead: clamped to the receive time and flagged. */
  @ApiPropertyOptional({ type: String, format: 'date-time' })
  @Rule('ISO 8601 with an offset')
  timestamp?: string;
  /** When the client sent it (ISO 8601): corrects the timestamp by the client's clock skew, as Segment does. */
  @ApiPropertyOptional({ type: String, format: 'date-time' })
  @Rule('ISO 8601 with an offset')
  sentAt?: string;
  /** The call's id: a call whose messageId was received in the last 24 h (48 h) is not stored again. */
  @ApiPropertyOptional({ type: String, minLength: 1, maxLength: 255 })
  messageId?: string;
  /** Per-destination switches Segment's libraries send; kept out of the stored call. */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  integrations?: Record<string, unknown>;
  /** Library bookkeeping Segment's libraries send; ignored. */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  _metadata?: Record<string, unknown>;
  /** Segment's channel (server, browser...); ignored. */
  channel?: string;
}

/** Documentation of a Segment track call. */
export class TrackCallDto extends SegmentCallDto {
  /** `track` (implied on /track). */
  @ApiProperty({ enum: ['track'], required: false })
  type?: string;
  /** The event name, up to 255 characters. */
  @ApiProperty({ minLength: 1, maxLength: 255 })
  @Rule('required on track: not blank')
  event: string;
  /** The event's properties (JSON values keep their types; at most 255 keys, nested at most 5 levels). */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, maxProperties: 255 })
  @Rule('nested at most 5 levels deep; the whole call at most 32 KB')
  properties?: Record<string, unknown>;
}

/** Documentation of a Segment identify call. */
export class IdentifyCallDto extends SegmentCallDto {
  /** `identify` (implied on /identify). */
  @ApiProperty({ enum: ['identify'], required: false })
  type?: string;
  /**
   * The person's traits: email, name (or firstName and lastName), phone, company (a name or { name }),
   * title and the aliases of published contact custom fields are written to the contact.
   */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, maxProperties: 255 })
  @Rule('nested at most 5 levels deep; the whole call at most 32 KB')
  traits?: Record<string, unknown>;
}

/** Documentation of a Segment batch: up to 500 calls and 500 KB (each call up to 32 KB). */
export class TrackingBatchDto {
  @ApiProperty({
    type: 'array',
    maxItems: 500,
    items: { oneOf: [{ $ref: '#/components/schemas/TrackCallDto' }, { $ref: '#/components/schemas/IdentifyCallDto' }] },
  })
  @Rule('each call a track (with event) or identify call with userId or anonymousId, each checked by its own rules; the batch at most 500 KB')
  batch: (TrackCallDto | IdentifyCallDto)[];
  /** When the client sent the batch (corrects the calls' timestamps by the client's clock skew). */
  @ApiPropertyOptional({ type: String, format: 'date-time' })
  @Rule('ISO 8601 with an offset')
  sentAt?: string;
  /** Context shared by the calls that carry none. */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  context?: Record<string, unknown>;
  /** Sent by Segment's libraries; ignored (the credential is the Authorization header). */
  writeKey?: string;
}

/** Segment's answer. */
export class TrackingAnswerDto {
  success: boolean;
}

/** A tracked event as the API returns it. */
export class TrackedEventDto {
  id: number;
  /** track or identify. */
  type: string;
  /** The event name (track); null for identify. */
  name: string | null;
  occurredAt: string;
  receivedAt: string;
  /** The contact it is attributed to (null: an anonymousId not linked yet). */
  contactId: number | null;
  userId: string | null;
  anonymousId: string | null;
  messageId: string;
  /** The event's properties (an identify's traits). */
  @ApiProperty({ type: 'object', additionalProperties: true })
  properties: Record<string, unknown>;
  @ApiProperty({ type: 'object', additionalProperties: true, nullable: true })
  context: Record<string, unknown> | null;
  /**
   * What the intake noted: `timestampClamped` ({ given, reason }) and `problems` (traits not applied
   * to the contact, an anonymousId or email that belongs to another contact: [{ field, message }]).
   */
  @ApiProperty({ type: 'object', additionalProperties: true, nullable: true })
  flags: Record<string, unknown> | null;
}

/** An event name seen by the intake. */
export class TrackingDefinitionDto {
  name: string;
  /** Events of that name received (retention does not lower it). */
  count: number;
  firstSeenAt: string;
  lastSeenAt: string;
  /** Each top-level property key with the JSON types observed (string, number, boolean, object, array, null). */
  @ApiProperty({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } })
  properties: Record<string, string[]>;
}

export class TrackingDefinitionsDto {
  total: number;
  definitions: TrackingDefinitionDto[];
}

/** One item of a contact's timeline. */
export class TimelineItemDto {
  /** When it happened (a tracked event's timestamp, a record event's commit time). */
  at: string;
  /** tracked (a track or identify call) or record (an event of the change feed). */
  @ApiProperty({ enum: ['tracked', 'record'] })
  kind: string;
  /** The event name (track), identify, or the change feed's event type (contact.updated...). */
  type: string;
  /** One line for people. */
  summary: string;
  /** The tracked event (as GET /api/tracking/events answers it), or { id, sequence, data, previous } of the change feed's event. */
  @ApiProperty({ type: 'object', additionalProperties: true })
  data: Record<string, unknown>;
}

export class TimelineDto {
  items: TimelineItemDto[];
  /** The cursor of the next (older) page, to pass as `after`; null after the last page. */
  @ApiProperty({ type: String, nullable: true })
  next: string | null;
}
