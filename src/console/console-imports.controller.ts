import {
  type ArgumentsHost,
  Body,
  Catch,
  type ExceptionFilter,
  Controller,
  Get,
  Inject,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { AppError, fieldError } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { IMPORT_CHOICES, ImportsService, type StoredImportFile } from '../imports/imports.service.js';
import { Consumes } from '../server/content-type.guard.js';
import { ConsoleImportsService } from './console-imports.service.js';
import { importPage, importsPage, mappingPage } from './console-imports.views.js';
import { chromeOf, errorsByField, FORM, mayDo, requirePermission, seeOther, sendPage } from './console-http.js';
import { ConsoleUploadCsrf } from './console-upload.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn, SignedInUpload } from './console.guard.js';

const ERRORS_SHOWN = 50;
/** How often a running import's page polls its progress. */
const POLL_MS = 1000;

/** A refusal the form shows next to its fields (a 4xx AppError); anything else goes on to the error page. */
const formError = (e: unknown): e is AppError => e instanceof AppError && e.status < 500 && e.status !== 401 && e.code !== 'not_found';

/**
 * The upload form's refusals, from the handler or from multer's storage (a file that is not UTF-8
 * text, larger than IMPORT_MAX_BYTES): the form again with the message next to its field. A
 * forged form (403) and everything else go to the console's usual filter.
 */
@Catch()
class ConsoleUploadFilter implements ExceptionFilter {
  constructor(
    private readonly fallback: ConsoleExceptionFilter,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const req = host.switchToHttp().getRequest<ConsoleRequest>();
    const res = host.switchToHttp().getResponse<Response>();
    if (!formError(exception) || exception.code === 'forbidden' || !req.console || res.headersSent || !(req.headers.accept ?? '').includes('text/html')) {
      this.fallback.catch(exception, host);
      return;
    }
    const body = (req.body ?? {}) as Record<string, unknown>;
    const object = typeof body.object === 'string' ? body.object : undefined;
    for (const [k, v] of Object.entries(exception.headers ?? {})) res.setHeader(k, v);
    sendPage(
      res,
      exception.status,
      importsPage(chromeOf(req), {
        mayWrite: true,
        objects: IMPORT_CHOICES.objects,
        maxBytes: this.config.importMaxBytes,
        object,
        errors: errorsByField(exception),
      }),
    );
  }
}

/**
 * Imports in the console: upload a CSV, map its columns on the next page, then follow the import
 * (progress, counts, row errors as CSV). Through ImportsService as POST /api/imports and
 * GET /api/imports/{id} (imports:write to start one, imports:read to look; an import of another
 * user is a 404).
 */
@ApiExcludeController()
@Controller('account/imports')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleImportsController {
  constructor(
    private readonly imports: ImportsService,
    private readonly uploads: ConsoleImportsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  lookup(@Req() req: ConsoleRequest, @Res() res: Response): void {
    const who = signedIn(req).principal;
    requirePermission(who, 'imports:read');
    sendPage(
      res,
      200,
      importsPage(chromeOf(req), { mayWrite: mayDo(who, 'imports:write'), objects: IMPORT_CHOICES.objects, maxBytes: this.config.importMaxBytes }),
    );
  }

  /** The upload (multipart; its CSRF token checked before the file is stored): 303 to the mapping form. */
  @Post('upload')
  @SignedInUpload()
  @Consumes('multipart/form-data')
  @UseInterceptors(FileInterceptor('file'), ConsoleUploadCsrf)
  @UseFilters(ConsoleUploadFilter)
  async upload(@Req() req: ConsoleRequest & { file?: StoredImportFile }, @Body() body: unknown, @Res() res: Response): Promise<void> {
    seeOther(res, `/account/imports/uploads/${await this.uploads.stage(signedIn(req), body, req.file)}`);
  }

  @Get('uploads/:id')
  async mapping(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const form = await this.uploads.mappingForm(signedIn(req), id);
    if ('started' in form) seeOther(res, `/account/imports/${form.started}`);
    else sendPage(res, 200, mappingPage(chromeOf(req), form));
  }

  /** Starts the import with the posted mapping: 303 to its page, or the form again with the API's errors next to their fields. */
  @Post('uploads/:id')
  @Consumes(FORM)
  async start(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const session = signedIn(req);
    const current = await this.uploads.mappingForm(session, id);
    if ('started' in current) {
      seeOther(res, `/account/imports/${current.started}`);
      return;
    }
    const values = this.uploads.valuesOf(body, current.upload.header);
    try {
      seeOther(res, `/account/imports/${await this.uploads.start(session, id, values)}`);
    } catch (e) {
      if (!formError(e) || e.code === 'conflict') throw e;
      sendPage(res, e.status, mappingPage(chromeOf(req), { ...current, values }, errorsByField(e)));
    }
  }

  @Get('open')
  open(@Req() req: ConsoleRequest, @Query('id') id: unknown, @Res() res: Response): void {
    requirePermission(signedIn(req).principal, 'imports:read');
    if (typeof id !== 'string' || !/^\d{1,10}$/.test(id.trim())) throw fieldError('id', 'must be an import id (a whole number)');
    seeOther(res, `/account/imports/${Number(id.trim())}`);
  }

  @Get(':id')
  async show(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'imports:read');
    const record = await this.imports.get(id, who);
    const { total, errors } = await this.imports.errors(id, { limit: ERRORS_SHOWN, after: 0 }, who);
    sendPage(res, 200, importPage(chromeOf(req), { record, errors, errorTotal: total, pollMs: POLL_MS }));
  }

  /** What the import page's script polls while the import runs: its status, progress (0..100) and counts. */
  @Get(':id/progress')
  async progress(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'imports:read');
    const r = await this.imports.get(id, who);
    res.status(200).json({ status: r.status, progress: Math.round(r.progress * 100), counts: r.counts });
  }

  @Get(':id/errors.csv')
  async errorsCsv(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'imports:read');
    await this.imports.errorsCsv(id, res, who);
  }
}
