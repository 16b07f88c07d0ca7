import { describe, expect, it } from '@jest/globals';
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../common/errors.js';
import {
  assertFormFields,
  decodeUrlComponent,
  inspectBody,
  inspectFormFields,
  inspectPath,
  inspectQuery,
  inspectRawBody,
  isValidText,
  requestTextMiddleware,
} from './request-text.middleware.js';

/** Runs the middleware on a fake request (with the body's bytes as `rawBody`, as Nest keeps them) and returns what it passed to next(). */
function run(method: string, url: string, body?: unknown, raw?: { bytes: Buffer; type: string }): AppError | undefined {
  let passed: unknown = 'not called';
  const next: NextFunction = (err?: unknown) => {
    passed = err;
  };
  const req = { method, originalUrl: url, url, body, rawBody: raw?.bytes, headers: raw ? { 'content-type': raw.type } : {} };
  requestTextMiddleware(req as unknown as Request, {} as Response, next);
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
  // These keys never reached the whitelist (class-transformer skips them), so they used to be dropped silently.
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

describe('inspectRawBody', () => {
  const json = 'application/json';
  it('refuses bytes that are not UTF-8 in a UTF-8 body (body-parser would store U+FFFD)', () => {
    const bad = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(inspectRawBody(bad, json)).toEqual([{ field: 'body', message: 'must be valid UTF-8' }]);
    expect(inspectRawBody(bad, 'application/json; charset=UTF-8')).toHaveLength(1);
    expect(inspectRawBody(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]), json)).toHaveLength(1); // an encoded surrogate
    expect(inspectRawBody(Buffer.from([0x22, 0xc3, 0x22]), json)).toHaveLength(1); // a cut sequence
    expect(inspectRawBody(Buffer.from('{"name":"café 😀 \ufffd"}'), json)).toEqual([]);
    // Another declared charset is decoded by its own rules.
    expect(inspectRawBody(bad, 'application/json; charset=utf-16le')).toEqual([]);
  });

  it('refuses percent-encodings of a form body that are not UTF-8, by field', () => {
    const form = 'application/x-www-form-urlencoded';
    expect(inspectRawBody(Buffer.from('grant_type=x&client_id=a%FF'), form)).toEqual([
      { field: 'client_id', message: expect.stringContaining('invalid Unicode') },
    ]);
    expect(inspectRawBody(Buffer.from('a%FF=1'), form)).toEqual([{ field: 'body', message: expect.stringContaining('parameter name') }]);
    expect(inspectRawBody(Buffer.from('name=caf%C3%A9&x=100%25'), form)).toEqual([]);
    expect(inspectRawBody(Buffer.from([0x61, 0x3d, 0xff]), form)).toEqual([{ field: 'body', message: 'must be valid UTF-8' }]);
  });
});

describe('inspectFormFields (multipart text fields)', () => {
  it.each(['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty'])('refuses a field named %s', (name) => {
    const fields = Object.create(null) as Record<string, unknown>;
    fields.title = 'x';
    fields[name] = 'y';
    expect(inspectFormFields(fields)).toEqual([{ field: name, message: 'should not exist' }]);
    expect(() => assertFormFields(fields)).toThrow(AppError);
  });

  it('refuses U+FFFD (what busboy makes of bytes that are not UTF-8), NUL and lone surrogates; nested fields by path', () => {
    expect(inspectFormFields({ title: 'a\ufffdb' })).toEqual([{ field: 'title', message: 'must be valid UTF-8' }]);
    expect(inspectFormFields({ mapping: { Name: 'x\ufffd' } })).toEqual([{ field: 'mapping.Name', message: 'must be valid UTF-8' }]);
    expect(inspectFormFields({ title: 'a\u0000' })).toEqual([{ field: 'title', message: expect.stringContaining('NUL') }]);
    expect(inspectFormFields({ a: { __proto__x: '1' }, b: Object.assign(Object.create(null) as object, { ['__proto__']: 'z' }) })).toEqual([
      { field: 'b.__proto__', message: 'should not exist' },
    ]);
    expect(inspectFormFields({ title: 'Café 😀', description: '' })).toEqual([]);
    expect(() => assertFormFields({ title: 'ok' })).not.toThrow();
    expect(() => assertFormFields(undefined)).not.toThrow();
  });
});

describe('requestTextMiddleware', () => {
  it('answers 400 for a JSON or form body whose bytes are not UTF-8, before any route', () => {
    const bytes = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    const err = run('POST', '/api/contacts/new', { name: '\ufffd' }, { bytes, type: 'application/json' });
    expect(err?.code).toBe('validation_failed');
    expect(err?.details).toEqual([{ field: 'body', message: 'must be valid UTF-8' }]);
    const form = run(
      'POST',
      '/api/oauth/v2/token',
      { client_id: '\ufffd' },
      { bytes: Buffer.from('client_id=%FF'), type: 'application/x-www-form-urlencoded' },
    );
    expect(form?.code).toBe('invalid_request');
    expect(run('POST', '/api/contacts/new', { name: 'é' }, { bytes: Buffer.from('{"name":"é"}'), type: 'application/json' })).toBeUndefined();
  });

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
