import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Max, MaxLength, Min, ValidateNested } from 'class-validator';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';

/** Exactly one of campaignId (the campaign's members at send time), segmentId (the segment's members at send time) or contactIds. */
export class AudienceDto {
  /** Every member of this campaign when the broadcast is sent. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('campaign')
  campaignId?: number;

  /** Every member of this segment when the broadcast is sent (a dynamic segment being rebuilt makes the send wait: 409). */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  @References('segment')
  segmentId?: number;

  /** These contacts (1 to 10,000 ids; duplicates count once; ids without a contact are skipped as contact_not_found). */
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(10000)
  @IsInt({ each: true })
  @Min(1, { each: true })
  @Max(2147483647, { each: true })
  contactIds?: number[];
}

export class CreateBroadcastDto {
  /** A name for the list (up to 255 characters). */
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  name?: string | null;

  /**
   * The text, 1..1600 characters, with merge fields rendered per recipient: {{contact.name}},
   * {{contact.email}}, {{contact.phone}}, {{contact.company}}, {{contact.title}},
   * {{contact.fields.<alias>}} (a published contact field), each with an optional default:
   * {{contact.name | "there"}}. An unknown field or malformed braces is a 400.
   */
  @IsString()
  @IsNotEmpty()
  @MaxLength(1600)
  @NoNul()
  @Rule('not blank; merge fields {{contact.fields.<alias>}} name published contact fields')
  @NotBlank()
  content: string;

  /** Who receives it. */
  @IsObject()
  @ValidateNested()
  @Type(() => AudienceDto)
  @Rule('exactly one of campaignId, segmentId or contactIds')
  audience: AudienceDto;

  /** Send at this time (ISO 8601 with offset): the broadcast is `scheduled` until then. Without it, a `draft`. */
  @IsOptional()
  @IsIsoDateTime()
  scheduledFor?: string | null;
}

/** PATCH body: any subset of the create properties (draft or scheduled broadcasts only). */
export class UpdateBroadcastDto {
  @IsOptional()
  @IsString()
  @MaxLength(255)
  @NoNul()
  name?: string | null;

  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(1600)
  @NoNul()
  @Rule('not blank; merge fields {{contact.fields.<alias>}} name published contact fields')
  @NotBlank()
  content?: string;

  @IsOptional()
  @ValidateNested()
  @Type(() => AudienceDto)
  @Rule('exactly one of campaignId, segmentId or contactIds')
  audience?: AudienceDto;

  @IsOptional()
  @IsIsoDateTime()
  scheduledFor?: string | null;
}

export class AudienceRecordDto {
  campaignId?: number;
  segmentId?: number;
  contactIds?: number[];
}

/** Messages of the broadcast by status, live. */
export class BroadcastCountsDto {
  queued: number;
  sent: number;
  delivered: number;
  failed: number;
  canceled: number;
}

/** Contacts of the audience that got no message, by reason. */
export class BroadcastSkippedDto {
  /** An id in contactIds names no contact. */
  contact_not_found: number;
  /** No phone, or one that is not a valid E.164 number. */
  no_phone: number;
  /** A contact with this phone number is opted out of text messages. */
  opted_out: number;
  /** Another contact of the audience (the lowest id) has the same phone number. */
  duplicate_phone: number;
  /** The rendered text is empty. */
  content_empty: number;
  /** The rendered text is longer than 1600 characters. */
  content_too_long: number;
}

/** A broadcast as the API returns it. */
export class BroadcastRecordDto {
  id: number;
  name: string | null;
  content: string;
  audience: AudienceRecordDto;
  /** draft, scheduled, sending, completed or canceled */
  status: string;
  scheduledFor: string | null;
  startedAt: string | null;
  completedAt: string | null;
  canceledAt: string | null;
  /** Messages created by the send (null before it). */
  recipients: number | null;
  counts: BroadcastCountsDto;
  skipped: BroadcastSkippedDto;
  createdAt: string;
  modifiedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
}
