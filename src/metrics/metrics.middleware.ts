import type { Request, Response } from 'express';
import type { MetricsService } from './metrics.service.js';

/** When the request arrived (performance.now(), ms), kept on the request for the finish listener. */
const STARTED = Symbol('metricsStartedAt');
type Timed = Request & { [STARTED]?: number };

/**
 * Times every request and counts it by its route pattern (not the concrete path, to bound cardinality).
 * A plain Express middleware (src/http.ts registers it with the request id in one layer). Nothing is
 * allocated per request for it beyond the listener's slot: one 'finish' listener shared by all
 * responses (Node calls it with the response as `this`), a number for the start time, and series
 * found without building a key (MetricsService.recordRequest).
 */
export class MetricsMiddleware {
  private readonly onFinish: (this: Response) => void;

  constructor(metrics: MetricsService) {
    this.onFinish = function recordFinished(this: Response) {
      const req = this.req as Timed;
      const route = (req.route as { path?: unknown } | undefined)?.path;
      const seconds = (performance.now() - (req[STARTED] ?? 0)) / 1000;
      metrics.recordRequest(req.method, typeof route === 'string' ? (req.baseUrl ?? '') + route : 'unmatched', this.statusCode, seconds);
    };
  }

  /** Starts the request's timer; its response's 'finish' records it. */
  start(req: Request, res: Response): void {
    (req as Timed)[STARTED] = performance.now();
    res.on('finish', this.onFinish);
  }
}
