import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiListQuery } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { AccountTokenRecordDto, CreateAccountTokenDto, CreatedAccountTokenRecordDto } from './account-token.dto.js';
import { AccountTokensService, ACCOUNT_TOKEN_LIST_SPEC } from './account-tokens.service.js';
import { CurrentPrincipal } from './current-principal.decorator.js';
import { RequirePermission } from './permissions.js';

/** The calling user's API tokens ("API Tokens" in account settings, spec §5). */
@ApiTags('account tokens')
@Controller('api/account/tokens')
export class AccountTokensController {
  constructor(private readonly tokens: AccountTokensService) {}

  @Get()
  @RequirePermission('tokens:read')
  @ApiOperation({
    summary: "List the calling user's API tokens (never their secrets)",
    description:
      'Only the tokens of the user behind the calling token. List parameters: page, limit, orderBy (id, name, createdAt, expiresAt, lastUsedAt, revokedAt), orderByDir. Revoked and expired tokens stay listed with their `state`.',
  })
  @ApiEnvelope('tokens', AccountTokenRecordDto, { list: true })
  @ApiListQuery(ACCOUNT_TOKEN_LIST_SPEC)
  list(@Query() query: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.tokens.list(query, who);
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('tokens:write')
  @ApiOperation({
    summary: 'Create an API token for the calling user; the secret is in this response only',
    description:
      'Body: name, permissions (from the permission list), optional expiresAt (ISO 8601 with offset, in the future). The permissions may not exceed those of the calling token: asking for one it lacks (or `*` without holding `*`) is 403 `forbidden`, naming them. The secret is stored only as a SHA-256 hash and cannot be shown again. The token id is its OAuth2 client_id.',
  })
  @ApiEnvelope('token', CreatedAccountTokenRecordDto, { status: 201 })
  async create(@Body() dto: CreateAccountTokenDto, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('tokens:read')
  @ApiOperation({ summary: "One of the calling user's tokens; another user's token is a 404" })
  @ApiEnvelope('token', AccountTokenRecordDto)
  async get(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.get(id, who) };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('tokens:delete')
  @ApiOperation({
    summary: 'Revoke a token (and every access token issued from it); answers the token as it was',
    description:
      'The token stops working at once on every API instance, also when it is the token making this request. The record stays listed as `revoked`; revoking it again answers 200 with it. Another user\'s token is a 404.',
  })
  @ApiEnvelope('token', AccountTokenRecordDto)
  async revoke(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.revoke(id, who) };
  }
}
