import { Inject, Injectable, Logger, type NestMiddleware } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { randomUUID } from 'node:crypto';
import type { NextFunction, Response } from 'express';
import type { AppRequest } from './request.js';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/** Gives every request an id (the client's X-Request-Id when sane), echoes it, and logs the request when done. */
@Injectable()
export class RequestIdMiddleware implements NestMiddleware {
  private readonly logger = new Logger('http');
  /** The per-request log line is a debug entry: skip its listener entirely at other levels. */
  private readonly logRequests: boolean;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.logRequests = config.logLevel === 'debug';
  }

  use(req: AppRequest, res: Response, next: NextFunction) {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
    req.startedAt = process.hrtime.bigint();
    res.setHeader('X-Request-Id', req.id);
    if (!this.logRequests) {
      next();
      return;
    }
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
    next();
  }
}
