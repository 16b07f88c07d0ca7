import { describe, expect, it } from '@jest/globals';
import type { NextFunction, Request, Response } from 'express';
import { AppError } from './errors.js';
import { decodeUrlComponent, inspectBody, inspectPath, inspectQuery, isValidText, requestTextMiddleware } from './request-text.middleware.js';

/** Runs the middleware on a fake request and returns what it passed to next(). */
function run(method: string, url: string, body?: unknown): AppError | undefined {
  let passed: unknown = 'not called';
  const next: NextFunction = (err?: unknown) => {
    passed = err;
  };
  requestTextMiddleware({ method, originalUrl: url, url, body } as unknown as Request, {} as Response, next);
  if (passed === 'not called') throw new Error('next() was not called');
  return passed as AppError | undefined;
}

describe('text checks', () => {
  it('valid text: no NUL, no lone surrogate; pairs and other controls are fine', () => {
    expect(isValidText('plain café 😀\t\n')).toBe(true);
    expect(isValidText('a\u0000b')).toBe(false);
    expect(isValidText('a\ud800')).toBe(false);
    expect(isValidText('\udc00a')).toBe(false);
    expect(isValidText('\ud83d\ude00')).toBe(true);
    expect(isValidText('\ude00\ud83d')).toBe(false);
  });

  it('URL components must decode to UTF-8 without NUL', () => {
    expect(decodeUrlComponent('caf%C3%A9')).toBe('café');
    expect(decodeUrlComponent('a+b', true)).toBe('a b');
    expect(decodeUrlComponent('x%00')).toBeNull();
    expect(decodeUrlComponent('%E0%A4%A')).toBeNull();
    expect(decodeUrlComponent('%ED%A0%80')).toBeNull(); // an encoded lone surrogate is not UTF-8
    expect(decodeUrlComponent('%FF')).toBeNull();
    expect(decodeUrlComponent('%')).toBeNull();
    expect(inspectPath('/api/contacts/1')).toBe(true);
    expect(inspectPath('/api/contacts/%00')).toBe(false);
    expect(inspectQuery('search=a%00&page=1')).toEqual([{ field: 'search', message: expect.stringContaining('NUL') }]);
    expect(inspectQuery('%00=1')).toEqual([{ field: 'query', message: expect.stringContaining('parameter name') }]);
    expect(inspectQuery('search=caf%C3%A9')).toEqual([]);
  });
});

describe('inspectBody', () => {
  // Issue 11.12: these keys never reached the whitelist (class-transformer skips them), so they were dropped silently.
  it.each(['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', '__defineGetter__'])(
    'refuses the key %s at the top level and inside nested objects',
    (key) => {
      expect(inspectBody(JSON.parse(`{"name":"x","${key}":1}`))).toEqual([{ field: key, message: 'should not exist' }]);
      expect(inspectBody(JSON.parse(`{"fields":{"${key}":"x"}}`))).toEqual([{ field: `fields.${key}`, message: 'should not exist' }]);
    },
  );

  it('names bad strings and keys by their path, arrays by index', () => {
    expect(inspectBody({ name: 'a\u0000' })).toEqual([{ field: 'name', message: expect.stringContaining('NUL') }]);
    expect(inspectBody({ fields: { alias: ['ok', 'x\ud800'] } })).toEqual([{ field: 'fields.alias.1', message: expect.stringContaining('NUL') }]);
    expect(inspectBody({ ['a\u0000']: 1 })).toEqual([{ field: 'a\u0000', message: expect.stringContaining('has a name that') }]);
    expect(inspectBody(['x\u0000'])).toEqual([{ field: '0', message: expect.any(String) }]);
  });

  it('accepts ordinary bodies, including keys that merely contain a reserved word', () => {
    expect(inspectBody({ name: 'x', constructorName: 'y', fields: { to_string: 'z', proto: 1 }, tags: ['a', 'b'], n: 1, b: null })).toEqual([]);
  });

  it('walks very deep bodies without recursion', () => {
    const deep = JSON.parse('{"a":'.repeat(20000) + '"x\\u0000"' + '}'.repeat(20000));
    const [problem] = inspectBody(deep);
    expect(problem.field.split('.')).toHaveLength(20000);
  });
});

describe('requestTextMiddleware', () => {
  it('passes a clean request on', () => {
    expect(run('GET', '/api/contacts?search=caf%C3%A9', undefined)).toBeUndefined();
    expect(run('POST', '/api/contacts/new', { name: 'x', fields: { a: 1 } })).toBeUndefined();
  });

  it('answers 400 validation_failed for NUL in the path, a query value or a body string', () => {
    for (const [url, body, field] of [
      ['/api/contacts/1%00', undefined, 'path'],
      ['/api/contacts?search=%E0%A4%A', undefined, 'search'],
      ['/api/contacts/new', { title: 'a\u0000' }, 'title'],
      ['/api/contacts/new', { name: 'x', toString: 'y' }, 'toString'],
    ] as const) {
      const err = run(url === '/api/contacts/new' ? 'POST' : 'GET', url, body);
      expect(err).toBeInstanceOf(AppError);
      expect(err?.status).toBe(400);
      expect(err?.code).toBe('validation_failed');
      expect(err?.details?.[0].field).toBe(field);
    }
  });

  it('answers invalid_request on the OAuth endpoints', () => {
    expect(run('POST', '/api/oauth/v2/token', { client_id: 'a\u0000' })?.code).toBe('invalid_request');
  });

  it('answers 404 for the public asset download, whose address then names no asset', () => {
    for (const url of ['/api/assets/1:x%00', '/api/assets/1:%E0%A4%A', '/api/assets/%00:x']) {
      const err = run('GET', url);
      expect(err?.status).toBe(404);
      expect(err?.code).toBe('not_found');
    }
    expect(run('HEAD', '/api/assets/1:x%00')?.status).toBe(404);
    // Only the download: the token-protected record and its edits stay 400.
    expect(run('GET', '/api/assets/1%00')?.status).toBe(400);
    expect(run('PATCH', '/api/assets/1:x%00')?.status).toBe(400);
  });
});
