import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import { DealReportsService } from './deal-reports.service.js';
import { ForecastDto, FunnelDto, SnapshotDto } from './deal-reports.dto.js';

const ID = { type: 'integer', minimum: 1, maximum: 2147483647 } as const;
const INSTANT = { type: 'string', description: 'ISO 8601 date-time with an offset, or a date YYYY-MM-DD (its midnight UTC)' } as const;
const FILTERS = "Optional filters: ownerId (the deal owner), companyId (the deal's company).";

/** The pipeline reports, computed from the deals and their stage ledger (the deals feature serves them under the pipeline's path). */
@ApiTags('pipelines')
@Controller('api/pipelines')
export class PipelineReportsController {
  constructor(private readonly reports: DealReportsService) {}

  @Get(':id/forecast')
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: 'Forecast: open deals of the pipeline by expected close date, with count, value and weighted value (value × probability)',
    description: `from and to are dates (inclusive; default this month and the eleven after it; at most 5 years apart). groupBy month (default) or owner. ${FILTERS}`,
  })
  @ApiQuery({ name: 'from', required: false, schema: { type: 'string', format: 'date' } })
  @ApiQuery({ name: 'to', required: false, schema: { type: 'string', format: 'date' } })
  @ApiQuery({ name: 'groupBy', required: false, schema: { type: 'string', enum: ['month', 'owner'] } })
  @ApiQuery({ name: 'ownerId', required: false, schema: ID })
  @ApiQuery({ name: 'companyId', required: false, schema: ID })
  @ApiEnvelope('forecast', ForecastDto)
  forecast(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.reports.forecast(id, query);
  }

  @Get(':id/funnel')
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: 'Funnel: per stage, the deals that entered it in [from, to), how many moved on or were lost, conversions, median and p90 time in stage',
    description: `From the stage ledger. Default window: the 90 days up to now; at most 5 years. ${FILTERS}`,
  })
  @ApiQuery({ name: 'from', required: false, schema: INSTANT })
  @ApiQuery({ name: 'to', required: false, schema: INSTANT })
  @ApiQuery({ name: 'ownerId', required: false, schema: ID })
  @ApiQuery({ name: 'companyId', required: false, schema: ID })
  @ApiEnvelope('funnel', FunnelDto)
  funnel(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.reports.funnel(id, query);
  }

  @Get(':id/snapshot')
  @RequirePermission('deals:read')
  @ApiOperation({
    summary: 'Snapshot: per stage, the deals, value and weighted value as they stood at asOf (from the stage ledger)',
    description:
      'A deal created after asOf is absent; one that changed stage since counts where it was (with the value and probability recorded when it entered that ' +
      `stage); one still in the same stage counts with its current value. asOf defaults to now; in the future it is a 400. ${FILTERS}`,
  })
  @ApiQuery({ name: 'asOf', required: false, schema: INSTANT })
  @ApiQuery({ name: 'ownerId', required: false, schema: ID })
  @ApiQuery({ name: 'companyId', required: false, schema: ID })
  @ApiEnvelope('snapshot', SnapshotDto)
  snapshot(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.reports.snapshot(id, query);
  }
}
