import { Controller, Get, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { AcceptsMetricsToken, RequirePermission } from '../common/route-access.js';
import { MetricsService } from './metrics.service.js';

@ApiTags('system')
@Controller()
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  /**
   * Prometheus metrics. With METRICS_TOKEN set, a scraper sends `Authorization: Bearer <METRICS_TOKEN>`
   * (checked by the guard chain, not rate limited); an API token holding `*` is accepted too.
   * Anything else is a 401/403.
   */
  @Get('metrics')
  @RequirePermission('*')
  @AcceptsMetricsToken()
  @ApiOperation({ summary: 'Prometheus metrics (Bearer METRICS_TOKEN, or an API token with the * permission)' })
  async scrape(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.render();
    res.setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.send(body);
  }
}
