import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AccessToken } from './access-token.entity.js';
import { AccessTokenRepository } from './access-token.repository.js';
import { ApiToken } from './api-token.entity.js';
import { ApiTokenRepository } from './api-token.repository.js';
import { TokensService } from './tokens.service.js';
import { User } from './user.entity.js';
import { UsersRepository } from './user.repository.js';
import { UsersService } from './users.service.js';

/**
 * Users and tokens. Not global: AppModule imports it for the global guards (registered there with
 * APP_GUARD, so they resolve TokensService from AppModule's imports), AuthApiModule and the CLI
 * import it, and so does any feature that needs a user's name (UsersRepository.namesByIds).
 */
@Module({
  imports: [TypeOrmModule.forFeature([User, ApiToken, AccessToken])],
  providers: [TokensService, UsersService, UsersRepository, ApiTokenRepository, AccessTokenRepository],
  // ApiTokenRepository is for AuthApiModule (the account's token pages); other features use TokensService.
  exports: [TokensService, UsersService, UsersRepository, ApiTokenRepository],
})
export class AuthModule {}
