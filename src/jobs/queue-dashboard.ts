import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { NextFunction, Request, Response } from 'express';
import { TokensService } from '../auth/tokens.service.js';
import { hasPermission } from '../auth/permissions.js';
import { AppError } from '../common/errors.js';
import type { QueueName } from './job-names.js';

export const QUEUE_DASHBOARD_PATH = '/api/admin/queues';
export const DASHBOARD_QUEUES = Symbol('DASHBOARD_QUEUES');

/**
 * The credential of a dashboard request: `Authorization: Bearer <token>`, or HTTP Basic with the
 * API token as the password (any user name), which a browser asks for by itself and then sends
 * with every request of the dashboard's page, including its own API calls.
 */
export function dashboardCredential(header: string | undefined): string | null {
  if (!header) return null;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!basic) return null;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const secret = colon >= 0 ? decoded.slice(colon + 1) : decoded;
  return secret || null;
}

/**
 * Bull Board at /api/admin/queues, for tokens holding `*`. Its Express routes are not Nest
 * routes, so Nest's guards never see them: the middleware in front of it resolves the token with
 * TokensService and refuses anything but a `*` token (401 without a valid token, 403 without `*`,
 * through the global error filter). Mounted only in processes that serve HTTP and use Redis.
 */
@Injectable()
export class QueueDashboard implements OnModuleInit {
  private readonly logger = new Logger('Jobs');

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly tokens: TokensService,
    @Inject(DASHBOARD_QUEUES) private readonly queues: Record<QueueName, Queue>,
  ) {}

  onModuleInit(): void {
    // An application context (APP_ROLE=worker) has no HTTP adapter.
    const http = this.adapterHost?.httpAdapter;
    if (!http) return;
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath(QUEUE_DASHBOARD_PATH);
    createBullBoard({
      queues: Object.values(this.queues).map((q) => new BullMQAdapter(q)),
      // @bull-board/express pins its own copy of @bull-board/api; the two copies' types differ only
      // in private members.
      serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
      options: { uiConfig: { boardTitle: 'SalesFlow queues' } },
    });
    // Runs during init, after Nest's routes and before its not-found handler.
    http.getInstance().use(QUEUE_DASHBOARD_PATH, (req: Request, res: Response, next: NextFunction) => void this.guard(req, res, next), serverAdapter.getRouter());
    this.logger.log(`queue dashboard at ${QUEUE_DASHBOARD_PATH}`);
  }

  private async guard(req: Request, res: Response, next: NextFunction): Promise<void> {
    try {
      const secret = dashboardCredential(req.headers.authorization);
      const principal = secret ? await this.tokens.authenticate(secret) : null;
      if (!principal) {
        return next(
          new AppError('unauthorized', 'The queue dashboard needs a token with the "*" permission (Bearer, or Basic with the token as password)', undefined, {
            'WWW-Authenticate': 'Basic realm="SalesFlow queues", charset="UTF-8"',
          }),
        );
      }
      if (!hasPermission(principal.permissions, '*')) return next(new AppError('forbidden', 'The queue dashboard needs the "*" permission'));
      // Bull Board's pages are not JSON API responses: let its own HTML/JS through the CSP.
      res.removeHeader('Content-Security-Policy');
      next();
    } catch (e) {
      next(e);
    }
  }
}
