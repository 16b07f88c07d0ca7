import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiBatchAnswers } from '../batch/batch.openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { CreateDealDto, DealRecordDto, DealStageStayDto, UpdateDealDto } from './deal.dto.js';
import { DealsService } from './deals.service.js';
import { DEAL_LIST_SPEC } from './deals.repository.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';

const CLOSED_AT_RULE =
  'A deal sits in a stage of a pipeline: pipeline_id (default: the default pipeline), stage_id or stage (its name; in a strictStages pipeline an unknown name is a 400 ' +
  "listing the stages, in the others it adds an open stage), status (the stage's type: won or lost alone moves the deal to the first stage of that type). " +
  "Each stage change appends a row to the deal's stage history (GET /api/deals/{id}/stages). " +
  'Moving a deal to won or lost without closed_at stamps closed_at with the current time; a deal already won or lost keeps its ' +
  'closed_at; moving it back to open clears closed_at (a closed_at sent with status open is a 400). contact_id, owner_id and company_id must exist (400).';

@ApiTags('deals')
@Controller('api/deals')
export class DealsController {
  constructor(private readonly deals: DealsService) {}

  @Get()
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: 'List deals',
    description:
      'List parameters: search (title, stage, product), page, limit, orderBy, orderByDir; filters status (open, won, lost), contact_id, owner_id, company_id, ' +
      'pipeline_id, stage_id (and pipeline.id, stage.id in `filter`).',
  })
  @ApiEnvelope('deals', DealRecordDto, { list: true })
  @ApiListQuery(DEAL_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.deals.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: 'Search deals: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('deals', DealRecordDto, DEAL_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.deals.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('deals:write')
  @ApiOperation({
    summary: 'Create a deal (title, value and contact_id required; owner_id defaults to the calling user)',
    description: CLOSED_AT_RULE,
  })
  @ApiEnvelope('deal', DealRecordDto, { status: 201 })
  async create(@Body() dto: CreateDealDto, @CurrentPrincipal() who: Principal) {
    return { deal: await this.deals.create(dto, who) };
  }

  @LargeJsonBody()
  @Post('batch')
  @HttpCode(200)
  @RequirePermission('deals:write')
  @ApiOperation({
    summary: 'Create, update, upsert or delete up to 500 deals in one request (one request against the plan limit)',
    description:
      'Each item is written exactly as its single-record route would write it (same validation, same events, same errors) in its own savepoint; ' +
      'results come back in input order. `update`, `upsert` and `delete` items name their record by `id`; `upsert` without an id, or with one that does ' +
      'not exist, creates (as PUT does). Mode delete needs `deals:delete`. Two items naming one id: the later fails 409. With `atomic: true` any failure ' +
      'rolls the whole batch back (422 `batch_failed`).',
  })
  @ApiBatchAnswers()
  batch(@Body() dto: BatchWriteDto, @CurrentPrincipal() who: Principal) {
    return this.deals.batch(dto, who);
  }

  @Get(':id')
  @RequirePermission('deals:read')
  @ApiEnvelope('deal', DealRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { deal: await this.deals.get(id) };
  }

  @Get(':id/stages')
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: "A deal's stage history: every stage it entered (from the ledger), oldest first, with the time spent in each",
    description: 'The current stage counts its seconds up to now. A removed stage keeps its last name.',
  })
  @ApiEnvelope('stages', DealStageStayDto, { list: true })
  @ApiErrors({ status: 400, description: 'A query parameter was given: the history takes none' })
  async stages(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    const stages = await this.deals.stageHistory(id, query);
    return { total: stages.length, stages };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('deals:write')
  @ApiOperation({ summary: 'Edit a deal: changes only the supplied properties; 404 when the id does not exist', description: CLOSED_AT_RULE })
  @ApiEnvelope('deal', DealRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateDealDto, @CurrentPrincipal() who: Principal) {
    return { deal: await this.deals.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('deals:write')
  @ApiOperation({
    summary: 'Replace a deal (200), or create one with a new id when the id does not exist (201)',
    description: `Omitted optional properties are reset: status open, quantity 1, owner_id the calling user, the others null. ${CLOSED_AT_RULE}`,
  })
  @ApiEnvelope('deal', DealRecordDto)
  @ApiEnvelope('deal', DealRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateDealDto, @CurrentPrincipal() who: Principal) {
    const { created, deal } = await this.deals.put(id, dto, who);
    return putOutcome(created, { deal });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('deals:delete')
  @ApiOperation({
    summary: 'Delete a deal; answers the deal as it was',
    description: 'Nothing else is deleted. Deals are also deleted with their contact (ON DELETE CASCADE).',
  })
  @ApiEnvelope('deal', DealRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { deal: await this.deals.remove(id) };
  }
}
