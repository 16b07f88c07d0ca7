/**
 * HTTP helpers for serving stored files, on the maintained packages Express itself uses:
 * `content-disposition` (RFC 6266 / RFC 8187 `filename*`), `range-parser` (byte ranges, RFC 9110
 * §14) and `fresh` (If-None-Match / If-Modified-Since). What is ours is only the policy around
 * them: the readable ASCII fallback name, one range or the whole file, and If-Range.
 * No Nest, no I/O: unit-tested beside this file.
 */
import { create as createContentDisposition } from 'content-disposition';
import fresh from 'fresh';
import rangeParser from 'range-parser';

/**
 * An ASCII stand-in for a file name, for clients that do not read `filename*`: accents are
 * dropped (é → e), anything else outside printable ASCII, and the quoting-sensitive `"` and `\`,
 * become `_`. The extension is kept when the rest would be empty.
 */
export function asciiFallbackFilename(name: string): string {
  const stripped = name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/[^\x20-\x7e]/g, '_')
    .replace(/["\\%]/g, '_')
    .trim();
  if (!/[A-Za-z0-9]/.test(stripped.replace(/\.[^.]*$/, ''))) {
    const ext = /\.([A-Za-z0-9]{1,16})$/.exec(stripped)?.[1];
    return ext ? `download.${ext}` : 'download';
  }
  return stripped;
}

/**
 * `Content-Disposition` for a stored file: `<type>; filename=<ascii>` (a token, or a quoted string
 * when it needs one), plus `filename*=UTF-8''<encoded>` whenever the ASCII form is not the exact
 * name (RFC 6266 §4.3). Stored names never hold control characters (sanitizeFilename).
 */
export function contentDisposition(filename: string, type: 'inline' | 'attachment' = 'attachment'): string {
  return createContentDisposition(filename, { type, fallback: asciiFallbackFilename(filename) });
}

export type RangeResult =
  /** No usable Range header: send the whole representation (200). */
  | { kind: 'full' }
  /** One satisfiable range, inclusive bounds (206). */
  | { kind: 'partial'; start: number; end: number }
  /** A range that selects nothing of the representation (416). */
  | { kind: 'unsatisfiable' };

/**
 * Reads a `Range` header for a representation of `size` bytes with `range-parser`. Only a single
 * `bytes` range (after merging adjacent ones) is served as 206; a header in another unit,
 * malformed, or asking for several ranges is ignored (RFC 9110 §14.2 lets a server do that), so
 * the client gets the whole file. A suffix range longer than the file selects the whole file
 * (RFC 9110 §14.1.3), which range-parser would call unsatisfiable.
 */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (!header) return { kind: 'full' };
  const parsed = rangeParser(size, header, { combine: true });
  if (parsed === -2) return { kind: 'full' };
  if (parsed === -1) {
    const suffix = /^\s*bytes\s*=\s*-\s*(\d+)\s*$/i.exec(header);
    if (suffix && Number(suffix[1]) > 0 && size > 0) return { kind: 'partial', start: 0, end: size - 1 };
    return { kind: 'unsatisfiable' };
  }
  if (parsed.type.trim().toLowerCase() !== 'bytes' || parsed.length !== 1) return { kind: 'full' };
  return { kind: 'partial', start: parsed[0].start, end: parsed[0].end };
}

/**
 * Whether a request is answered 304 (`fresh`): `If-None-Match` (weak comparison, lists, `*`)
 * decides when present, else `If-Modified-Since` against `lastModified`. Only the two conditional
 * headers are handed over: `fresh` treats a request's `Cache-Control: no-cache` as "never 304",
 * which fits a cache, but this is the origin server validating (and fetch() adds that header to
 * every conditional request).
 */
export function isNotModified(requestHeaders: Record<string, string | string[] | undefined>, etag: string, lastModified: Date): boolean {
  const conditional = { 'if-none-match': requestHeaders['if-none-match'], 'if-modified-since': requestHeaders['if-modified-since'] };
  return fresh(conditional, { etag, 'last-modified': lastModified.toUTCString() });
}

/**
 * `If-Range` (RFC 9110 §13.1.5): a Range is honoured only when the validator still matches
 * (a strong ETag, or the exact Last-Modified date).
 */
export function ifRangeAllows(ifRange: string | undefined, etag: string, lastModified: Date): boolean {
  if (!ifRange) return true;
  const v = ifRange.trim();
  if (v.startsWith('"') || v.startsWith('W/')) return v === etag;
  const date = Date.parse(v);
  return !Number.isNaN(date) && Math.floor(date / 1000) === Math.floor(lastModified.getTime() / 1000);
}
