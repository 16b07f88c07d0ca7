import { Module } from '@nestjs/common';
import { AccountTokensController } from './account-tokens.controller.js';
import { AccountTokensService } from './account-tokens.service.js';
import { OAuthController } from './oauth.controller.js';
import { OAuthService } from './oauth.service.js';

/**
 * The HTTP side of authentication: the OAuth2 endpoints and the account's token management.
 * Tokens themselves live in the global AuthModule (shared with the CLI and the guards).
 */
@Module({
  controllers: [OAuthController, AccountTokensController],
  providers: [OAuthService, AccountTokensService],
  exports: [AccountTokensService],
})
export class AuthApiModule {}
