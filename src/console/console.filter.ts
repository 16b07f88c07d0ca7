import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Response } from 'express';
import { DataSource } from 'typeorm';
import { AppError } from '../common/errors.js';
import { HttpExceptionFilter } from '../server/http-exception.filter.js';
import { RouteTable } from '../server/route-table.js';
import { chromeOf, sendPage } from './console-http.js';
import { errorPage } from './console.views.js';
import type { ConsoleRequest } from './console.guard.js';

/**
 * Errors of the console pages. A browser (Accept: text/html) gets a page: "sign in first" is a
 * redirect to the sign-in form, other refusals an error page with the same status and message.
 * Any other client, and every unexpected error, goes to the global filter (error shape, logging).
 */
@Catch()
export class ConsoleExceptionFilter implements ExceptionFilter {
  private readonly fallback: HttpExceptionFilter;

  constructor(routes: RouteTable, @InjectDataSource() dataSource: DataSource) {
    this.fallback = new HttpExceptionFilter(routes, dataSource);
  }

  catch(exception: unknown, host: ArgumentsHost): void {
    const req = host.switchToHttp().getRequest<ConsoleRequest>();
    const res = host.switchToHttp().getResponse<Response>();
    const wantsHtml = (req.headers.accept ?? '').includes('text/html');
    if (!wantsHtml || !(exception instanceof AppError) || exception.status >= 500 || res.headersSent) {
      this.fallback.catch(exception, host);
      return;
    }
    if (exception.status === 401) {
      res.redirect(303, '/account/login');
      return;
    }
    for (const [k, v] of Object.entries(exception.headers ?? {})) res.setHeader(k, v);
    sendPage(res, exception.status, errorPage(exception.status, exception.message, chromeOf(req)));
  }
}
