import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { CommonModule } from './common/common.module.js';
import { ServerModule } from './server/server.module.js';
import { BatchModule } from './batch/batch.module.js';
import { IdempotencyModule } from './idempotency/idempotency.module.js';
import { IdempotencyGuard } from './idempotency/idempotency.guard.js';
import type { AppConfig } from './config/config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { RedisModule } from './redis/redis.module.js';
import { JobsModule } from './jobs/jobs.module.js';
import { AuthModule } from './auth/auth.module.js';
import { AuthenticationGuard, PermissionGuard } from './auth/auth.guards.js';
import { RateLimitModule } from './rate-limit/rate-limit.module.js';
import { RateLimitGuard } from './rate-limit/rate-limit.guard.js';
import { HttpExceptionFilter } from './server/http-exception.filter.js';
import { AppValidationPipe } from './server/validation.pipe.js';
import { ContentTypeGuard } from './server/content-type.guard.js';
import { SameOriginGuard } from './server/same-origin.guard.js';
import { FallbackModule } from './server/fallback.controller.js';
import { RequestGuard } from './server/request-guard.js';
import { REQUEST_CHECKS, type RequestCheck } from './common/request-check.js';
import { NotificationsModule } from './notifications/notifications.module.js';
import { ContactsModule } from './contacts/contacts.module.js';
import { CompaniesModule } from './companies/companies.module.js';
import { SystemModule } from './system/system.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { CampaignsModule } from './campaigns/campaigns.module.js';
import { DealsModule } from './deals/deals.module.js';
import { PipelinesModule } from './pipelines/pipelines.module.js';
import { ActivitiesModule } from './activities/activities.module.js';
import { AuthApiModule } from './auth/auth-api.module.js';
import { FieldsModule } from './fields/fields.module.js';
import { CategoriesModule } from './categories/categories.module.js';
import { PointGroupsModule } from './point-groups/point-groups.module.js';
import { AssetsModule } from './assets/assets.module.js';
import { ReportsModule } from './reports/reports.module.js';
import { TextMessagesModule } from './text-messages/text-messages.module.js';
import { EventsModule } from './events/events.module.js';
import { WebhooksModule } from './events/webhooks.module.js';
import { ConsoleModule } from './console/console.module.js';
import { SegmentsModule } from './segments/segments.module.js';
import { TrackingModule } from './tracking/tracking.module.js';
import { ImportsModule } from './imports/imports.module.js';
import { WorkflowsModule } from './workflows/workflows.module.js';
import { ScoringModule } from './scoring/scoring.module.js';

/** Feature modules: one per resource. */
export const FEATURE_MODULES: Type[] = [
  NotificationsModule,
  ContactsModule,
  CompaniesModule,
  SystemModule,
  AuthApiModule,
  FieldsModule,
  CategoriesModule,
  PointGroupsModule,
  CampaignsModule,
  PipelinesModule,
  DealsModule,
  ActivitiesModule,
  AssetsModule,
  ReportsModule,
  TextMessagesModule,
  SegmentsModule,
  TrackingModule,
  ImportsModule,
  WorkflowsModule,
  ScoringModule,
  EventsModule,
  WebhooksModule,
  ConsoleModule,
];

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, databaseUrl: string): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot(config, databaseUrl),
        RedisModule,
        JobsModule.forRoot(config),
        CommonModule,
        ServerModule,
        BatchModule,
        IdempotencyModule,
        MetricsModule,
        AuthModule,
        RateLimitModule,
        ...FEATURE_MODULES,
        // Last: its catch-all route answers 404/405 through the guard chain after every other route.
        FallbackModule,
      ],
      providers: [
        { provide: APP_PIPE, useClass: AppValidationPipe },
        { provide: APP_FILTER, useClass: HttpExceptionFilter },
        // The six checks of every request (credential, rate limit, permission, same origin, content
        // type, Idempotency-Key), in that order, as one guard: see request-guard.ts.
        AuthenticationGuard,
        PermissionGuard,
        SameOriginGuard,
        ContentTypeGuard,
        IdempotencyGuard,
        {
          provide: REQUEST_CHECKS,
          useFactory: (...checks: RequestCheck[]) => checks,
          inject: [AuthenticationGuard, RateLimitGuard, PermissionGuard, SameOriginGuard, ContentTypeGuard, IdempotencyGuard],
        },
        { provide: APP_GUARD, useClass: RequestGuard },
      ],
    };
  }
}
