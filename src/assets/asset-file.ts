/**
 * Pure rules for uploaded files and asset metadata: the client's file name (kept only as
 * metadata), media type detection from the content, alias generation, and reading multipart form
 * fields into typed values. No Nest, no I/O: unit-tested beside this file.
 */
import { fileTypeFromBuffer } from 'file-type';
import { ALIAS_MAX_LENGTH } from '../common/alias.js';
import { parseBoolean } from '../lists/list-query.js';
import type { ErrorDetail } from '../common/errors.js';

/** Bytes from the start of an upload kept for type detection (never the whole file). */
export const SNIFF_BYTES = 256 * 1024;
const MAX_FILENAME_CHARS = 255;

/**
 * The client's file name as metadata: only the last path component (a name like `../../etc/passwd`
 * or `C:\\x\\y.pdf` keeps `passwd` / `y.pdf`), NFC-normalised, without control characters, at most
 * 255 characters (the extension survives shortening). Never used to build a path.
 */
export function sanitizeFilename(raw: string | undefined | null): string {
  let name = (raw ?? '').normalize('NFC');
  name = name.split(/[/\\]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex -- removing control characters is the point of this expression
  name = name.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, '').trim();
  if (/^\.+$/.test(name)) name = '';
  const chars = [...name];
  if (chars.length > MAX_FILENAME_CHARS) {
    const ext = /\.[^.]{1,16}$/.exec(name)?.[0] ?? '';
    name = chars.slice(0, MAX_FILENAME_CHARS - [...ext].length).join('') + ext;
  }
  return name || 'file';
}

/** The extension of a client file name, lower-cased, when it is a plain one (letters/digits, ≤ 16). */
export function clientExtension(filename: string): string | null {
  const m = /\.([A-Za-z0-9]{1,16})$/.exec(filename);
  return m ? m[1].toLowerCase() : null;
}

/** Text formats recognised by extension once the content is known to be text (never HTML/SVG: served as text/plain). */
const TEXT_TYPES: Record<string, string> = {
  txt: 'text/plain',
  text: 'text/plain',
  log: 'text/plain',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  md: 'text/markdown',
  markdown: 'text/markdown',
  json: 'application/json',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  ics: 'text/calendar',
  vcf: 'text/vcard',
};

/** UTF-8 text without NUL bytes and with few other control characters (the start of the file). */
export function looksLikeText(sample: Uint8Array): boolean {
  if (sample.length === 0) return true;
  let text: string;
  try {
    // stream: true tolerates a multi-byte character cut at the end of the sample.
    text = new TextDecoder('utf-8', { fatal: true }).decode(sample, { stream: true });
  } catch {
    return false;
  }
  let control = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0) return false;
    if (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0c && c !== 0x0d && c !== 0x1b) control++;
  }
  return control <= Math.max(1, text.length / 100);
}

export interface DetectedType {
  mime: string;
  extension: string;
}

/**
 * The media type of an upload from its first bytes (magic numbers through `file-type`); a file
 * with no known signature is text/* when it reads as UTF-8 text (the subtype from an allow-listed
 * extension, else text/plain), otherwise application/octet-stream. The client's declared type is
 * never used; its extension only names the subtype of text and the extension of unknown binaries.
 */
export async function detectType(sample: Uint8Array, filename: string): Promise<DetectedType> {
  const found = sample.length ? await fileTypeFromBuffer(sample) : undefined;
  if (found) return { mime: found.mime, extension: found.ext };
  const ext = clientExtension(filename);
  if (looksLikeText(sample)) {
    // Own properties only: an extension such as `.constructor` names no entry (not Object.prototype's member).
    if (ext && Object.hasOwn(TEXT_TYPES, ext)) return { mime: TEXT_TYPES[ext], extension: ext };
    return { mime: 'text/plain', extension: 'txt' };
  }
  return { mime: 'application/octet-stream', extension: ext ?? 'bin' };
}

/** Media types shown in the browser (inline); everything else is offered as a download. */
export function dispositionType(mime: string): 'inline' | 'attachment' {
  if (mime === 'image/svg+xml') return 'attachment';
  if (/^(image|audio|video)\//.test(mime) || mime === 'application/pdf' || mime === 'text/plain') return 'inline';
  return 'attachment';
}

export const ALIAS_PATTERN = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/;
export const ALIAS_MAX = 100;

/**
 * URL alias from a title: accents dropped (ß → ss, æ → ae, ...), lower case, runs of other
 * characters → `-`, at most ALIAS_MAX_LENGTH (64) characters, the length of every generated alias
 * (common/alias.ts adds `-2`, `-3`... within it); `asset` when nothing is left.
 */
const LATIN_LETTERS: Record<string, string> = { ß: 'ss', æ: 'ae', œ: 'oe', ø: 'o', đ: 'd', ð: 'd', ł: 'l', þ: 'th', ı: 'i' };

export function slugify(title: string): string {
  const slug = title
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[ßæœøđðłþı]/g, (c) => LATIN_LETTERS[c])
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, ALIAS_MAX_LENGTH)
    .replace(/-+$/, '');
  return slug || 'asset';
}

/**
 * Multipart form fields → the values the JSON body would carry: `isPublished` from
 * true/false/1/0, `category` from a whole number, an empty `description`, `category`,
 * `publishUp` or `publishDown` as null (clear), an empty `alias` as omitted. Other fields pass
 * through as strings (unknown ones are refused later by the validation); a value holding NUL is
 * refused. Problems are returned,
 * not thrown.
 */
export function formFieldsToBody(fields: Record<string, unknown>): { body: Record<string, unknown>; errors: ErrorDetail[] } {
  const body: Record<string, unknown> = {};
  const errors: ErrorDetail[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value !== 'string') {
      errors.push({ field: key, message: 'must be given once, as a plain form field' });
      continue;
    }
    if (value.includes('\u0000')) {
      // PostgreSQL text cannot hold NUL: refused here rather than failing in the database.
      errors.push({ field: key, message: 'must not contain NUL characters' });
      continue;
    }
    switch (key) {
      case 'isPublished': {
        const b = parseBoolean(value);
        if (b === null) errors.push({ field: key, message: 'must be true, false, 1 or 0' });
        else body[key] = b;
        break;
      }
      case 'category':
        if (value.trim() === '') body[key] = null;
        else if (/^\d{1,10}$/.test(value.trim())) body[key] = Number(value.trim());
        else errors.push({ field: key, message: 'must be the id of an existing category' });
        break;
      case 'description':
      case 'publishUp':
      case 'publishDown':
        body[key] = value === '' ? null : value;
        break;
      case 'alias':
        if (value !== '') body[key] = value;
        break;
      default:
        body[key] = value;
    }
  }
  return { body, errors };
}
