import { ApiProperty } from '@nestjs/swagger';
import { Allow, IsDefined } from 'class-validator';
import { ContactRecordDto } from '../contacts/contact.dto.js';

/** Body of `POST /api/segments/preview`: the filter a dynamic segment would hold. */
export class SegmentPreviewDto {
  @ApiProperty({
    description:
      'The filter over contacts: the JSON form (a FilterNode) or the query-string form as a string (see the `filter` parameter of GET /api/contacts).',
    oneOf: [{ $ref: '#/components/schemas/FilterNode' }, { type: 'string', maxLength: 65536 }],
  })
  @IsDefined({ message: 'filter is required' })
  @Allow()
  filter: Record<string, unknown> | string;
}

/** What a segment with this filter would contain now. */
export class SegmentPreviewRecordDto {
  /** Contacts matching the filter. */
  count: number;
  /** The first matching contacts (by id, at most 10). */
  sample: ContactRecordDto[];
}
