import { Module } from '@nestjs/common';
import { ApiTokensController } from './api-tokens.controller.js';
import { ApiTokensService } from './api-tokens.service.js';
import { AuthModule } from './auth.module.js';
import { OAuthController } from './oauth.controller.js';
import { OAuthService } from './oauth.service.js';

/** The HTTP side of authentication: the OAuth2 endpoints and the account's token management. */
@Module({
  imports: [AuthModule],
  controllers: [OAuthController, ApiTokensController],
  providers: [OAuthService, ApiTokensService],
  exports: [ApiTokensService],
})
export class AuthApiModule {}
