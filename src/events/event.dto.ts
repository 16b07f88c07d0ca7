import { ApiProperty } from '@nestjs/swagger';
import { EVENT_CATALOGUE, EVENT_TYPES } from './event-types.js';

/** The catalogue as a Markdown list, for the OpenAPI document. */
export const EVENT_CATALOGUE_MARKDOWN = Object.entries(EVENT_CATALOGUE)
  .map(([type, description]) => `- \`${type}\`: ${description}`)
  .join('\n');

/** An event of the feed (and of a webhook delivery). */
export class EventRecordDto {
  @ApiProperty({ description: 'Stable across every delivery of the event (use it to de-duplicate)', format: 'uuid' })
  id: string;

  @ApiProperty({ enum: EVENT_TYPES, description: `The event type. The catalogue:\n\n${EVENT_CATALOGUE_MARKDOWN}` })
  type: string;

  @ApiProperty({ description: 'When the change was made (its transaction began)', format: 'date-time' })
  occurredAt: string;

  @ApiProperty({ description: 'Strictly increasing over the whole feed, in the order events became visible; also the cursor', type: 'integer' })
  sequence: number;

  @ApiProperty({ description: 'The record as the API returns it (as it was, for a deletion)', type: 'object', additionalProperties: true })
  data: Record<string, unknown>;

  @ApiProperty({
    description: 'On updates: the old values of the changed properties; null otherwise',
    type: 'object',
    additionalProperties: true,
    nullable: true,
  })
  previous: Record<string, unknown> | null;
}

/** A page of the event feed. */
export class EventPageDto {
  @ApiProperty({ type: [EventRecordDto] })
  events: EventRecordDto[];

  @ApiProperty({ description: 'The cursor to pass as `after` for the next page (the same one when the page is empty)' })
  next: string;
}
