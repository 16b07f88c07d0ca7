import { Injectable, type NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from './metrics.service.js';

/** Times every request and counts it by its route pattern (not the concrete path, to bound cardinality). */
@Injectable()
export class MetricsMiddleware implements NestMiddleware {
  constructor(private readonly metrics: MetricsService) {}

  use(req: Request, res: Response, next: NextFunction) {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.metrics.recordRequest(req.method, typeof route === 'string' ? (req.baseUrl ?? '') + route : 'unmatched', res.statusCode, seconds);
    });
    next();
  }
}
