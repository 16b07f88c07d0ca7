import { describe, expect, it } from '@jest/globals';
import { parseBasicAuthorization, parseBearerAuthorization } from './basic-auth.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('parseBasicAuthorization', () => {
  it('splits user and password at the first colon, as sent', () => {
    expect(parseBasicAuthorization(`Basic ${b64('admin:sf_x:y')}`)).toEqual({ kind: 'basic', user: 'admin', password: 'sf_x:y' });
    expect(parseBasicAuthorization(`basic   ${b64(':sf_only')}  `)).toEqual({ kind: 'basic', user: '', password: 'sf_only' });
  });

  it('tells an absent or other-scheme header from a malformed Basic one', () => {
    expect(parseBasicAuthorization(undefined)).toEqual({ kind: 'absent' });
    expect(parseBasicAuthorization('Bearer sf_x')).toEqual({ kind: 'absent' });
    expect(parseBasicAuthorization('Basic')).toEqual({ kind: 'malformed' });
    expect(parseBasicAuthorization('Basic !!!')).toEqual({ kind: 'malformed' });
    expect(parseBasicAuthorization(`Basic ${b64('no colon')}`)).toEqual({ kind: 'malformed' });
    expect(parseBasicAuthorization(`Basic ${'A'.repeat(9000)}`)).toEqual({ kind: 'malformed' });
  });
});

describe('parseBearerAuthorization', () => {
  it('reads one bearer secret, case-insensitively', () => {
    expect(parseBearerAuthorization('Bearer sf_abc')).toBe('sf_abc');
    expect(parseBearerAuthorization('bearer  sf_abc ')).toBe('sf_abc');
    expect(parseBearerAuthorization('Bearer a b')).toBeNull();
    expect(parseBearerAuthorization('Basic abc')).toBeNull();
    expect(parseBearerAuthorization(undefined)).toBeNull();
  });
});
