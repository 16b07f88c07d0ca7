import { Body, Controller, Header, Headers, HttpCode, Post } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Consumes } from '../server/content-type.guard.js';
import { RateLimitBucket } from '../rate-limit/rate-limit.bucket.js';
import { Public } from './permissions.js';
import { RevokeRequestDto, TokenRequestDto, TokenResponseDto } from './oauth.dto.js';
import { OAuthService } from './oauth.service.js';
import { type ApiErrorDoc, ApiErrors } from '../common/openapi.js';

const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json';

const COMMON = [
  'Body: form-encoded (`application/x-www-form-urlencoded`) or JSON; unknown extension parameters (`scope`, `audience`, ...) are ignored.',
  'Errors use the API error shape `{ "error": { "code", "message", "status" } }` with the RFC 6749 codes as `code`:',
  '`invalid_request` 400 (missing or repeated parameter, malformed body, two client authentication methods at once),',
  '`invalid_client` 401 with `WWW-Authenticate: Basic` (unknown client_id, wrong secret, malformed Basic header, no client authentication),',
  '`unsupported_grant_type` 400, `invalid_grant` 400, `unauthorized_client` 400.',
  'Rate limited per client address (OAUTH_RATE_LIMIT_PER_MINUTE, default 20 per minute, shared by both OAuth endpoints); 429 carries Retry-After.',
].join(' ');

/** The RFC 6749 / RFC 7009 error codes these endpoints answer, in the API error shape. */
const OAUTH_ERRORS = [
  {
    status: 400,
    description: 'invalid_request (missing, repeated or malformed parameter, malformed body), invalid_grant, unauthorized_client or unsupported_grant_type',
    codes: ['invalid_request', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type'],
  },
  { status: 401, description: 'invalid_client: client authentication failed (WWW-Authenticate: Basic)', codes: ['invalid_client'] },
] satisfies ApiErrorDoc[];

/** OAuth2 endpoints (docs/decisions/api-tokens-and-oauth.md): RFC 6749 client credentials grant and RFC 7009 revocation, on API tokens. */
@ApiTags('oauth')
@Controller('api/oauth/v2')
export class OAuthController {
  constructor(private readonly oauth: OAuthService) {}

  @ApiErrors(...OAUTH_ERRORS)
  @Post('token')
  @Public()
  @RateLimitBucket('oauth')
  @HttpCode(200)
  @Consumes(FORM, JSON_TYPE)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  @ApiConsumes(FORM, JSON_TYPE)
  @ApiBody({ type: TokenRequestDto })
  @ApiOkResponse({ type: TokenResponseDto })
  @ApiOperation({
    summary: 'Get an access token (OAuth2 client credentials grant, RFC 6749 §4.4)',
    description: [
      '`grant_type=client_credentials`; the client is an API token: `client_id` is its id, `client_secret` its secret (`sf_...`).',
      'Send them in the body, or as HTTP Basic credentials (`Authorization: Basic base64(urlencode(id):urlencode(secret))`, RFC 6749 §2.3.1).',
      'Answers `{ access_token, token_type: "Bearer", expires_in }` with `Cache-Control: no-store`.',
      "The access token (`sfat_...`) acts as the API token's user with the same permissions on every route, and expires after",
      '`expires_in` seconds (OAUTH_ACCESS_TOKEN_TTL_SECONDS, default 3600), never later than the API token. Revoking the API token revokes',
      'every access token issued from it. A revoked or expired API token with the right secret gets `invalid_grant`.',
      COMMON,
    ].join(' '),
  })
  token(@Body() body: Record<string, unknown>, @Headers('authorization') authorization?: string) {
    return this.oauth.token(body, authorization);
  }

  @ApiErrors(...OAUTH_ERRORS)
  @Post('revoke')
  @Public()
  @RateLimitBucket('oauth')
  @HttpCode(200)
  @Consumes(FORM, JSON_TYPE)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  @ApiConsumes(FORM, JSON_TYPE)
  @ApiBody({ type: RevokeRequestDto })
  @ApiOkResponse({
    description: 'Always `{}` once the request is valid, whether or not the token existed (RFC 7009 §2.2).',
    schema: { type: 'object', properties: {} },
  })
  @ApiOperation({
    summary: 'Revoke a token (RFC 7009)',
    description: [
      'Takes `token` (and an optional `token_type_hint`, not needed). An access token (`sfat_...`) is revoked alone; an API token secret (`sf_...`)',
      'is revoked with every token created with it (transitively) and every access token issued from any of them. The revoked tokens get 401 on their next request, on every API instance at once.',
      'Authentication: possession of the token is enough to revoke it, so no other credential is needed. A client may also authenticate',
      '(HTTP Basic or `client_id`/`client_secret`, as for the token endpoint); the credentials must then be valid (`invalid_client` 401),',
      'and only tokens issued to that client may be revoked (`unauthorized_client` 400 otherwise).',
      'Answers 200 `{}` whether or not the token was known, active or already revoked.',
      COMMON,
    ].join(' '),
  })
  revoke(@Body() body: Record<string, unknown>, @Headers('authorization') authorization?: string) {
    return this.oauth.revoke(body, authorization);
  }
}
