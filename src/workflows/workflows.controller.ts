import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { fieldError, validationError } from '../common/errors.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { WorkflowDryRun } from './workflow-dry-run.js';
import {
  CreateWorkflowDto,
  DryRunDto,
  DryRunResultDto,
  MigrateDto,
  MigrateResultDto,
  UpdateWorkflowDto,
  WorkflowRecordDto,
  WorkflowStatsDto,
} from './workflow.dto.js';
import { WORKFLOW_LIST_SPEC } from './workflows.repository.js';
import { WorkflowsService } from './workflows.service.js';

const RULES =
  'The definition is checked on save; a 400 names the step key and field: every next names a step, every step is reachable from the first, ' +
  'no cycle without a wait, at most 200 steps, known step types with their properties, filters that compile (the contacts filter language), ' +
  'segments, campaigns, users, webhooks and text messages that exist, a webhook URL the webhook rules allow, a cron that parses, an IANA time zone. ' +
  'A webhook step given by url gets its own webhook subscription on save (answered as the step’s webhookId). Saving the trigger, steps or settings of a workflow that is not a ' +
  'draft creates a new version: running enrollments stay on theirs (see POST /api/workflows/{id}/migrate). Becoming active, a ' +
  'segment_entered workflow enrols the segment’s current members (unless trigger.enrollExisting is false): the first 5,000 before the answer, ' +
  'the rest in the background, 50,000 per transaction. A webhook step waits (status waiting) until its delivery settles: a 2xx goes on, ' +
  'a refusal (4xx other than 408/429) or retries that ran out end the enrollment failed with the status and reason.';

/** `?force=true|false` of a delete (any other parameter is a 400). */
function forceOf(query: Record<string, unknown>): boolean {
  const unknown = Object.keys(query).filter((k) => k !== 'force');
  if (unknown.length)
    throw validationError(
      `Unknown query parameter ${unknown.join(', ')}`,
      unknown.map((field) => ({ field, message: 'is not a parameter of this route' })),
    );
  const f = query.force;
  if (f === undefined || f === 'false') return false;
  if (f === 'true') return true;
  throw fieldError('force', 'must be true or false');
}

@ApiTags('workflows')
@Controller('api/workflows')
export class WorkflowsController {
  constructor(
    private readonly workflows: WorkflowsService,
    private readonly dryRuns: WorkflowDryRun,
  ) {}

  @Get()
  @RequirePermission('workflows:read')
  @ApiOperation({
    summary: 'List workflows (each with its enrollment counts)',
    description:
      'List parameters: search (name, description), page, limit, orderBy, orderByDir, modifiedSince; filters status, triggerType; filter, after, count, fields.',
  })
  @ApiEnvelope('workflows', WorkflowRecordDto, { list: true })
  @ApiListQuery(WORKFLOW_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.workflows.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('workflows:read')
  @ApiOperation({ summary: 'Search workflows: the list with its parameters as a JSON body', description: 'Answers what the GET list answers.' })
  @ApiListSearch('workflows', WorkflowRecordDto, WORKFLOW_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.workflows.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('workflows:write')
  @ApiOperation({ summary: 'Create a workflow (a draft unless status says otherwise)', description: RULES })
  @ApiEnvelope('workflow', WorkflowRecordDto, { status: 201 })
  async create(@Body() dto: CreateWorkflowDto, @CurrentPrincipal() who: Principal) {
    return { workflow: await this.workflows.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('workflows:read')
  @ApiEnvelope('workflow', WorkflowRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { workflow: await this.workflows.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('workflows:write')
  @ApiOperation({ summary: 'Edit a workflow: changes only the supplied properties (status pauses, resumes, archives)', description: RULES })
  @ApiEnvelope('workflow', WorkflowRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateWorkflowDto, @CurrentPrincipal() who: Principal) {
    return { workflow: await this.workflows.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('workflows:write')
  @ApiOperation({
    summary: 'Replace a workflow (200), or create one with a new id when the id does not exist (201)',
    description: `Omitted optional properties are cleared (status: draft). ${RULES}`,
  })
  @ApiEnvelope('workflow', WorkflowRecordDto)
  @ApiEnvelope('workflow', WorkflowRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateWorkflowDto, @CurrentPrincipal() who: Principal) {
    const { created, workflow } = await this.workflows.put(id, dto, who);
    return putOutcome(created, { workflow });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('workflows:delete')
  @ApiOperation({
    summary: 'Delete a workflow with its versions and enrollments; answers the workflow as it was',
    description: 'While enrollments run it is a 409, unless ?force=true: they exit first (workflow.exited each).',
  })
  @ApiQuery({ name: 'force', required: false, schema: { type: 'boolean', default: false } })
  @ApiErrors({ status: 409, description: 'Enrollments run and force is not true' })
  @ApiEnvelope('workflow', WorkflowRecordDto)
  async remove(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return { workflow: await this.workflows.remove(id, forceOf(query)) };
  }

  @Get(':id/stats')
  @RequirePermission('workflows:read')
  @ApiOperation({
    summary:
      'Per step: enrollments there now, runs completed and failed; for the workflow: entered, active, completed, converted, conversion rate, median time to convert',
  })
  @ApiResponse({ status: 200, type: WorkflowStatsDto })
  stats(@Param('id', IdPipe) id: number) {
    return this.workflows.stats(id);
  }

  @Post(':id/dry-run')
  @HttpCode(200)
  @RequirePermission('workflows:read', 'contacts:read')
  @ApiOperation({
    summary: 'The path a contact would take now, with each branch decision and why and each wait’s due time; nothing is written',
    description: 'With `definition` ({ steps, trigger?, settings? }), a draft definition is run instead of the saved one (checked as on save).',
  })
  @ApiResponse({ status: 200, type: DryRunResultDto })
  dryRun(@Param('id', IdPipe) id: number, @Body() dto: DryRunDto) {
    return this.dryRuns.run(id, dto);
  }

  @Post(':id/migrate')
  @HttpCode(200)
  @RequirePermission('workflows:write')
  @ApiOperation({
    summary: 'Move the running enrollments of an older version to the current one, their step keys mapped',
    description:
      'Keys not in map stay as they are and must exist in the current version (400 naming the key otherwise). Waiting enrollments keep their due time.',
  })
  @ApiResponse({ status: 200, type: MigrateResultDto })
  migrate(@Param('id', IdPipe) id: number, @Body() dto: MigrateDto) {
    return this.workflows.migrate(id, dto);
  }
}
