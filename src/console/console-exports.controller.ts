import { Body, Controller, Get, Param, Post, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import type { Response } from 'express';
import { AppError } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateExportDto } from '../imports/import.dto.js';
import { ExportsService } from '../imports/exports.service.js';
import { Consumes } from '../server/content-type.guard.js';
import { exportPage, newExportPage } from './console-exports.views.js';
import { chromeOf, errorsByField, field, FORM, requirePermission, seeOther, sendPage } from './console-http.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';

/** The form as the body POST /api/exports takes, checked by the same DTO rules. */
async function exportRequestFromForm(values: { object: string; format: string; filter: string }): Promise<CreateExportDto> {
  const dto = plainToInstance(CreateExportDto, {
    object: values.object,
    format: values.format,
    ...(values.filter.trim() ? { filter: values.filter.trim() } : {}),
  });
  const errors = await validate(dto, { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length) {
    const details = errors.map((e) => ({ field: e.property, message: Object.values(e.constraints ?? {})[0] ?? 'is invalid' }));
    throw new AppError('validation_failed', details.map((d) => `${d.field}: ${d.message}`).join('; '), details);
  }
  return dto;
}

/**
 * The export pages, through ExportsService as /api/exports (exports:write to start one, with the
 * object's read permission; exports:read to look, an export of another user being a 404). The
 * export's page reloads itself while the job runs (the console script) and has a Refresh link without it.
 */
@ApiExcludeController()
@Controller('account/exports')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleExportsController {
  constructor(private readonly exportsService: ExportsService) {}

  @Get('new')
  newForm(@Req() req: ConsoleRequest, @Res() res: Response): void {
    requirePermission(signedIn(req).principal, 'exports:write');
    sendPage(res, 200, newExportPage(chromeOf(req), this.exportsService.choices()));
  }

  @Post()
  @Consumes(FORM)
  async create(@Req() req: ConsoleRequest, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'exports:write');
    const values = { object: field(body, 'object'), format: field(body, 'format'), filter: field(body, 'filter') };
    try {
      const created = await this.exportsService.create(await exportRequestFromForm(values), who);
      seeOther(res, `/account/exports/${created.id}`);
    } catch (e) {
      if (!(e instanceof AppError) || e.status >= 500) throw e;
      sendPage(res, e.status, newExportPage(chromeOf(req), { ...this.exportsService.choices(), values, errors: errorsByField(e) }));
    }
  }

  @Get(':id')
  async show(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'exports:read');
    sendPage(res, 200, exportPage(chromeOf(req), await this.exportsService.get(id, who)));
  }
}
