/**
 * Idempotency-Key rules (docs/decisions/idempotency-keys.md): which requests take a key, what a valid key is, what
 * makes two requests "the same" (the fingerprint), and which parts of an answer are replayed.
 * The claim/replay machinery is idempotency.service.ts (PostgreSQL) and idempotency.guard.ts.
 */
import { applyDecorators, Header, SetMetadata } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { AppError } from '../common/errors.js';
import { ReadyAnswer } from './answer-recorder.js';
import type { Principal } from '../common/request.js';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const KEY_PATTERN = /^[A-Za-z0-9_:-]{1,255}$/;

/**
 * Response headers a replay repeats: those that describe the answer itself. Rate-limit, request-id
 * and security headers belong to the request that carries the replay, and are that request's own.
 */
export const RECORDED_HEADERS = [
  'content-type',
  'cache-control',
  'pragma',
  'location',
  'etag',
  'last-modified',
  'content-disposition',
  'allow',
  'www-authenticate',
  'deprecation',
  'sunset',
];

/** Route metadata: where in a success answer's JSON body a secret is (e.g. `['token', 'secret']`). */
export const ANSWERS_SECRET_KEY = 'sf:answers-secret';

/**
 * The route's success answer carries a secret shown only once, at `path` in its JSON body (e.g.
 * `token.secret`): it is sent with `Cache-Control: no-store` (and `Pragma: no-cache`), so that no cache keeps
 * it, and an Idempotency-Key's record of it keeps everything but the secret (see withoutSecret).
 */
export const AnswersSecret = (path: string) =>
  applyDecorators(Header('Cache-Control', 'no-store'), Header('Pragma', 'no-cache'), SetMetadata(ANSWERS_SECRET_KEY, path.split('.')));

/** What a replay of an answer that carried a secret says in place of it (the `notice` beside the envelope). */
export const SECRET_NOT_KEPT_NOTICE =
  'This is a replay of an earlier answer (Idempotency-Key): the secret was shown only in that answer and is not kept, so it is left out here. If it was lost, revoke the credential (or rotate its secret) and make a new one.';

/**
 * The JSON body to keep for replays of an answer whose `path` holds a secret: the same body without
 * the secret, with a top-level `notice` saying so. Bodies that are not JSON objects, or hold no
 * secret there (an error answer), are kept as they are.
 */
export function withoutSecret(body: Buffer | null, path: readonly string[]): Buffer | null {
  if (body === null || !path.length) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  let holder: unknown = parsed;
  for (const part of path.slice(0, -1)) {
    holder = holder !== null && typeof holder === 'object' ? (holder as Record<string, unknown>)[part] : undefined;
  }
  const last = path[path.length - 1];
  if (holder === null || typeof holder !== 'object' || !Object.prototype.hasOwnProperty.call(holder, last)) return body;
  delete (holder as Record<string, unknown>)[last];
  return Buffer.from(JSON.stringify({ ...(parsed as Record<string, unknown>), notice: SECRET_NOT_KEPT_NOTICE }));
}

/**
 * The credential a key's answer is replayed to: the kind of token and its API token (an OAuth
 * access token counts as its API token's: it holds the same permissions, and the same kind meets the
 * same rules). Another token of the same account, with other permissions or another kind, is not
 * answered the original's result, since its authorisation was checked for the original's credential.
 */
export const credentialOf = (principal: Pick<Principal, 'kind' | 'apiTokenId'>): string => `${principal.kind}:${principal.apiTokenId}`;

/** The key as sent, or a 400 naming the header. */
export function parseIdempotencyKey(value: string | string[]): string {
  const key = Array.isArray(value) ? value.join(', ') : value;
  if (!KEY_PATTERN.test(key)) {
    const message = 'must be 1 to 255 characters of A-Z, a-z, 0-9, "_", ":" and "-" (sent once)';
    throw new AppError('validation_failed', `${IDEMPOTENCY_HEADER}: ${message}`, [{ field: IDEMPOTENCY_HEADER, message }]);
  }
  return key;
}

/** JSON with object keys sorted at every level: the same data in another key order or spacing is the same request. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The key's scope: method + path (the account and the key are columns of their own). */
export const scopeOf = (method: string, path: string): string => sha256(`${method} ${path}`);

/**
 * What makes a retry "the same request": the media type, the query string and the canonical body.
 * A multipart upload (an import's CSV, an asset's file) is streamed to storage after the key is
 * claimed, so its bytes cannot be compared: it is matched by its size (Content-Length), and a retry of
 * the same upload replays while an upload of another size is a mismatch.
 */
export function fingerprintOf(req: Pick<Request, 'headers' | 'query' | 'body'>): string {
  const mediaType = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const body: unknown = req.body;
  const content =
    mediaType === 'multipart/form-data' ? `multipart ${req.headers['content-length'] ?? 'chunked'}` : body === undefined ? '' : canonicalJson(body);
  return sha256(`${mediaType}\n${canonicalJson(req.query ?? {})}\n${content}`);
}

/** Whether an answer is kept for replays: 2xx and 4xx, except 429 (and never 5xx), which a retry runs again. */
export const isRecordedStatus = (status: number): boolean => status < 500 && status !== 429;

/** A recorded answer to send again, marked as a replay (thrown by the guard, sent as it is by the global exception filter). */
export class ReplayedResponse extends ReadyAnswer {
  constructor(status: number, recordedHeaders: Record<string, string>, body: Buffer | null) {
    super(status, { ...recordedHeaders, [REPLAYED_HEADER]: 'true' }, body);
    this.message = `replay of a recorded ${status} answer`;
  }
}
