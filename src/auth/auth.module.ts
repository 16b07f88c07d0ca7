import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AccessToken } from './access-token.entity.js';
import { ApiToken } from './api-token.entity.js';
import { TokensService } from './tokens.service.js';
import { User } from './user.entity.js';
import { UsersService } from './users.service.js';

/** Users and tokens. The guards that use them are registered globally in AppModule. */
@Global()
@Module({
  imports: [TypeOrmModule.forFeature([User, ApiToken, AccessToken])],
  providers: [TokensService, UsersService],
  exports: [TokensService, UsersService, TypeOrmModule],
})
export class AuthModule {}
