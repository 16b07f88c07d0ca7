import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { AcceptsWriteKey, RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';
import { TRACKED_EVENT_LIST_SPEC } from './tracking-list.js';
import { IdentifyCallDto, TimelineDto, TrackCallDto, TrackedEventDto, TrackingAnswerDto, TrackingBatchDto, TrackingDefinitionsDto } from './tracking.dto.js';
import { TrackingIntakeService } from './tracking-intake.service.js';
import { TrackingService } from './tracking.service.js';

const INTAKE =
  "Segment's HTTP tracking API: point `@segment/analytics-node` (or RudderStack's SDK) at this service with the token as its write key. " +
  'Credentials: `Authorization: Bearer <token>`, or HTTP Basic with the token as user name and an empty password (the write key). ' +
  'Answers `{ "success": true }` once the calls are committed. A call whose messageId was received in the last 24 h is not stored again. ' +
  'A timestamp more than 24 h ahead is clamped to the receive time and flagged (`flags.timestampClamped`). Any fault (a call over 32 KB, a missing ' +
  'event on track, neither userId nor anonymousId, properties that are not an object or nest deeper than 5 levels or have more than 255 keys, an ' +
  'invalid timestamp) is a 400 naming the call and field, and nothing of the request is stored. Identity: README "Tracked events".';

const INTAKE_ERRORS = {
  status: 400,
  description: 'A call breaks a rule or a limit: `details` name each call index and field (`batch.3.event`); nothing was stored',
};

@ApiTags('tracking')
@Controller('api/ingest/v1')
export class TrackingIntakeController {
  constructor(private readonly intake: TrackingIntakeService) {}

  @Post('track')
  @HttpCode(200)
  @AcceptsWriteKey()
  @RequirePermission('tracking:write')
  @ApiOperation({ summary: 'Record what a person did (Segment track)', description: INTAKE })
  @ApiBody({ type: TrackCallDto })
  @ApiOkResponse({ type: TrackingAnswerDto })
  @ApiErrors(INTAKE_ERRORS)
  track(@Body() body: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.intake.ingest('track', body, who);
  }

  @Post('identify')
  @HttpCode(200)
  @AcceptsWriteKey()
  @RequirePermission('tracking:write')
  @ApiOperation({
    summary: 'Say who a person is (Segment identify)',
    description: `${INTAKE} Traits that fail the contact's validation are not applied and are listed in the stored call's \`flags.problems\`; the others are.`,
  })
  @ApiBody({ type: IdentifyCallDto })
  @ApiOkResponse({ type: TrackingAnswerDto })
  @ApiErrors(INTAKE_ERRORS)
  identify(@Body() body: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.intake.ingest('identify', body, who);
  }

  @LargeJsonBody()
  @Post('batch')
  @HttpCode(200)
  @AcceptsWriteKey()
  @RequirePermission('tracking:write')
  @ApiOperation({ summary: 'Up to 500 track and identify calls, at most 500 KB (Segment batch)', description: INTAKE })
  @ApiBody({ type: TrackingBatchDto })
  @ApiOkResponse({ type: TrackingAnswerDto })
  @ApiErrors(INTAKE_ERRORS)
  batch(@Body() body: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.intake.ingest('batch', body, who);
  }
}

@ApiTags('tracking')
@Controller('api/tracking')
export class TrackingController {
  constructor(private readonly tracking: TrackingService) {}

  @Get('definitions')
  @RequirePermission('tracking:read')
  @ApiOperation({ summary: "The event names received, each with its count, first and last seen and its properties' observed types" })
  @ApiOkResponse({ type: TrackingDefinitionsDto })
  @ApiErrors({ status: 400, description: 'A query parameter: this list takes none' })
  definitions(@Query() query: Record<string, unknown>) {
    return this.tracking.definitions(query);
  }

  @Get('events')
  @RequirePermission('tracking:read')
  @ApiOperation({
    summary: 'List tracked events (newest first)',
    description:
      'List parameters: page, limit, orderBy, orderByDir, filter (name, contact.id, occurredAt, type, userId, anonymousId, properties.<key>...), after, count, fields.',
  })
  @ApiEnvelope('events', TrackedEventDto, { list: true })
  @ApiListQuery(TRACKED_EVENT_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.tracking.list(query);
  }

  @Post('events/search')
  @HttpCode(200)
  @RequirePermission('tracking:read')
  @ApiOperation({
    summary: 'Search tracked events: the list with its parameters as a JSON body, the filter in its JSON form',
    description: 'Answers what GET /api/tracking/events answers.',
  })
  @ApiListSearch('events', TrackedEventDto, TRACKED_EVENT_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.tracking.list(searchQuery(body));
  }
}

@ApiTags('tracking')
@Controller('api/contacts')
export class ContactTimelineController {
  constructor(private readonly tracking: TrackingService) {}

  @Get(':id/timeline')
  @RequirePermission('tracking:read', 'contacts:read')
  @ApiOperation({
    summary: "Everything about a contact, newest first: its tracked events and its records' events",
    description:
      'One stream of the tracked events attributed to the contact (track and identify calls, anonymous ones once linked, in their place by ' +
      'timestamp) and the events of the change feed about it (created, updated with the changed properties, campaign membership, text messages, ' +
      "deals, activities...; kept as long as the contact: past the feed's EVENT_RETENTION_DAYS they are read from its record history). " +
      'Each item `{ at, kind, type, summary, data }`. Page with `after` = the previous `next`.',
  })
  @ApiQuery({ name: 'after', required: false, type: String, description: 'The cursor: `next` of the previous page' })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 200, default: 30 } })
  @ApiQuery({
    name: 'types',
    required: false,
    type: String,
    description: 'Comma-separated: `tracked` (every tracked event), `record` (every record event), `identify`, event names, change-feed event types',
  })
  @ApiQuery({ name: 'from', required: false, type: String, description: 'Items at or after this ISO 8601 date-time' })
  @ApiQuery({ name: 'to', required: false, type: String, description: 'Items before this ISO 8601 date-time' })
  @ApiOkResponse({ type: TimelineDto })
  @ApiErrors({ status: 400, description: 'A malformed cursor or date-time, a limit outside 1..200, or an unknown parameter' })
  timeline(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.tracking.timeline(id, query);
  }
}
