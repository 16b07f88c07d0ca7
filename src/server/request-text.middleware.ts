/**
 * One check, before any route runs, that every piece of text a request carries can be stored and
 * compared as text, so that no such text can reach the database or be dropped without a word:
 *
 * - path segments and query keys/values: no NUL, and percent-encodings that decode to UTF-8;
 * - JSON and form bodies: bytes that are valid UTF-8 (the parsers would put U+FFFD in place of the
 *   others and store it), percent-encodings of a form body that decode to UTF-8, no NUL or lone
 *   surrogate in any key or string, and no key named after a
 *   built-in object member (`__proto__`, `constructor`, `toString`, ...). class-transformer skips
 *   such keys when it builds a DTO (it never copies `__proto__`/`constructor`, nor a key whose
 *   value on the new instance is an inherited function), so the whitelist never saw them and they
 *   were silently dropped; they are unknown properties like any other.
 *
 * Multipart bodies are parsed later, by the routes that take them: their text fields get the same
 * checks through assertFormFields (below).
 *
 * Every failure is a 400 in the error shape (RFC 6749's invalid_request on the OAuth endpoints);
 * the public asset download answers 404 for an address that cannot name an asset.
 * Registered as the first Express middleware after the body parsers (src/http.ts), ahead of the
 * router, whose own parameter decoding would otherwise fail first.
 */
import { isUtf8 } from 'node:buffer';
import type { NextFunction, Request, Response } from 'express';
import { AppError, type ErrorDetail } from '../common/errors.js';

/** Own property names of Object.prototype (`__proto__`, `constructor`, `toString`, `valueOf`, `hasOwnProperty`, ...). */
export const RESERVED_PROPERTY_NAMES: ReadonlySet<string> = new Set(['__proto__', ...Object.getOwnPropertyNames(Object.prototype)]);

/** A NUL character, or a UTF-16 surrogate without its pair (not encodable as UTF-8). */
// eslint-disable-next-line no-control-regex -- NUL is one of the characters this expression exists to find
const INVALID_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const TEXT_MESSAGE = 'must not contain NUL characters or invalid Unicode';
const MAX_DETAILS = 10;

export function isValidText(s: string): boolean {
  return !INVALID_TEXT.test(s);
}

/** Decodes one percent-encoded URL component; null when it is not valid UTF-8 or holds a NUL. */
export function decodeUrlComponent(raw: string, plusIsSpace = false): string | null {
  const s = plusIsSpace ? raw.replace(/\+/g, ' ') : raw;
  if (!s.includes('%')) return s;
  try {
    const decoded = decodeURIComponent(s);
    return decoded.includes('\u0000') ? null : decoded;
  } catch {
    return null;
  }
}

/**
 * Problems in a parsed body: reserved keys ("should not exist") and keys or strings that are not
 * valid text, at any depth, each named by its dotted path. Iterative, so a deeply nested body
 * cannot overflow the stack; paths are built only for the entries reported.
 */
