import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import {
  BASIC_CHALLENGE,
  clientCredentials,
  formDecode,
  oauthParam,
  parseBasicAuthorization,
  parseClientId,
  parseRevocationRequest,
  parseTokenRequest,
  readOAuthParams,
} from './oauth-request.js';

/** RFC 6749 §2.3.1: each part form-urlencoded, then base64 of "id:secret". */
const basic = (id: string, secret: string) =>
  'Basic ' + Buffer.from(`${encodeURIComponent(id).replace(/%20/g, '+')}:${encodeURIComponent(secret).replace(/%20/g, '+')}`).toString('base64');

function caught(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error('expected an AppError');
}

describe('parseBasicAuthorization', () => {
  it('decodes id and secret, form-urldecoding each part', () => {
    expect(parseBasicAuthorization(basic('12', 'sf_abc-DEF_123'))).toEqual({ clientId: '12', clientSecret: 'sf_abc-DEF_123' });
    expect(parseBasicAuthorization(basic('a b:c', 'p@ss:w%rd+/é'))).toEqual({ clientId: 'a b:c', clientSecret: 'p@ss:w%rd+/é' });
    // "+" in the encoded form is a space; a raw secret containing ":" after the first colon stays intact
    const raw = 'Basic ' + Buffer.from('7:x+y:z').toString('base64');
    expect(parseBasicAuthorization(raw)).toEqual({ clientId: '7', clientSecret: 'x y:z' });
  });

  it('accepts any case of the scheme and surrounding spaces', () => {
    const value = basic('3', 'sf_s').slice('Basic '.length);
    expect(parseBasicAuthorization(`bAsIc   ${value}  `)).toEqual({ clientId: '3', clientSecret: 'sf_s' });
  });

  it('ignores an absent header and other schemes', () => {
    expect(parseBasicAuthorization(undefined)).toBeNull();
    expect(parseBasicAuthorization('Bearer sf_abc')).toBeNull();
    expect(parseBasicAuthorization('Basically nothing')).toBeNull();
  });

  it.each([
    ['no credentials', 'Basic'],
    ['not base64', 'Basic ***'],
    ['no colon', 'Basic ' + Buffer.from('justanid').toString('base64')],
    ['empty id', 'Basic ' + Buffer.from(':secret').toString('base64')],
    ['empty secret', 'Basic ' + Buffer.from('12:').toString('base64')],
    ['bad percent-encoding', 'Basic ' + Buffer.from('12:%E0%A4%A').toString('base64')],
    ['two tokens', 'Basic abc def'],
  ])('refuses a malformed Basic header (%s) as invalid_client with a Basic challenge', (_name, header) => {
    const e = caught(() => parseBasicAuthorization(header));
    expect(e.code).toBe('invalid_client');
    expect(e.status).toBe(401);
    expect(e.headers?.['WWW-Authenticate']).toBe(BASIC_CHALLENGE);
    expect(e.headers?.['Cache-Control']).toBe('no-store');
  });
});

describe('formDecode', () => {
  it('decodes plus as space and percent escapes; null when malformed', () => {
    expect(formDecode('a+b%2Bc')).toBe('a b+c');
    expect(formDecode('%zz')).toBeNull();
  });
});

describe('readOAuthParams and oauthParam', () => {
  it('takes objects, treats no body as no parameters and refuses other bodies', () => {
    expect(readOAuthParams(undefined)).toEqual({});
    expect(readOAuthParams({ a: '1' })).toEqual({ a: '1' });
    expect(caught(() => readOAuthParams([1, 2])).code).toBe('invalid_request');
    expect(caught(() => readOAuthParams('grant_type=x')).code).toBe('invalid_request');
  });

  it('treats empty values as omitted and refuses repeated or non-string values', () => {
    expect(oauthParam({ scope: '' }, 'scope')).toBeUndefined();
    expect(oauthParam({ scope: null }, 'scope')).toBeUndefined();
    expect(oauthParam({}, 'scope')).toBeUndefined();
    expect(oauthParam({ client_id: 12 }, 'client_id')).toBe('12');
    const repeated = caught(() => oauthParam({ grant_type: ['client_credentials', 'client_credentials'] }, 'grant_type'));
    expect(repeated.code).toBe('invalid_request');
    expect(repeated.status).toBe(400);
    expect(caught(() => oauthParam({ client_secret: 12 }, 'client_secret')).code).toBe('invalid_request');
    expect(caught(() => oauthParam({ token: { a: 1 } }, 'token')).code).toBe('invalid_request');
    expect(caught(() => oauthParam({ token: 'x\u0000' }, 'token')).code).toBe('invalid_request');
  });

  it('does not look at the prototype', () => {
    expect(oauthParam({}, 'toString')).toBeUndefined();
  });
});

