import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { type ClientCredentials, oauthError, parseClientId, parseRevocationRequest, parseTokenRequest } from './oauth-request.js';
import { type ClientToken, TokensService } from './tokens.service.js';

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

/**
 * OAuth2 on top of API tokens (docs/decisions/api-tokens-and-oauth.md): an API token is a confidential client whose
 * client_id is the token's id and whose client_secret is the token's secret.
 */
@Injectable()
export class OAuthService {
  constructor(
    private readonly tokens: TokensService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Client credentials grant (RFC 6749 §4.4). The access token carries the API token's user and
   * permissions and lives accessTokenTtlSeconds, never longer than the API token itself.
   */
  async token(body: unknown, authorization: string | undefined): Promise<TokenResponse> {
    const client = await this.authenticateClient(parseTokenRequest(body, authorization));
    if (client.revokedAt) throw oauthError('invalid_grant', 'The API token behind these client credentials has been revoked');
    let ttl = this.config.accessTokenTtlSeconds;
    if (client.expiresAt) ttl = Math.min(ttl, Math.floor((new Date(client.expiresAt).getTime() - Date.now()) / 1000));
    if (ttl < 1) throw oauthError('invalid_grant', 'The API token behind these client credentials has expired');
    const issued = await this.tokens.issueAccessToken(client.id, ttl);
    // Revoked or expired between the check and the insert.
    if (!issued) throw oauthError('invalid_grant', 'The API token behind these client credentials has been revoked or has expired');
    return { access_token: issued.secret, token_type: 'Bearer', expires_in: ttl };
  }

  /**
   * Token revocation (RFC 7009). Possession of a token is enough to revoke it; a client that also
   * authenticates may revoke only tokens issued to it (its own API token and its access tokens).
   * An unknown, already revoked or malformed token is answered like a revoked one: 200.
   */
  async revoke(body: unknown, authorization: string | undefined): Promise<Record<string, never>> {
    const request = parseRevocationRequest(body, authorization);
    let clientId: number | null = null;
    if (request.client) {
      const client = await this.authenticateClient(request.client);
      const expired = client.expiresAt !== null && new Date(client.expiresAt).getTime() <= Date.now();
      if (client.revokedAt || expired) throw oauthError('invalid_client', 'The API token behind these client credentials is revoked or expired');
      clientId = client.id;
    }
    const found = await this.tokens.identify(request.token);
    if (!found) return {};
    if (clientId !== null && found.apiTokenId !== clientId) {
      throw oauthError('unauthorized_client', 'The token was not issued to this client; nothing was revoked');
    }
    if (found.kind === 'access_token') await this.tokens.revokeAccessToken(request.token);
    else await this.tokens.revokeApiToken(found.apiTokenId);
    return {};
  }

  /** Checks presented client credentials (constant-time secret comparison); invalid_client when they do not match. */
  private async authenticateClient(credentials: ClientCredentials): Promise<ClientToken> {
    const id = parseClientId(credentials.clientId);
    // An id that names no token still costs a look-up and a comparison, so timing does not tell ids apart.
    const token = await this.tokens.verifyClient(id ?? 0, credentials.clientSecret);
    if (!token) throw oauthError('invalid_client', 'Client authentication failed: unknown client_id or wrong client_secret');
    return token;
  }
}
