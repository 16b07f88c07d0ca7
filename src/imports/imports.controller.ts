import { Controller, createParamDecorator, type ExecutionContext, Get, HttpCode, Param, Post, Query, Res, UseInterceptors } from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOperation, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { Consumes } from '../server/content-type.guard.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { CreateImportDto, ImportErrorDto, ImportRecordDto, JSON_IMPORT_MAX_ROWS } from './import.dto.js';
import type { StoredImportFile } from './import-upload.engine.js';
import { ImportsService } from './imports.service.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';

/** The body of POST /api/imports: a JSON body, or the form fields and the file multer stored. */
interface ImportInput {
  body: unknown;
  file: StoredImportFile | undefined;
  multipart: boolean;
}

const ImportRequest = createParamDecorator((_: unknown, ctx: ExecutionContext): ImportInput => {
  const req = ctx.switchToHttp().getRequest<Request & { file?: StoredImportFile }>();
  return { body: req.body, file: req.file, multipart: Boolean(req.is('multipart/form-data')) };
});

@ApiTags('imports')
@ApiExtraModels(ImportErrorDto)
@Controller('api/imports')
export class ImportsController {
  constructor(private readonly imports: ImportsService) {}

  @LargeJsonBody()
  @Post()
  @HttpCode(202)
  @RequirePermission('imports:write')
  @Consumes('application/json', 'multipart/form-data')
  @UseInterceptors(FileInterceptor('file'))
  @ApiOperation({
    summary: 'Start an import job: a CSV upload (multipart/form-data) or JSON rows',
    description:
      'multipart/form-data: the CSV in the form field `file` (UTF-8 with or without BOM, a header line, `,` `;` or tab separated, detected; ' +
      'at most IMPORT_MAX_BYTES, default 200 MiB, 413 beyond; streamed to storage), the options as form fields (`mapping` as JSON text). ' +
      `JSON: the options and \`rows\` (at most ${JSON_IMPORT_MAX_ROWS} objects). Needs the object's write permission too (contacts:write, ` +
      'companies:write or deals:write; 403 otherwise). Answers 202 at once; a worker validates the file (header against the mapping, row count) ' +
      'and writes it in chunks through the batch write path (each row as its single-record route: validation, custom fields, events). ' +
      'Follow it with GET /api/imports/{id}; it ends with an import.completed event and a notification. CSV cells are typed for the ' +
      'property (numbers, booleans true/false/1/0/yes/no, multiselect values joined with `|`). Idempotency-Key is taken on both forms ' +
      '(an upload is matched by its size: a retry of the same upload answers the same import).',
  })
  @ApiConsumes('application/json', 'multipart/form-data')
  @ApiBody({ type: CreateImportDto })
  @ApiEnvelope('import', ImportRecordDto, { status: 202 })
  @ApiErrors({ status: 403, description: "The token lacks imports:write or the object's write permission" })
  async create(@ImportRequest() input: ImportInput, @CurrentPrincipal() who: Principal) {
    const record = input.multipart
      ? await this.imports.createFromUpload(input.body, input.file, who)
      : await this.imports.createFromRows(await this.imports.validateJson(input.body), who);
    return { import: record };
  }

  @Get(':id')
  @RequirePermission('imports:read')
  @ApiOperation({ summary: 'An import job: status, counts, progress (0..1) and timings' })
  @ApiEnvelope('import', ImportRecordDto)
  async get(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { import: await this.imports.get(id, who) };
  }

  @Get(':id/errors')
  @RequirePermission('imports:read')
  @ApiOperation({
    summary: "An import's row errors: row number, column, code and message",
    description:
      'In the order they were recorded (row order within each chunk; chunks may be written in parallel), `limit` (1..1000, default 100) at a time; pass `next` as `after` for the next page. `format=csv` answers every error as a CSV file (row, column, code, message).',
  })
  @ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000 } })
  @ApiQuery({ name: 'after', required: false, schema: { type: 'string', pattern: '^[0-9]{1,16}$' } })
  @ApiQuery({ name: 'format', required: false, schema: { type: 'string', enum: ['json', 'csv'] } })
  @ApiProduces('application/json', 'text/csv')
  @ApiResponse({
    status: 200,
    description: 'The errors (JSON), or all of them as CSV with format=csv',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['total', 'errors', 'next'],
          properties: {
            total: { type: 'integer' },
            errors: { type: 'array', items: { $ref: '#/components/schemas/ImportErrorDto' } },
            next: { type: 'string', nullable: true },
          },
        },
      },
      'text/csv': { schema: { type: 'string' } },
    },
  })
  @ApiErrors({
    status: 400,
    description: 'A bad parameter: format not json or csv, limit outside 1..1000, after not a whole number, or an unknown parameter; `details` names it',
  })
  async errors(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>, @CurrentPrincipal() who: Principal, @Res() res: Response) {
    const q = this.imports.errorsQuery(query);
    if (q.format === 'csv') await this.imports.errorsCsv(id, res, who);
    else res.status(200).json(await this.imports.errors(id, q, who));
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @RequirePermission('imports:write')
  @ApiOperation({
    summary: 'Cancel an import: the worker stops before its next chunk; rows already written stay',
    description: '409 when the import has already ended (completed, failed or canceled).',
  })
  @ApiEnvelope('import', ImportRecordDto)
  @ApiErrors({ status: 409, description: 'The import has already ended' })
  async cancel(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { import: await this.imports.cancel(id, who) };
  }
}
