import { type MiddlewareConsumer, Module, type NestModule } from '@nestjs/common';
import { MulterModule } from '@nestjs/platform-express';
import { AuthApiModule } from '../auth/auth-api.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { RateLimitModule } from '../rate-limit/rate-limit.module.js';
import { ApiUsageModule } from '../rate-limit/api-usage.module.js';
import { ConsolePagesController } from './console-pages.controller.js';
import { ConsoleWebhooksController } from './console-webhooks.controller.js';
import { ConsoleEventsController } from './console-events.controller.js';
import { ConsoleExportsController } from './console-exports.controller.js';
import { ConsoleImportsController } from './console-imports.controller.js';
import { ImportsModule } from '../imports/imports.module.js';
import { WorkflowsModule } from '../workflows/workflows.module.js';
import { ConsoleWorkflowsController } from './console-workflows.controller.js';
import { ImportsService } from '../imports/imports.service.js';
import { ConsoleImportsService } from './console-imports.service.js';
import { consoleUploadOptions, ConsoleUploadCsrf } from './console-upload.js';
import { EventsModule } from '../events/events.module.js';
import { WebhooksModule } from '../events/webhooks.module.js';
import { ConsoleSignInController } from './console-sign-in.controller.js';
import { ConsoleRepository } from './console.repository.js';
import { ConsoleService } from './console.service.js';
import { ConsoleUsageService } from './console-usage.service.js';
import { ConsoleHeadersMiddleware } from './console-headers.middleware.js';
import { ConsoleGuard } from './console.guard.js';
import { ConsoleExceptionFilter } from './console.filter.js';

/**
 * The signed-in account console under /account: server-rendered pages for a user's API tokens,
 * notifications and plan. Sessions (cookie, PostgreSQL) are its only credential; it accepts no
 * API token, and its cookie is never sent to /api (Path=/account) nor accepted there.
 */
@Module({
  imports: [
    AuthModule,
    AuthApiModule,
    NotificationsModule,
    RateLimitModule,
    ApiUsageModule,
    WebhooksModule,
    EventsModule,
    ImportsModule,
    WorkflowsModule,
    // Multipart parsing of the console's CSV upload form (console-upload.ts: its CSRF token is checked before the file is stored).
    MulterModule.registerAsync({ imports: [ImportsModule], inject: [ImportsService], useFactory: consoleUploadOptions }),
  ],
  controllers: [
    ConsoleSignInController,
    ConsolePagesController,
    ConsoleWebhooksController,
    ConsoleEventsController,
    ConsoleExportsController,
    ConsoleImportsController,
    ConsoleWorkflowsController,
  ],
  providers: [
    ConsoleRepository,
    ConsoleService,
    ConsoleUsageService,
    ConsoleImportsService,
    ConsoleUploadCsrf,
    ConsoleGuard,
    // The console's error pages, injected where a route's own filter hands on what it does not show itself.
    ConsoleExceptionFilter,
  ],
  exports: [ConsoleService],
})
export class ConsoleModule implements NestModule {
  configure(consumer: MiddlewareConsumer) {
    consumer.apply(ConsoleHeadersMiddleware).forRoutes('account', 'account/*path');
  }
}
