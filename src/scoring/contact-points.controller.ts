import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { AddPointsDto, PointChangeEnvelopeDto, PointChangeRecordDto } from './scoring.dto.js';
import { POINT_HISTORY_LIST_SPEC } from './scoring.repository.js';
import { ScoringService } from './scoring.service.js';

/** A contact's points: the one route that changes them by hand, and the ledger behind them. */
@ApiTags('contacts')
@Controller('api/contacts')
export class ContactPointsController {
  constructor(private readonly scoring: ScoringService) {}

  @Post(':id/points')
  @HttpCode(201)
  @RequirePermission('contacts:write')
  @ApiOperation({
    summary: "Add (or, negative, remove) points: a ledger row and the contact's new points, in one transaction",
    description:
      'Body `{ delta, reason }`: delta not 0, at most 1,000,000 either way, and the points must stay within ±2^31 (400 naming delta). ' +
      'Concurrent changes of one contact all count. Crossing a published point group’s range writes contact.point_group_entered / _left.',
  })
  @ApiResponse({ status: 201, description: "{ pointChange, points }: the ledger row and the contact's points after it", type: PointChangeEnvelopeDto })
  addPoints(@Param('id', IdPipe) id: number, @Body() dto: AddPointsDto, @CurrentPrincipal() who: Principal) {
    return this.scoring.addManualPoints(id, dto.delta, dto.reason, who);
  }

  @Get(':id/points/history')
  @RequirePermission('contacts:read')
  @ApiOperation({
    summary: "A contact's point ledger, newest first by default",
    description:
      'List parameters: page, limit, orderBy (id, at), orderByDir (default desc), filter, after (cursor), count, fields. Every change of points is a row.',
  })
  @ApiEnvelope('pointChanges', PointChangeRecordDto, { list: true })
  @ApiListQuery(POINT_HISTORY_LIST_SPEC)
  history(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.scoring.history(id, query);
  }

  @Post(':id/points/history/search')
  @HttpCode(200)
  @RequirePermission('contacts:read')
  @ApiOperation({
    summary: "Search a contact's point ledger: the list with its parameters as a JSON body (filter in its JSON form)",
    description: 'Answers what GET /api/contacts/{id}/points/history answers (newest first by default).',
  })
  @ApiListSearch('pointChanges', PointChangeRecordDto, POINT_HISTORY_LIST_SPEC)
  searchHistory(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.scoring.history(id, searchQuery(body));
  }
}
