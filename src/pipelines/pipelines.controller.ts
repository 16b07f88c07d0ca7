import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { fieldError } from '../common/errors.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { AddStageDto, CreatePipelineDto, PipelineRecordDto, UpdatePipelineDto, UpdateStageDto } from './pipeline.dto.js';
import { PipelinesService } from './pipelines.service.js';
import { PIPELINE_LIST_SPEC } from './pipelines.repository.js';

const STAGES_RULE =
  'A pipeline needs at least one open stage; stage names are unique in a pipeline; probabilities are 0..100 (400 otherwise). ' +
  'In `stages`, an item with an `id` keeps that stage, one without adds a stage, and a current stage left out is removed (409 when it holds deals).';
const STATE_CONFLICT = { status: 409, description: 'A stage or pipeline that holds deals, the default pipeline, or a stage name taken meanwhile' };

/** `moveDealsTo` of a stage removal: absent, or a stage id. */
function stageIdParam(raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^[1-9]\d{0,9}$/.test(raw) || Number(raw) > 2147483647) throw fieldError('moveDealsTo', 'must be a stage id');
  return Number(raw);
}

@ApiTags('pipelines')
@Controller('api/pipelines')
export class PipelinesController {
  constructor(private readonly pipelines: PipelinesService) {}

  @Get()
  @RequirePermission('pipelines:read')
  @ApiOperation({
    summary: 'List pipelines (each with its stages in order)',
    description: 'List parameters: search (name), page, limit, orderBy, orderByDir; filters isDefault, strictStages (true/false/1/0).',
  })
  @ApiEnvelope('pipelines', PipelineRecordDto, { list: true })
  @ApiListQuery(PIPELINE_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.pipelines.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('pipelines:read')
  @ApiOperation({
    summary: 'Search pipelines: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('pipelines', PipelineRecordDto, PIPELINE_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.pipelines.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('pipelines:write')
  @ApiOperation({ summary: 'Create a pipeline with its stages (strictStages true unless given)', description: STAGES_RULE })
  @ApiEnvelope('pipeline', PipelineRecordDto, { status: 201 })
  async create(@Body() dto: CreatePipelineDto, @CurrentPrincipal() who: Principal) {
    return { pipeline: await this.pipelines.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('pipelines:read')
  @ApiOperation({ summary: 'Get a pipeline with its stages in order' })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { pipeline: await this.pipelines.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('pipelines:write')
  @ApiOperation({ summary: 'Edit a pipeline: changes only the supplied properties; 404 when the id does not exist', description: STAGES_RULE })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  @ApiErrors(STATE_CONFLICT)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdatePipelineDto, @CurrentPrincipal() who: Principal) {
    return { pipeline: await this.pipelines.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('pipelines:write')
  @ApiOperation({
    summary: 'Replace a pipeline (200), or create one with a new id when the id does not exist (201)',
    description: `Omitted optional properties are reset (strictStages true); the default pipeline stays the default. ${STAGES_RULE}`,
  })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  @ApiEnvelope('pipeline', PipelineRecordDto, { status: 201 })
  @ApiErrors(STATE_CONFLICT)
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreatePipelineDto, @CurrentPrincipal() who: Principal) {
    const { created, pipeline } = await this.pipelines.put(id, dto, who);
    return putOutcome(created, { pipeline });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('pipelines:delete')
  @ApiOperation({
    summary: 'Delete a pipeline without deals; answers the pipeline as it was',
    description: 'The default pipeline, or one that holds deals, is a 409.',
  })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  @ApiErrors(STATE_CONFLICT)
  async remove(@Param('id', IdPipe) id: number) {
    return { pipeline: await this.pipelines.remove(id) };
  }

  @Post(':id/stages')
  @HttpCode(201)
  @RequirePermission('pipelines:write')
  @ApiOperation({ summary: 'Add a stage to a pipeline (last, or at `order`); answers the pipeline', description: STAGES_RULE })
  @ApiEnvelope('pipeline', PipelineRecordDto, { status: 201 })
  @ApiErrors(STATE_CONFLICT)
  async addStage(@Param('id', IdPipe) id: number, @Body() dto: AddStageDto, @CurrentPrincipal() who: Principal) {
    return { pipeline: await this.pipelines.addStage(id, dto, who) };
  }

  @Patch(':id/stages/:stageId')
  @RequirePermission('pipelines:write')
  @ApiOperation({
    summary: 'Rename a stage, change its probability or type, or move it to `order`; answers the pipeline',
    description: `The stage's deals take its new name, and its type as their status. ${STAGES_RULE}`,
  })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  @ApiErrors(STATE_CONFLICT)
  async updateStage(
    @Param('id', IdPipe) id: number,
    @Param('stageId', IdPipe) stageId: number,
    @Body() dto: UpdateStageDto,
    @CurrentPrincipal() who: Principal,
  ) {
    return { pipeline: await this.pipelines.updateStage(id, stageId, dto, who) };
  }

  @Delete(':id/stages/:stageId')
  @RequirePermission('pipelines:write')
  @ApiOperation({
    summary: 'Remove a stage; answers the pipeline',
    description:
      'A stage that holds deals needs `moveDealsTo` (another stage of the pipeline, 409 without it); each deal moved gets its ledger row and events. ' +
      'The last open stage cannot be removed (400).',
  })
  @ApiQuery({ name: 'moveDealsTo', required: false, schema: { type: 'integer', minimum: 1, maximum: 2147483647 } })
  @ApiEnvelope('pipeline', PipelineRecordDto)
  @ApiErrors(STATE_CONFLICT)
  async removeStage(
    @Param('id', IdPipe) id: number,
    @Param('stageId', IdPipe) stageId: number,
    @Query() query: Record<string, unknown>,
    @CurrentPrincipal() who: Principal,
  ) {
    const unknown = Object.keys(query).filter((k) => k !== 'moveDealsTo');
    if (unknown.length) throw fieldError(unknown[0], 'is not a parameter of this route (moveDealsTo is)');
    return { pipeline: await this.pipelines.removeStage(id, stageId, stageIdParam(query.moveDealsTo), who) };
  }
}
