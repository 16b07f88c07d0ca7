import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Response } from 'express';
import { timingSafeEqual } from 'node:crypto';
import { Public } from '../auth/permissions.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { MetricsService } from './metrics.service.js';

@ApiTags('system')
@Controller()
export class MetricsController {
  constructor(
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Prometheus metrics. With METRICS_TOKEN set, a scraper sends `Authorization: Bearer <METRICS_TOKEN>`;
   * an API token holding `*` is accepted too. Anything else is a 401/403.
   */
  @Get('metrics')
  @Public('* or METRICS_TOKEN')
  @SkipThrottle()
  @ApiOperation({ summary: 'Prometheus metrics (Bearer METRICS_TOKEN, or an API token with the * permission)' })
  async scrape(@Req() req: AppRequest, @Res() res: Response): Promise<void> {
    if (!this.scraperAllowed(req)) {
      if (!req.principal) {
        throw new AppError('unauthorized', 'Metrics need Authorization: Bearer <METRICS_TOKEN> or an API token with the * permission', undefined, {
          'WWW-Authenticate': 'Bearer',
        });
      }
      if (!req.principal.permissions.has('*')) throw new AppError('forbidden', 'Metrics need the * permission');
    }
    const { contentType, body } = await this.metrics.render();
    res.setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.send(body);
  }

  private scraperAllowed(req: AppRequest): boolean {
    const expected = this.config.metricsToken;
    const header = req.headers.authorization ?? '';
    if (!expected || !header.startsWith('Bearer ')) return false;
    const given = Buffer.from(header.slice(7).trim());
    const want = Buffer.from(expected);
    return given.length === want.length && timingSafeEqual(given, want);
  }
}