describe('parseClientId', () => {
  it('takes positive 32-bit integers only', () => {
    expect(parseClientId('1')).toBe(1);
    expect(parseClientId('2147483647')).toBe(2147483647);
    for (const bad of ['0', '-1', '01', '1.5', 'abc', '2147483648', '99999999999', ' 1']) expect(parseClientId(bad)).toBeNull();
  });
});

describe('clientCredentials', () => {
  it('reads body credentials (client_secret_post)', () => {
    expect(clientCredentials({ client_id: '4', client_secret: 'sf_x' }, undefined)).toEqual({ clientId: '4', clientSecret: 'sf_x', via: 'body' });
  });

  it('reads Basic credentials, allowing the same client_id in the body', () => {
    expect(clientCredentials({}, basic('4', 'sf_x'))).toEqual({ clientId: '4', clientSecret: 'sf_x', via: 'basic' });
    expect(clientCredentials({ client_id: '4' }, basic('4', 'sf_x'))).toEqual({ clientId: '4', clientSecret: 'sf_x', via: 'basic' });
  });

  it('refuses two methods at once and a differing client_id', () => {
    expect(caught(() => clientCredentials({ client_id: '4', client_secret: 'sf_x' }, basic('4', 'sf_x'))).code).toBe('invalid_request');
    expect(caught(() => clientCredentials({ client_id: '5' }, basic('4', 'sf_x'))).code).toBe('invalid_request');
  });

  it('is null without credentials; a lone secret is malformed, a lone id is unauthenticated', () => {
    expect(clientCredentials({ scope: 'x' }, 'Bearer sf_abc')).toBeNull();
    expect(caught(() => clientCredentials({ client_secret: 'sf_x' }, undefined)).code).toBe('invalid_request');
    const e = caught(() => clientCredentials({ client_id: '4' }, undefined));
    expect(e.code).toBe('invalid_client');
    expect(e.status).toBe(401);
  });
});

describe('parseTokenRequest (grant validation)', () => {
  it('accepts client_credentials with credentials, ignoring extension parameters', () => {
    expect(
      parseTokenRequest({ grant_type: 'client_credentials', client_id: '9', client_secret: 'sf_s', scope: 'contacts:read', audience: 'x' }, undefined),
    ).toEqual({
      clientId: '9',
      clientSecret: 'sf_s',
      via: 'body',
    });
  });

  it('needs grant_type (invalid_request)', () => {
    const e = caught(() => parseTokenRequest({ client_id: '9', client_secret: 'sf_s' }, undefined));
    expect([e.code, e.status]).toEqual(['invalid_request', 400]);
    expect(caught(() => parseTokenRequest(undefined, undefined)).code).toBe('invalid_request');
  });

  it.each(['password', 'authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'CLIENT_CREDENTIALS'])(
    'refuses grant_type=%s as unsupported_grant_type',
    (grant) => {
      const e = caught(() => parseTokenRequest({ grant_type: grant, client_id: '9', client_secret: 'sf_s' }, undefined));
      expect([e.code, e.status]).toEqual(['unsupported_grant_type', 400]);
    },
  );

  it('needs client authentication (invalid_client 401 with a Basic challenge)', () => {
    const e = caught(() => parseTokenRequest({ grant_type: 'client_credentials' }, undefined));
    expect([e.code, e.status]).toEqual(['invalid_client', 401]);
    expect(e.headers?.['WWW-Authenticate']).toMatch(/^Basic /);
  });
});

describe('parseRevocationRequest', () => {
  it('needs token; hint and client credentials are optional', () => {
    expect(parseRevocationRequest({ token: 'sfat_x' }, undefined)).toEqual({ token: 'sfat_x', tokenTypeHint: null, client: null });
    expect(parseRevocationRequest({ token: 'sfat_x', token_type_hint: 'access_token' }, basic('3', 'sf_y'))).toEqual({
      token: 'sfat_x',
      tokenTypeHint: 'access_token',
      client: { clientId: '3', clientSecret: 'sf_y', via: 'basic' },
    });
    expect(caught(() => parseRevocationRequest({ token_type_hint: 'access_token' }, undefined)).code).toBe('invalid_request');
  });
});
