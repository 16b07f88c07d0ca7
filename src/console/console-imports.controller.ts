import { Controller, Get, Param, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { fieldError } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { ImportsService } from '../imports/imports.service.js';
import { importLookupPage, importPage } from './console-imports.views.js';
import { chromeOf, requirePermission, seeOther, sendPage } from './console-http.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';

const ERRORS_SHOWN = 50;

/**
 * An import's page, through ImportsService as GET /api/imports/{id} (imports:read; an import of
 * another user is a 404): progress, counts and row errors, the page reloading itself while the job
 * runs (a Refresh link without the script), and every row error as CSV.
 */
@ApiExcludeController()
@Controller('account/imports')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleImportsController {
  constructor(private readonly imports: ImportsService) {}

  @Get()
  lookup(@Req() req: ConsoleRequest, @Res() res: Response): void {
    requirePermission(signedIn(req).principal, 'imports:read');
    sendPage(res, 200, importLookupPage(chromeOf(req)));
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
    sendPage(res, 200, importPage(chromeOf(req), { record, errors, errorTotal: total }));
  }

  @Get(':id/errors.csv')
  async errorsCsv(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'imports:read');
    await this.imports.errorsCsv(id, res, who);
  }
}
