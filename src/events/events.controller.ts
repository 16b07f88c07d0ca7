import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { ApiErrors } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
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
      'never skips one. An event carries its record, so a token sees only the events of resources it may read (contact.* needs contacts:read, ' +
      'deal.* deals:read...; `*` sees all), and naming another type in `types` is a 403. ' +
      `Events are kept EVENT_RETENTION_DAYS days (default 7); a cursor older than that answers 410.\n\nThe catalogue:\n\n${EVENT_CATALOGUE_MARKDOWN}`,
  })
  @ApiQuery({
    name: 'after',
    required: false,
    type: String,
    description: 'The cursor: `next` of the previous page (the sequence of the last event read, or where a `types` read stopped looking)',
  })
  @ApiQuery({
    name: 'types',
    required: false,
    type: String,
    description:
      'Comma-separated event types to answer (default: all). Such a read looks through at most 100,000 events per request, so a page may be short or empty while `next` moves on',
  })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 100 } })
  @ApiOkResponse({ type: EventPageDto })
  @ApiErrors(
    {
      status: 400,
      description: 'A malformed cursor, an unknown event type (`details` names the allowed ones), a limit outside 1..500 or an unknown parameter',
    },
    { status: 410, description: 'The cursor is older than the retention: `details[0].oldestCursor` is where the kept events begin', codes: ['gone'] },
    { status: 403, description: 'The token lacks events:read, or `types` names a type whose resource the token may not read' },
  )
  page(@Query() query: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.events.page(query, who.permissions);
  }
}
