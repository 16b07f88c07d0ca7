/** Request and response shapes of the OAuth2 endpoints, for the API reference (the service parses the body itself). */

/** Token request (RFC 6749 §4.4.2), form-encoded or JSON. Extension parameters such as `scope` or `audience` are accepted and ignored. */
export class TokenRequestDto {
  /** Must be `client_credentials`. */
  grant_type: string;
  /** The API token's id. Omit when sending HTTP Basic credentials (or repeat the same id). */
  client_id?: string;
  /** The API token's secret (`sf_...`). Omit when sending HTTP Basic credentials. */
  client_secret?: string;
  /** Accepted and ignored: the access token always carries the API token's permissions. */
  scope?: string;
}

/** Token response (RFC 6749 §5.1). */
export class TokenResponseDto {
  /** Bearer token (`sfat_...`) for `Authorization: Bearer <access_token>` on every route. */
  access_token: string;
  /** Always `Bearer`. */
  token_type: string;
  /** Seconds until the access token expires (OAUTH_ACCESS_TOKEN_TTL_SECONDS, default 3600; never beyond the API token's own expiry). */
  expires_in: number;
}

/** Revocation request (RFC 7009 §2.1), form-encoded or JSON. */
export class RevokeRequestDto {
  /** The access token (`sfat_...`) or API token secret (`sf_...`) to revoke. */
  token: string;
  /** `access_token` or `refresh_token` (RFC 7009); optional and not needed: tokens are recognised by their prefix. */
  token_type_hint?: string;
  /** Optional client authentication (the API token's id); HTTP Basic works too. */
  client_id?: string;
  /** Optional client authentication (the API token's secret). */
  client_secret?: string;
}
