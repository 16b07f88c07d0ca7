import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { IdPipe } from '../common/id.pipe.js';
import { AnswersSecret } from '../idempotency/idempotency.decorators.js';
import { ApiEnvelope } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { AccountTokenRecordDto, CreateAccountTokenDto, CreatedAccountTokenRecordDto } from './api-token.dto.js';
import { ApiTokensService, ACCOUNT_TOKEN_LIST_SPEC } from './api-tokens.service.js';
import { CurrentPrincipal } from './current-principal.decorator.js';
import { RequirePermission } from './permissions.js';

/** The calling user's API tokens over the API; the account console manages the same tokens in its pages (docs/decisions/api-tokens-and-oauth.md). */
@ApiTags('account tokens')
@Controller('api/account/tokens')
export class ApiTokensController {
  constructor(private readonly tokens: ApiTokensService) {}

  @Get()
  @RequirePermission('tokens:read')
  @ApiOperation({
    summary: "List the calling user's API tokens (never their secrets)",
    description:
      'Only the tokens of the user behind the calling token, and of those only the ones holding no permission the calling token lacks (a `*` token sees all). List parameters: page, limit, orderBy (id, name, createdAt, expiresAt, lastUsedAt, revokedAt), orderByDir. Revoked and expired tokens stay listed with their `state`.',
  })
  @ApiEnvelope('tokens', AccountTokenRecordDto, { list: true })
  @ApiListQuery(ACCOUNT_TOKEN_LIST_SPEC)
  list(@Query() query: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.tokens.list(query, who);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('tokens:read')
  @ApiOperation({
    summary: 'Search API tokens of the calling user: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('tokens', AccountTokenRecordDto, ACCOUNT_TOKEN_LIST_SPEC)
  search(@Body() body: ListSearchDto, @CurrentPrincipal() who: Principal) {
    return this.tokens.list(searchQuery(body), who);
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('tokens:write')
  // The response carries the secret: no cache may keep it, nor an Idempotency-Key's record.
  @AnswersSecret('token.secret')
  @ApiOperation({
    summary: 'Create an API token for the calling user; the secret is in this response only',
    description:
      'Body: name, permissions (from the permission list), optional expiresAt (ISO 8601 with offset, in the future). The permissions may not exceed those of the calling token: asking for one it lacks (or `*` without holding `*`) is 403 `forbidden`, naming them. ' +
      "Only an API token may create tokens: an OAuth access token gets 403 `forbidden`. The new token never outlives the calling token: its expiry is capped at the caller's (an omitted or later expiresAt becomes the caller's expiry), and revoking the calling token later revokes this one too (and what it creates, in turn). " +
      'The secret is stored only as a SHA-256 hash and cannot be shown again; the response is sent with `Cache-Control: no-store`. The token id is its OAuth2 client_id. ' +
      'A retry with the same Idempotency-Key (by the same token) answers the token without `secret`, with a `notice` saying it was shown only once.',
  })
  @ApiEnvelope('token', CreatedAccountTokenRecordDto, { status: 201, secretNotice: true })
  async create(@Body() dto: CreateAccountTokenDto, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('tokens:read')
  @ApiOperation({
    summary: "One of the calling user's tokens; another user's token is a 404",
    description: 'A token holding a permission the calling token lacks is a 403 `forbidden`, as creating it would be.',
  })
  @ApiEnvelope('token', AccountTokenRecordDto)
  async get(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.get(id, who) };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('tokens:delete')
  @ApiOperation({
    summary: 'Revoke a token, the tokens it created and every access token issued from them; answers the token as it was',
    description:
      "The token stops working at once on every API instance, also when it is the token making this request, and so does every token created with it (transitively) and every OAuth access token issued from any of them. The record stays listed as `revoked`; revoking it again answers 200 with it. Another user's token is a 404; a token holding a permission the calling token lacks is a 403 `forbidden`.",
  })
  @ApiEnvelope('token', AccountTokenRecordDto)
  async revoke(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { token: await this.tokens.revoke(id, who) };
  }
}
