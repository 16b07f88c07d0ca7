import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequirePermission } from '../auth/permissions.js';
import { ApiErrors } from '../common/openapi.js';
import { EVENT_CATALOGUE_MARKDOWN, EventPageDto } from './event.dto.js';
import { EventsService } from './events.service.js';

@ApiTags('events')
@Controller('api/events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @RequirePermission('events:read')
  @ApiOperation({
    summary: 'Read the event feed',
    description:
      'Events in `sequence` order after the cursor `after` (omitted: from the oldest kept event). Every committed change ' +
      'writes its event in the same transaction, so the feed has every change, once, and a reader paging with `next` ' +
      `never skips one. Events are kept EVENT_RETENTION_DAYS days (default 7); a cursor older than that answers 410.\n\nThe catalogue:\n\n${EVENT_CATALOGUE_MARKDOWN}`,
  })
  @ApiQuery({ name: 'after', required: false, type: String, description: 'The cursor: `next` of the previous page (the sequence of the last event read)' })
  @ApiQuery({ name: 'types', required: false, type: String, description: 'Comma-separated event types to answer (default: all)' })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 100 } })
  @ApiOkResponse({ type: EventPageDto })
  @ApiErrors(
    {
      status: 400,
      description: 'A malformed cursor, an unknown event type (`details` names the allowed ones), a limit outside 1..500 or an unknown parameter',
    },
    { status: 410, description: 'The cursor is older than the retention: `details[0].oldestCursor` is where the kept events begin', codes: ['gone'] },
  )
  page(@Query() query: Record<string, unknown>) {
    return this.events.page(query);
  }
}
