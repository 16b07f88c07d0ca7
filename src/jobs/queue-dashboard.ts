import { Controller, Delete, Get, Inject, Logger, NotFoundException, Patch, Post, Put, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Request, RequestHandler, Response } from 'express';
import { AcceptsBasicAuth, RequirePermission } from '../common/route-access.js';
import type { QueueName } from './job-names.js';

export const QUEUE_DASHBOARD_PATH = '/api/admin/queues';
export const DASHBOARD_QUEUES = Symbol('DASHBOARD_QUEUES');

/** Every page, asset and API call of the dashboard. */
const ANY = ['', '*path'];

/**
 * Bull Board at /api/admin/queues, for tokens holding `*`, as Nest routes so the global guard
 * chain checks them like every other route: the credential (Bearer, or HTTP Basic with the token
 * as password, which a browser asks for by itself and then sends with every request of the page),
 * the rate limit (failed logins count per address), the `*` permission, and the cross-site
 * request check (a browser with cached Basic credentials must not be made to change jobs by
 * another site). The handlers pass the request on to Bull Board's own Express app. Registered
 * only in processes that serve HTTP and use Redis; the OpenAPI document leaves it out (HTML UI),
 * GET /api/endpoints lists it.
 */
@ApiExcludeController()
@Controller(QUEUE_DASHBOARD_PATH)
@RequirePermission('*')
@AcceptsBasicAuth()
export class QueueDashboardController {
  private readonly board: RequestHandler;

  constructor(@Inject(DASHBOARD_QUEUES) queues: Record<QueueName, Queue>) {
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath(QUEUE_DASHBOARD_PATH);
    createBullBoard({
      queues: Object.values(queues).map((q) => new BullMQAdapter(q)),
      // @bull-board/express pins its own copy of @bull-board/api; the two copies' types differ only
      // in private members.
      serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
      options: { uiConfig: { boardTitle: 'SalesFlow queues' } },
    });
    const app = serverAdapter.getRouter() as RequestHandler & { disable?: (name: string) => void };
    app.disable?.('x-powered-by');
    this.board = app;
    new Logger('Jobs').log(`queue dashboard at ${QUEUE_DASHBOARD_PATH}`);
  }

  @Get(ANY)
  read(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.pass(req, res);
  }

  @Post(ANY)
  add(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.pass(req, res);
  }

  @Put(ANY)
  act(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.pass(req, res);
  }

  @Patch(ANY)
  change(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.pass(req, res);
  }

  @Delete(ANY)
  remove(@Req() req: Request, @Res() res: Response): Promise<void> {
    return this.pass(req, res);
  }

  /** Hands the request to Bull Board, mounted at the dashboard path; a path it does not serve is a 404. */
  private pass(req: Request, res: Response): Promise<void> {
    // Bull Board's pages are not JSON API responses: let its own HTML/JS through the CSP.
    res.removeHeader('Content-Security-Policy');
    const originalUrl = req.originalUrl;
    req.baseUrl = QUEUE_DASHBOARD_PATH;
    req.url = originalUrl.slice(QUEUE_DASHBOARD_PATH.length) || '/';
    return new Promise<void>((resolve, reject) => {
      res.once('finish', () => resolve());
      res.once('close', () => resolve());
      this.board(req, res, (err?: unknown) => {
        req.url = originalUrl;
        if (err) reject(err instanceof Error ? err : new Error(typeof err === 'string' ? err : 'queue dashboard failed', { cause: err }));
        else reject(new NotFoundException(`No route for ${req.method} ${req.path}`));
      });
    });
  }
}
