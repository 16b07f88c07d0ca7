import { ApiProperty, PartialType } from '@nestjs/swagger';
import { Allow, IsDefined, IsIn, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { AuditRecordDto } from '../common/audit.dto.js';
import { MembersBatchDto, MembersBatchResultDto } from '../batch/batch.dto.js';
import { NoNul } from '../common/validation.js';
import { ContactRecordDto } from '../contacts/contact.dto.js';
import { BUILD_STATUSES, SEGMENT_TYPES } from './segment.entity.js';
import { NotBlank, Rule } from '../common/documented-rules.js';

const FILTER_PROPERTY: { description: string; oneOf: Record<string, unknown>[] } = {
  description:
    'The filter over contacts: the JSON form (a FilterNode) or the query-string form as a string (see the `filter` parameter of GET /api/contacts); ' +
    'every field of that filter except `segment.id`. Stored and answered in the JSON form.',
  oneOf: [{ $ref: '#/components/schemas/FilterNode' }, { type: 'string', maxLength: 65536 }],
};

/** Body of `POST /api/segments/preview`: the filter a dynamic segment would hold. */
export class SegmentPreviewDto {
  @ApiProperty(FILTER_PROPERTY)
  @IsDefined({ message: 'filter is required' })
  @Allow()
  @Rule('a filter over the filterable fields the operation describes (unknown field, an operator the field does not take or a bad value: 400)')
  filter: Record<string, unknown> | string;
}

/** What a segment with this filter would contain now. */
export class SegmentPreviewRecordDto {
  /** Contacts matching the filter. */
  count: number;
  /** The first matching contacts (by id, at most 10). */
  sample: ContactRecordDto[];
}

/** Segment body (create and PUT). An optional property sent as null is cleared. */
export class CreateSegmentDto {
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

  /** dynamic: members are the contacts the filter matches, kept fresh; static: members are added and removed by hand (contacts/batch). */
  @ApiProperty({ enum: SEGMENT_TYPES })
  @IsIn(SEGMENT_TYPES, { message: 'type must be dynamic or static' })
  type: 'dynamic' | 'static';

  /** Required for a dynamic segment; a static segment takes none (400). */
  @ApiProperty({ ...FILTER_PROPERTY, required: false, nullable: true })
  @IsOptional()
  @Allow()
  @Rule('required for a dynamic segment, refused for a static one')
  @Rule('a filter over the filterable fields the operation describes (unknown field, an operator the field does not take or a bad value: 400)')
  filter?: Record<string, unknown> | string | null;
}

/**
 * PATCH body: any subset. Changing the filter of a dynamic segment starts a rebuild; a static
 * segment made dynamic needs a filter (its members are rebuilt from it); a dynamic segment made
 * static keeps its current members and drops its filter.
 */
export class UpdateSegmentDto extends PartialType(CreateSegmentDto) {}

/** The materialised membership of a segment. */
export class SegmentMembershipDto {
  /**
   * ready: the members match the current filter (kept fresh as contacts change, within seconds);
   * building: a rebuild for the current filter is pending or running (the members are those of the
   * previous filter meanwhile); failed: the last rebuild failed (see error; POST /api/segments/{id}/rebuild retries).
   * Static segments are always ready.
   */
  @ApiProperty({ enum: BUILD_STATUSES })
  status: string;
  /** When the members were last rebuilt from the filter (null: never, or static). */
  builtAt: string | null;
  /** Members now. */
  count: number;
  /** Why the last rebuild failed. */
  error: string | null;
}

/** A segment as the API returns it. */
export class SegmentRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  description: string | null;
  @ApiProperty({ enum: SEGMENT_TYPES })
  type: string;
  /** The filter (JSON form) of a dynamic segment; null for a static one. */
  @ApiProperty({ nullable: true, allOf: [{ $ref: '#/components/schemas/FilterNode' }] })
  filter: Record<string, unknown> | null;
  membership: SegmentMembershipDto;
}

/** GET /api/segments/{id}/count. */
export class SegmentCountDto {
  /** Members now. */
  count: number;
  @ApiProperty({ enum: BUILD_STATUSES })
  status: string;
}

/** Ids a static segment's batch takes in `add`, and in `remove`; more is a 413. */
export { MEMBERSHIP_BATCH_MAX as SEGMENT_BATCH_MAX } from '../batch/batch.dto.js';

/** `POST /api/segments/{id}/contacts/batch`: contacts to add to and remove from a static segment, by id. */
export class SegmentMembersBatchDto extends MembersBatchDto {}

/** What a static segment's membership batch changed. */
export class SegmentMembersBatchResultDto extends MembersBatchResultDto {}

/** A segment a contact belongs to (GET /api/contacts/{id}/segments). */
export class ContactSegmentDto {
  id: number;
  name: string;
  @ApiProperty({ enum: SEGMENT_TYPES })
  type: string;
  /** When the contact joined the segment. */
  addedAt: string;
}

/** GET /api/contacts/{id}/segments. */
export class ContactSegmentsDto {
  total: number;
  segments: ContactSegmentDto[];
}
