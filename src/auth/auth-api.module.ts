import { Module } from '@nestjs/common';
import { AccountTokensController } from './account-tokens.controller.js';
import { AccountTokensService } from './account-tokens.service.js';
import { AuthModule } from './auth.module.js';
import { OAuthController } from './oauth.controller.js';
import { OAuthService } from './oauth.service.js';

/** The HTTP side of authentication: the OAuth2 endpoints and the account's token management. */
@Module({
  imports: [AuthModule],
  controllers: [OAuthController, AccountTokensController],
  providers: [OAuthService, AccountTokensService],
  exports: [AccountTokensService],
})
export class AuthApiModule {}
