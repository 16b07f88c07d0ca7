import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { CreatePointGroupDto, PointGroupRecordDto, UpdatePointGroupDto } from './point-group.dto.js';
import { PointGroupsService } from './point-groups.service.js';
import { POINT_GROUP_LIST_SPEC } from './point-groups.repository.js';

/** Served under both spellings, /api/point-groups and /api/point_groups, by the same handlers. */
@ApiTags('point groups')
@Controller(['api/point-groups', 'api/point_groups'])
export class PointGroupsController {
  constructor(private readonly groups: PointGroupsService) {}

  @Get()
  @RequirePermission('pointGroups:read')
  @ApiOperation({
    summary: 'List point groups',
    description: 'List parameters: search (name, description), page, limit, orderBy, orderByDir; filter isPublished (true/false/1/0).',
  })
  @ApiEnvelope('pointGroups', PointGroupRecordDto, { list: true })
  @ApiListQuery(POINT_GROUP_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.groups.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('pointGroups:read')
  @ApiOperation({
    summary: 'Search point groups: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('pointGroups', PointGroupRecordDto, POINT_GROUP_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.groups.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('pointGroups:write')
  @ApiOperation({ summary: 'Create a point group', description: 'name, minimumPoints and maximumPoints are required; 0 <= minimumPoints <= maximumPoints.' })
  @ApiEnvelope('pointGroup', PointGroupRecordDto, { status: 201 })
  async create(@Body() dto: CreatePointGroupDto, @CurrentPrincipal() who: Principal) {
    return { pointGroup: await this.groups.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('pointGroups:read')
  @ApiOperation({ summary: 'Get a point group' })
  @ApiEnvelope('pointGroup', PointGroupRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { pointGroup: await this.groups.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('pointGroups:write')
  @ApiOperation({ summary: 'Edit a point group: changes only the supplied properties (the range must still hold); 404 when the id does not exist' })
  @ApiEnvelope('pointGroup', PointGroupRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdatePointGroupDto, @CurrentPrincipal() who: Principal) {
    return { pointGroup: await this.groups.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('pointGroups:write')
  @ApiOperation({ summary: 'Replace a point group (200), or create one with a new id when the id does not exist (201)' })
  @ApiEnvelope('pointGroup', PointGroupRecordDto)
  @ApiEnvelope('pointGroup', PointGroupRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreatePointGroupDto, @CurrentPrincipal() who: Principal) {
    const { created, pointGroup } = await this.groups.put(id, dto, who);
    return putOutcome(created, { pointGroup });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('pointGroups:delete')
  @ApiOperation({ summary: 'Delete a point group; answers the point group as it was' })
  @ApiEnvelope('pointGroup', PointGroupRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { pointGroup: await this.groups.remove(id) };
  }
}
