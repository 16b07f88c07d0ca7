/**
 * Pure HTTP helpers for serving stored files: Content-Disposition (RFC 6266 / RFC 5987), byte
 * ranges (RFC 9110 §14) and conditional requests. No Nest, no I/O: unit-tested beside this file.
 */

/** Characters RFC 5987 `attr-char` allows unencoded (besides ALPHA and DIGIT). */
const ATTR_CHAR_EXTRA = new Set([...'!#$&+-.^_`|~']);

/** RFC 5987 `value-chars` of a UTF-8 string: every byte outside `attr-char` percent-encoded. */
export function encodeRfc5987(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    if ((byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || ATTR_CHAR_EXTRA.has(c)) out += c;
    else out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

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
 * `Content-Disposition` for a stored file: `<type>; filename="<ascii>"`, plus
 * `filename*=UTF-8''<encoded>` whenever the ASCII form is not the exact name (RFC 6266 §4.3).
 */
export function contentDisposition(filename: string, type: 'inline' | 'attachment' = 'attachment'): string {
  const fallback = asciiFallbackFilename(filename);
  let header = `${type}; filename="${fallback}"`;
  if (fallback !== filename) header += `; filename*=UTF-8''${encodeRfc5987(filename)}`;
  return header;
}

export type RangeResult =
  /** No usable Range header: send the whole representation (200). */
  | { kind: 'full' }
  /** One satisfiable range, inclusive bounds (206). */
  | { kind: 'partial'; start: number; end: number }
  /** A syntactically valid range that selects nothing (416). */
  | { kind: 'unsatisfiable' };

/**
 * Reads a `Range` header for a representation of `size` bytes. Only a single `bytes` range is
 * served as 206; a header in another unit, malformed, or asking for several ranges is ignored
 * (RFC 9110 §14.2 lets a server do that), so the client gets the whole file.
 */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (header === undefined) return { kind: 'full' };
  const m = /^\s*bytes\s*=\s*(.*)$/i.exec(header);
  if (!m) return { kind: 'full' };
  const specs = m[1].split(',').map((s) => s.trim()).filter(Boolean);
  if (specs.length !== 1) return { kind: 'full' };
  const r = /^(\d*)\s*-\s*(\d*)$/.exec(specs[0]);
  if (!r || (r[1] === '' && r[2] === '')) return { kind: 'full' };
  if (r[1] === '') {
    // Suffix range: the last N bytes.
    const n = Number(r[2]);
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(r[1]);
  const end = r[2] === '' ? Infinity : Number(r[2]);
  if (end < start) return { kind: 'full' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', start, end: Math.min(end, size - 1) };
}

/** Entity tags listed in an `If-None-Match` / `If-Match` header (`*` stays `*`). */
function etagList(header: string): string[] {
  return header
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Weak comparison (RFC 9110 §8.8.3.2), as `If-None-Match` uses. */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  const bare = (t: string) => t.replace(/^W\//, '');
  return etagList(ifNoneMatch).some((t) => t === '*' || bare(t) === bare(etag));
}

/**
 * Whether a request is answered 304: `If-None-Match` decides when present, else
 * `If-Modified-Since` (second precision) against `lastModified`.
 */
export function isNotModified(headers: { ifNoneMatch?: string; ifModifiedSince?: string }, etag: string, lastModified: Date): boolean {
  if (headers.ifNoneMatch) return etagMatches(headers.ifNoneMatch, etag);
  if (headers.ifModifiedSince) {
    const since = Date.parse(headers.ifModifiedSince);
    if (Number.isNaN(since)) return false;
    return Math.floor(lastModified.getTime() / 1000) <= Math.floor(since / 1000);
  }
  return false;
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
