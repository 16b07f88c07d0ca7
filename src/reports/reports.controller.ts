import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { CreateReportDto, ReportRecordDto, ReportResultsEnvelopeDto, ReportRunDto, UpdateReportDto } from './report.dto.js';
import { ReportsService } from './reports.service.js';
import { REPORT_LIST_SPEC } from './reports.repository.js';

@ApiTags('reports')
@Controller('api/reports')
export class ReportsController {
  constructor(private readonly reports: ReportsService) {}

  @Get()
  @RequirePermission('reports:read')
  @ApiOperation({
    summary: 'List reports',
    description: 'List parameters: search (name, description), page, limit, orderBy, orderByDir; filters type (sales|marketing), isPublished.',
  })
  @ApiEnvelope('reports', ReportRecordDto, { list: true })
  @ApiListQuery(REPORT_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.reports.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('reports:read')
  @ApiOperation({
    summary: 'Search reports: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('reports', ReportRecordDto, REPORT_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.reports.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('reports:write')
  @ApiOperation({
    summary: 'Create a report',
    description:
      'filters and columns are validated for the type. A schedule (daily/weekly/monthly, UTC) creates a job scheduler that runs the report on its period while it is published.',
  })
  @ApiEnvelope('report', ReportRecordDto, { status: 201 })
  async create(@Body() dto: CreateReportDto, @CurrentPrincipal() who: Principal) {
    return { report: await this.reports.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('reports:read')
  @ApiEnvelope('report', ReportRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { report: await this.reports.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('reports:write')
  @ApiOperation({ summary: 'Edit a report: changes only the supplied properties (the schedule follows); 404 when the id does not exist' })
  @ApiEnvelope('report', ReportRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateReportDto, @CurrentPrincipal() who: Principal) {
    return { report: await this.reports.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @RequirePermission('reports:write')
  @ApiOperation({ summary: 'Replace a report (200), or create one with a new id when the id does not exist (201)' })
  @ApiEnvelope('report', ReportRecordDto)
  @ApiEnvelope('report', ReportRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateReportDto, @CurrentPrincipal() who: Principal, @Res({ passthrough: true }) res: Response) {
    const { created, report } = await this.reports.put(id, dto, who);
    res.status(created ? 201 : 200);
    return { report };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('reports:delete')
  @ApiOperation({ summary: 'Delete a report with its stored results and its schedule; answers the report as it was' })
  @ApiEnvelope('report', ReportRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { report: await this.reports.remove(id) };
  }

  @Post(':id/run')
  @HttpCode(200)
  @RequirePermission('reports:write')
  @ApiOperation({
    summary: 'Run a report now',
    description:
      'Queues a run and answers at once with `{ status: "queued", message, jobId }`. A worker computes the result, stores it, sets lastRun and leaves a `report_ready` notification for the report\'s creator. 503 `unavailable` when the job queue is unreachable (nothing is queued).',
  })
  @ApiOkResponse({ type: ReportRunDto })
  run(@Param('id', IdPipe) id: number) {
    return this.reports.run(id);
  }

  @Get(':id/results')
  @RequirePermission('reports:read')
  @ApiOperation({
    summary: 'Latest result of a report',
    description: '`{ results: { generatedAt, data, summary } }` from the latest finished run; 404 before the first run has finished.',
  })
  @ApiOkResponse({ type: ReportResultsEnvelopeDto })
  results(@Param('id', IdPipe) id: number) {
    return this.reports.latestResult(id);
  }
}
