/**
 * The one HTTP Basic parser (RFC 7617), used by the OAuth endpoints (client credentials) and by
 * the guard chain (a token sent as the Basic password, e.g. by the queue dashboard's browser).
 */

/** Largest base64 payload accepted (a user id and a token secret fit many times over). */
const MAX_ENCODED_LENGTH = 8192;

export type BasicAuthorization =
  /** No Authorization header, or another scheme (Bearer ...). */
  | { kind: 'absent' }
  /** A Basic header that is not base64 of `user:password`. */
  | { kind: 'malformed' }
  | { kind: 'basic'; user: string; password: string };

/** Reads `Authorization: Basic base64(user:password)`; the parts are returned as sent (not URL-decoded). */
export function parseBasicAuthorization(header: string | undefined): BasicAuthorization {
  if (header === undefined) return { kind: 'absent' };
  const trimmed = header.trim();
  if (!/^basic(\s|$)/i.test(trimmed)) return { kind: 'absent' };
  const m = /^basic\s+([A-Za-z0-9+/]+={0,2})$/i.exec(trimmed);
  if (!m || m[1].length > MAX_ENCODED_LENGTH) return { kind: 'malformed' };
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { kind: 'malformed' };
  return { kind: 'basic', user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** The secret of `Authorization: Bearer <secret>`; null for another scheme or a malformed header. */
export function parseBearerAuthorization(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}
