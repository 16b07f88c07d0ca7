import { type MiddlewareConsumer, Module, type NestModule } from '@nestjs/common';
import { AuthApiModule } from '../auth/auth-api.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { RateLimitModule } from '../rate-limit/rate-limit.module.js';
import { AccountPagesController } from './account-pages.controller.js';
import { AccountSignInController } from './account-sign-in.controller.js';
import { AccountRepository } from './account.repository.js';
import { AccountService } from './account.service.js';
import { AccountUsageService } from './account-usage.service.js';
import { ConsoleHeadersMiddleware } from './console-headers.middleware.js';
import { ConsoleGuard } from './console.guard.js';

/**
 * The signed-in account console under /account: server-rendered pages for a user's API tokens,
 * notifications and plan. Sessions (cookie, PostgreSQL) are its only credential; it accepts no
 * API token, and its cookie is never sent to /api (Path=/account) nor accepted there.
 */
@Module({
  imports: [AuthModule, AuthApiModule, NotificationsModule, RateLimitModule],
  controllers: [AccountSignInController, AccountPagesController],
  providers: [AccountRepository, AccountService, AccountUsageService, ConsoleGuard],
  exports: [AccountService],
})
export class AccountModule implements NestModule {
  configure(consumer: MiddlewareConsumer) {
    consumer.apply(ConsoleHeadersMiddleware).forRoutes('account', 'account/*path');
  }
}
