import { Logger } from '@nestjs/common';
import type { AppConfig } from '../config/config.js';
import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { AppRequest } from '../common/request.js';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * Gives every request an id (the client's X-Request-Id when sane), echoes it, and logs the request when done.
 * A plain Express middleware (src/http.ts registers it with the metrics in one layer), not a Nest one.
 */
export class RequestIdMiddleware {
  private readonly logger = new Logger('http');
  /** The per-request log line is a debug entry: skip its listener entirely at other levels. */
  private readonly logRequests: boolean;

  constructor(config: Pick<AppConfig, 'logLevel'>) {
    this.logRequests = config.logLevel === 'debug';
  }

  /** Gives the request its id and, at debug level, its log line when the response is done. */
  stamp(req: AppRequest, res: Response): void {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
    req.startedAt = process.hrtime.bigint();
    res.setHeader('X-Request-Id', req.id);
    if (!this.logRequests) return;
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - (req.startedAt ?? 0n)) / 1e6;
      this.logger.debug({
        msg: 'request',
        requestId: req.id,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        ms: Math.round(ms * 10) / 10,
        userId: req.principal?.userId,
      });
    });
  }
}