export function inspectBody(body: unknown): ErrorDetail[] {
  type Node = { value: unknown; key: string; parent: Node | null };
  const pathOf = (n: Node): string => {
    const parts: string[] = [];
    for (let c: Node | null = n; c && c.parent; c = c.parent) parts.push(c.key);
    return parts.reverse().join('.') || 'body';
  };
  const out: ErrorDetail[] = [];
  const stack: Node[] = [{ value: body, key: '', parent: null }];
  for (let node = stack.pop(); node && out.length < MAX_DETAILS; node = stack.pop()) {
    const v = node.value;
    if (typeof v === 'string') {
      if (!isValidText(v)) out.push({ field: pathOf(node), message: TEXT_MESSAGE });
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    const isArray = Array.isArray(v);
    for (const key of Object.keys(v)) {
      const child: Node = { value: (v as Record<string, unknown>)[key], key, parent: node };
      if (!isArray && RESERVED_PROPERTY_NAMES.has(key)) {
        out.push({ field: pathOf(child), message: 'should not exist' });
        continue;
      }
      if (!isArray && !isValidText(key)) {
        out.push({ field: pathOf(child), message: `has a name that ${TEXT_MESSAGE}` });
        continue;
      }
      stack.push(child);
    }
  }
  return out;
}

/**
 * Problems in the bytes of a parsed JSON or form body (Nest keeps them as `rawBody`): bytes that are
 * not UTF-8, where the body is UTF-8 (no charset, or utf-8), and in a form body percent-encodings
 * that do not decode to UTF-8 (named by field). body-parser decodes both leniently.
 */
export function inspectRawBody(raw: Buffer, contentType: string | undefined): ErrorDetail[] {
  const type = (contentType ?? '').toLowerCase();
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/.exec(type)?.[1];
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return [];
  if (!isUtf8(raw)) return [{ field: 'body', message: 'must be valid UTF-8' }];
  if (type.startsWith('application/x-www-form-urlencoded') && raw.includes(0x25 /* % */)) {
    return inspectQuery(raw.toString('latin1')).map((d) => (d.field === 'query' ? { ...d, field: 'body' } : d));
  }
  return [];
}

/**
 * Problems in the text fields of a multipart body (multer's `req.body`): what inspectBody finds in a
 * JSON body (reserved names such as `__proto__` or `toString`, NUL, lone surrogates), and U+FFFD.
 * busboy decodes a field's bytes leniently and never shows them, so a replacement character is the
 * only trace of bytes that were not valid UTF-8 (or not valid in the part's declared charset): a
 * field holding one is refused as not valid text.
 */
export function inspectFormFields(fields: unknown): ErrorDetail[] {
  const out = inspectBody(fields);
  if (fields === null || typeof fields !== 'object') return out;
  const stack: [unknown, string][] = Object.entries(fields).map(([k, v]) => [v, k]);
  for (let entry = stack.pop(); entry && out.length < MAX_DETAILS; entry = stack.pop()) {
    const [v, path] = entry;
    if (typeof v === 'string') {
      if (v.includes('\ufffd') && !out.some((d) => d.field === path)) out.push({ field: path, message: 'must be valid UTF-8' });
    } else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) if (!RESERVED_PROPERTY_NAMES.has(k)) stack.push([child, `${path}.${k}`]);
    }
  }
  return out;
}

/** assertFormFields: a 400 naming every field inspectFormFields refuses. */
export function assertFormFields(fields: unknown): void {
  const details = inspectFormFields(fields);
  if (details.length) throw textError(details, 'validation_failed');
}

function textError(details: ErrorDetail[], code: 'validation_failed' | 'invalid_request'): AppError {
  const summary = details
    .slice(0, 5)
    .map((d) => `${d.field}: ${d.message}`)
    .join('; ');
  return new AppError(code, `Validation failed: ${summary}`, details);
}

/** Problems in the raw query string, by parameter name. */
export function inspectQuery(rawQuery: string): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  if (!rawQuery.includes('%')) return out;
  for (const pair of rawQuery.split('&')) {
    if (out.length >= MAX_DETAILS) break;
    const eq = pair.indexOf('=');
    const rawKey = eq < 0 ? pair : pair.slice(0, eq);
    const key = decodeUrlComponent(rawKey, true);
    if (key === null) {
      out.push({ field: 'query', message: `has a parameter name that ${TEXT_MESSAGE}` });
      continue;
    }
    if (eq >= 0 && decodeUrlComponent(pair.slice(eq + 1), true) === null) out.push({ field: key, message: TEXT_MESSAGE });
  }
  return out;
}

/** True when a raw path segment decodes to valid text. */
export function inspectPath(rawPath: string): boolean {
  if (!rawPath.includes('%')) return true;
  return rawPath.split('/').every((segment) => decodeUrlComponent(segment) !== null);
}

/** `GET|HEAD /api/assets/<id>:<alias>`: the public download, which answers 404 for an address naming no asset. */
const ASSET_DOWNLOAD = /^\/api\/assets\/[^/]*:[^/]*\/?$/;

export function requestTextMiddleware(req: Request, _res: Response, next: NextFunction): void {
  const url = req.originalUrl ?? req.url;
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const details: ErrorDetail[] = [];
  if (!inspectPath(rawPath)) {
    if ((req.method === 'GET' || req.method === 'HEAD') && ASSET_DOWNLOAD.test(rawPath)) {
      next(new AppError('not_found', 'No published asset at this address'));
      return;
    }
    details.push({ field: 'path', message: `${TEXT_MESSAGE} (percent-encodings must decode to UTF-8)` });
  }
  if (q >= 0) details.push(...inspectQuery(url.slice(q + 1)));
  const body: unknown = req.body;
  if (body !== null && typeof body === 'object' && !Buffer.isBuffer(body)) {
    const raw = (req as { rawBody?: unknown }).rawBody;
    if (Buffer.isBuffer(raw)) details.push(...inspectRawBody(raw, req.headers['content-type']));
    details.push(...inspectBody(body));
  }
  if (!details.length) {
    next();
    return;
  }
  next(textError(details, rawPath.startsWith('/api/oauth/') ? 'invalid_request' : 'validation_failed'));
}
