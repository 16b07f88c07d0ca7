import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope } from '../common/openapi.js';
import { ApiBatchAnswers } from '../batch/batch.openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { ActivityRecordDto, CreateActivityDto, UpdateActivityDto } from './activity.dto.js';
import { ActivitiesService } from './activities.service.js';
import { ACTIVITY_LIST_SPEC } from './activities.repository.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';

@ApiTags('activities')
@Controller('api/activities')
export class ActivitiesController {
  constructor(private readonly activities: ActivitiesService) {}

  @Get()
  @RequirePermission('activities:read')
  @ApiOperation({
    summary: 'List activities',
    description: 'List parameters: search (subject, notes, outcome), page, limit, orderBy, orderByDir; filters type (call, email, meeting), contact_id.',
  })
  @ApiEnvelope('activities', ActivityRecordDto, { list: true })
  @ApiListQuery(ACTIVITY_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.activities.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('activities:read')
  @ApiOperation({
    summary: 'Search activities: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('activities', ActivityRecordDto, ACTIVITY_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.activities.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('activities:write')
  @ApiOperation({ summary: 'Create an activity (type, subject and contact_id required; contact_id must exist, else 400)' })
  @ApiEnvelope('activity', ActivityRecordDto, { status: 201 })
  async create(@Body() dto: CreateActivityDto, @CurrentPrincipal() who: Principal) {
    return { activity: await this.activities.create(dto, who) };
  }

  @LargeJsonBody()
  @Post('batch')
  @HttpCode(200)
  @RequirePermission('activities:write')
  @ApiOperation({
    summary: 'Create, update, upsert or delete up to 500 activities in one request (one request against the plan limit)',
    description:
      'Each item is written exactly as its single-record route would write it (same validation, same events, same errors) in its own savepoint; ' +
      'results come back in input order. `update`, `upsert` and `delete` items name their record by `id`; `upsert` without an id, or with one that does ' +
      'not exist, creates (as PUT does). Mode delete needs `activities:delete`. Two items naming one id: the later fails 409. With `atomic: true` any failure ' +
      'rolls the whole batch back (422 `batch_failed`).',
  })
  @ApiBatchAnswers()
  batch(@Body() dto: BatchWriteDto, @CurrentPrincipal() who: Principal) {
    return this.activities.batch(dto, who);
  }

  @Get(':id')
  @RequirePermission('activities:read')
  @ApiEnvelope('activity', ActivityRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { activity: await this.activities.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('activities:write')
  @ApiOperation({ summary: 'Edit an activity: changes only the supplied properties; 404 when the id does not exist' })
  @ApiEnvelope('activity', ActivityRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateActivityDto, @CurrentPrincipal() who: Principal) {
    return { activity: await this.activities.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('activities:write')
  @ApiOperation({
    summary: 'Replace an activity (200), or create one with a new id when the id does not exist (201)',
    description: 'Omitted optional properties (due_date, notes, outcome) are reset to null.',
  })
  @ApiEnvelope('activity', ActivityRecordDto)
  @ApiEnvelope('activity', ActivityRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateActivityDto, @CurrentPrincipal() who: Principal) {
    const { created, activity } = await this.activities.put(id, dto, who);
    return putOutcome(created, { activity });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('activities:delete')
  @ApiOperation({
    summary: 'Delete an activity; answers the activity as it was',
    description: 'Nothing else is deleted. Activities are also deleted with their contact (ON DELETE CASCADE).',
  })
  @ApiEnvelope('activity', ActivityRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { activity: await this.activities.remove(id) };
  }
}
