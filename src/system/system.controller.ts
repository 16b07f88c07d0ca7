import { API_VERSION } from '../server/http.js';
import { Controller, Get, Inject, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { EndpointsDto, HealthDto, VersionDto } from './system.dto.js';
import { SkipThrottle } from '@nestjs/throttler';
import type { Response } from 'express';
import { readFileSync } from 'node:fs';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Authenticated, Public, RequirePermission } from '../auth/permissions.js';
import { RouteTable } from '../server/route-table.js';
import { RedisService } from '../redis/redis.service.js';
import { JobQueue } from '../jobs/job-queue.js';
import { SystemRepository } from './system.repository.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

@ApiTags('system')
@Controller()
export class SystemController {
  private draining = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly system: SystemRepository,
    private readonly redis: RedisService,
    private readonly routes: RouteTable,
    private readonly jobs: JobQueue,
  ) {
    process.once('SIGTERM', () => (this.draining = true));
  }

  @Get('api/version')
  @Authenticated()
  @ApiOperation({ summary: 'Service version: { version, apiVersion, commit }' })
  @ApiOkResponse({ type: VersionDto })
  version() {
    return { version: pkg.version, apiVersion: API_VERSION, commit: this.config.commit };
  }

  @Get('api/endpoints')
  @RequirePermission('*')
  @ApiOperation({ summary: 'Every route the server has, with the permission it needs (generated from the live route table)' })
  @ApiOkResponse({ type: EndpointsDto })
  endpoints() {
    return {
      endpoints: this.routes.all().map(({ method, path, permission, alsoRequires, credential }) => ({
        method,
        path,
        permission,
        // Named only where a route needs more than its permission, or another credential than a bearer token (or nothing).
        ...(alsoRequires.length ? { alsoRequires } : {}),
        ...(credential === 'token' || credential === 'none' ? {} : { credential }),
      })),
    };
  }

  @Get('health')
  @Public()
  @SkipThrottle()
  @ApiOperation({ summary: 'Database and queue status; 503 when the database is down or the instance is shutting down' })
  @ApiOkResponse({ type: HealthDto })
  @ApiServiceUnavailableResponse({ type: HealthDto })
  async health(@Res({ passthrough: true }) res: Response) {
    const started = Date.now();
    const database = await this.system
      .ping()
      .then(() => ({ status: 'up', latencyMs: Date.now() - started }))
      .catch((e: unknown) => ({ status: 'down', error: (e instanceof Error ? e.message : String(e)).slice(0, 200) }));
    const redis = !this.redis.enabled ? { status: 'disabled' } : { status: this.redis.ready ? 'up' : 'down' };
    const queue = { mode: this.redis.enabled ? 'bullmq' : 'in-process', status: (await this.jobs.isAvailable().catch(() => false)) ? 'up' : 'down' };
    const ok = database.status === 'up' && !this.draining;
    res.status(ok ? 200 : 503);
    return {
      status: this.draining ? 'shutting_down' : ok ? (redis.status === 'down' ? 'degraded' : 'ok') : 'down',
      database,
      redis,
      queue,
      embeddedDatabase: this.config.databaseUrl === null,
      role: this.config.role,
    };
  }
}
