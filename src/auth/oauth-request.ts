/**
 * Pure request parsing for the OAuth2 endpoints (RFC 6749 client credentials grant, RFC 7009
 * revocation): body parameters, HTTP Basic client credentials, grant validation. No Nest, no
 * database, so it is unit tested beside this file.
 */
import { parseBasicAuthorization as parseBasic } from './basic-auth.js';
import { AppError } from '../common/errors.js';

/** RFC 6749 §5.1: token responses (and our OAuth errors) must not be cached. */
export const NO_STORE_HEADERS: Readonly<Record<string, string>> = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

/** The challenge sent with every invalid_client (RFC 6749 §5.2; HTTP requires one on a 401). */
export const BASIC_CHALLENGE = 'Basic realm="SalesFlow API", charset="UTF-8"';

const MAX_PARAM_LENGTH = 4096;
const MAX_ID = 2147483647;

export type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unauthorized_client' | 'unsupported_grant_type';

export function oauthError(code: OAuthErrorCode, message: string): AppError {
  const headers: Record<string, string> = { ...NO_STORE_HEADERS };
  if (code === 'invalid_client') headers['WWW-Authenticate'] = BASIC_CHALLENGE;
  return new AppError(code, message, undefined, headers);
}

/** Client credentials as presented, before they are checked against the stored token. */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
  /** Where they came from: the Authorization header (client_secret_basic) or the body (client_secret_post). */
  via: 'basic' | 'body';
}

export type OAuthParams = Readonly<Record<string, unknown>>;

/**
 * The parameters of an OAuth2 request body: form-encoded (already parsed by the app) or a JSON
 * object; no body at all is an empty parameter set. Unknown parameters (scope, audience, resource
 * and other extensions) are kept and simply never read.
 */
export function readOAuthParams(body: unknown): OAuthParams {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw oauthError('invalid_request', 'The request body must hold form-encoded parameters or a JSON object');
  }
  return body as OAuthParams;
}

/**
 * One parameter as a string. RFC 6749 §3.1: a parameter sent without a value is treated as
 * omitted, and a parameter must not be repeated (invalid_request). A JSON number is accepted for
 * client_id (our client ids are numbers).
 */
export function oauthParam(params: OAuthParams, name: string): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(params, name)) return undefined;
  const v = params[name];
  if (v === undefined || v === null || v === '') return undefined;
  if (Array.isArray(v)) throw oauthError('invalid_request', `The parameter ${name} must be given only once`);
  if (name === 'client_id' && typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  if (typeof v !== 'string') throw oauthError('invalid_request', `The parameter ${name} must be a string`);
  if (v.length > MAX_PARAM_LENGTH || v.includes('\u0000')) throw oauthError('invalid_request', `The parameter ${name} is too long or malformed`);
  return v;
}

/** application/x-www-form-urlencoded decoding of one value ("+" is a space); null when malformed. */
export function formDecode(value: string): string | null {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * Client credentials from an HTTP Basic Authorization header (RFC 6749 §2.3.1: the id and the
 * secret are each form-urlencoded, joined by ":", then base64-encoded). Null when the header is
 * absent or uses another scheme (a Bearer header is not client authentication here); a Basic
 * header that does not decode is a failed client authentication (invalid_client).
 */
export function parseBasicAuthorization(header: string | undefined): { clientId: string; clientSecret: string } | null {
  const basic = parseBasic(header);
  if (basic.kind === 'absent') return null;
  const malformed = () => oauthError('invalid_client', 'The Authorization header is not valid HTTP Basic client credentials');
  if (basic.kind === 'malformed') throw malformed();
  const clientId = formDecode(basic.user);
  const clientSecret = formDecode(basic.password);
  if (!clientId || !clientSecret) throw malformed();
  return { clientId, clientSecret };
}

/**
 * The client credentials of a request, from the Basic header or from client_id/client_secret in
 * the body; null when the request carries none. Both methods at once is an invalid_request
 * (RFC 6749 §2.3), except a body client_id that repeats the Basic one (some clients send it).
 */
export function clientCredentials(params: OAuthParams, authorization: string | undefined): ClientCredentials | null {
  const basic = parseBasicAuthorization(authorization);
  const id = oauthParam(params, 'client_id');
  const secret = oauthParam(params, 'client_secret');
  if (basic) {
    if (secret !== undefined) {
      throw oauthError('invalid_request', 'Use one client authentication method: HTTP Basic or client_id/client_secret in the body, not both');
    }
    if (id !== undefined && id !== basic.clientId) throw oauthError('invalid_request', 'client_id in the body differs from the HTTP Basic client id');
    return { ...basic, via: 'basic' };
  }
  if (id === undefined && secret === undefined) return null;
  if (id === undefined) throw oauthError('invalid_request', 'client_id is required with client_secret');
  if (secret === undefined) {
    throw oauthError('invalid_client', 'Client authentication is required: send client_secret with client_id, or HTTP Basic credentials');
  }
  return { clientId: id, clientSecret: secret, via: 'body' };
}

/** A client id as an API token id, or null when it cannot name one (the client is then unknown). */
export function parseClientId(clientId: string): number | null {
  if (!/^[1-9]\d{0,9}$/.test(clientId)) return null;
  const n = Number(clientId);
  return n <= MAX_ID ? n : null;
}

/**
 * Validates a token request (RFC 6749 §4.4.2): grant_type=client_credentials with client
 * authentication. Returns the presented credentials; checking them is the caller's job.
 */
export function parseTokenRequest(body: unknown, authorization: string | undefined): ClientCredentials {
  const params = readOAuthParams(body);
  const grant = oauthParam(params, 'grant_type');
  if (grant === undefined) throw oauthError('invalid_request', 'grant_type is required; this server supports grant_type=client_credentials');
  if (grant !== 'client_credentials') {
    throw oauthError('unsupported_grant_type', `The grant type "${grant.slice(0, 100)}" is not supported; use client_credentials`);
  }
  const client = clientCredentials(params, authorization);
  if (!client) {
    throw oauthError('invalid_client', 'Client authentication is required: HTTP Basic credentials, or client_id and client_secret in the body');
  }
  return client;
}

/** A revocation request (RFC 7009 §2.1): the token, an optional hint, optional client credentials. */
export interface RevocationRequest {
  token: string;
  tokenTypeHint: string | null;
  client: ClientCredentials | null;
}

export function parseRevocationRequest(body: unknown, authorization: string | undefined): RevocationRequest {
  const params = readOAuthParams(body);
  const token = oauthParam(params, 'token');
  if (token === undefined) throw oauthError('invalid_request', 'token is required');
  // The hint only speeds up a look-up (RFC 7009 §2.1); tokens here are recognised by their prefix, so it is read but not needed.
  const tokenTypeHint = oauthParam(params, 'token_type_hint') ?? null;
  return { token, tokenTypeHint, client: clientCredentials(params, authorization) };
}
