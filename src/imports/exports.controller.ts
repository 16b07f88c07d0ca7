import { Body, Controller, Get, Header, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { SignedLink } from '../common/route-access.js';
import { CreateExportDto, ExportRecordDto } from './import.dto.js';
import { ExportsService } from './exports.service.js';

@ApiTags('exports')
@Controller('api/exports')
export class ExportsController {
  constructor(private readonly exports: ExportsService) {}

  @Post()
  @HttpCode(202)
  @RequirePermission('exports:write')
  @ApiOperation({
    summary: 'Start an export job: the records of an object matching a filter, as CSV or JSON Lines',
    description:
      "Needs the object's read permission too (contacts:read, companies:read or deals:read; 403 otherwise). `filter` is the object's list " +
      'filter language (a bad filter is the 400 its list answers). Custom fields are columns `fields.<alias>`. Answers 202 at once; a worker ' +
      'streams the result to storage; GET /api/exports/{id} gives its status and, once completed, a signed download link.',
  })
  @ApiEnvelope('export', ExportRecordDto, { status: 202 })
  @ApiErrors({ status: 403, description: "The token lacks exports:write or the object's read permission" })
  async create(@Body() dto: CreateExportDto, @CurrentPrincipal() who: Principal) {
    return { export: await this.exports.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('exports:read')
  // The download link is a credential: no cache may keep it.
  @Header('Cache-Control', 'private, no-store')
  @ApiOperation({
    summary: 'An export job: status, rows, size and, once completed, a signed download link',
    description:
      'Each read signs a new link, valid for EXPORT_LINK_TTL_SECONDS (default 1 hour); the link needs no token (sent with `Cache-Control: private, no-store`). ' +
      "Needs the exported object's read permission too, as creating the export does (403 otherwise). An export made by another user is a 404, " +
      'unless the token holds `*`.',
  })
  @ApiEnvelope('export', ExportRecordDto)
  @ApiErrors({ status: 403, description: "The token lacks exports:read or the exported object's read permission" })
  async get(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { export: await this.exports.get(id, who) };
  }

  @Get(':id/download')
  @SignedLink()
  @ApiOperation({
    summary: "Download an export's result through its signed link (no token; the link expires)",
    description: 'The URL comes from GET /api/exports/{id} (`download.url`). A link that is altered, expired or for an export not completed is a 401.',
  })
  @ApiQuery({ name: 'expires', required: true, schema: { type: 'string', pattern: '^[0-9]+$' } })
  @ApiQuery({ name: 'signature', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{64}$' } })
  @ApiProduces('text/csv', 'application/x-ndjson')
  @ApiResponse({
    status: 200,
    description: 'The file',
    content: { 'text/csv': { schema: { type: 'string' } }, 'application/x-ndjson': { schema: { type: 'string' } } },
  })
  @ApiErrors(
    { status: 400, description: 'The query string is not UTF-8 text or holds a NUL character' },
    { status: 401, description: 'The link is not valid or has expired' },
    { status: 404, description: 'No such export, or its result is no longer stored' },
  )
  async download(@Param('id', IdPipe) id: number, @Res() res: Response) {
    await this.exports.download(id, res);
  }
}
