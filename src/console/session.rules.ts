/**
 * Pure rules of the account console's sessions and sign-in throttle (unit-tested in
 * session.rules.spec.ts); the service applies them to rows read from PostgreSQL.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const SESSION_COOKIE = 'sf_session';
/** Cookie of the sign-in form's CSRF token (double submit: no session exists yet). */
export const LOGIN_CSRF_COOKIE = 'sf_login_csrf';
/** The cookies are sent only to the console's pages, never to /api. */
export const COOKIE_PATH = '/account';
export const INVITATION_TTL_MS = 72 * 3600 * 1000;
/** Failures older than this are forgotten. */
export const SIGN_IN_WINDOW_MS = 15 * 60 * 1000;
export const SIGN_IN_MAX_WAIT_MS = 15 * 60 * 1000;

export interface SessionTimes {
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

export type SessionState = 'active' | 'revoked' | 'expired' | 'idle';

/** A session is usable until it is revoked, reaches its absolute expiry, or goes unused for the idle lifetime. */
export function sessionState(s: SessionTimes, now: number, idleSeconds: number): SessionState {
  if (s.revokedAt) return 'revoked';
  if (s.expiresAt.getTime() <= now) return 'expired';
  if (s.lastSeenAt.getTime() + idleSeconds * 1000 <= now) return 'idle';
  return 'active';
}

/** Recording every request's use would write on every page view; once per quarter of the idle lifetime (at most a minute) keeps the idle clock exact enough. */
export function needsTouch(lastSeenAt: Date, now: number, idleSeconds: number): boolean {
  return now - lastSeenAt.getTime() >= Math.min(60_000, (idleSeconds * 1000) / 4);
}

/** The absolute end of a session started now. */
export function sessionExpiry(now: number, absoluteSeconds: number): Date {
  return new Date(now + absoluteSeconds * 1000);
}

export interface FailureCount {
  failures: number;
  firstAt: Date;
  lastAt: Date;
}

/**
 * How long a sign-in attempt must still wait, in ms (0: it may proceed). The first `free` failures
 * within the window cost nothing; after that each attempt must wait 2^(failures - free) seconds
 * after the last failure, up to 15 minutes. Counted per account and per address alike, whether or
 * not the account exists.
 */
export function signInWait(count: FailureCount | null, free: number, now: number): number {
  if (!count || count.firstAt.getTime() + SIGN_IN_WINDOW_MS <= now) return 0;
  if (count.failures < free) return 0;
  const wait = Math.min(2 ** Math.min(count.failures - free, 20) * 1000, SIGN_IN_MAX_WAIT_MS);
  return Math.max(0, count.lastAt.getTime() + wait - now);
}

export function newOpaqueToken(): string {
  return randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** Cookie header → name/value map (first occurrence wins; malformed pairs are skipped). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!header) return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 1) continue;
    const name = part.slice(0, i).trim();
    if (out.has(name)) continue;
    let value = part.slice(i + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    try {
      out.set(name, decodeURIComponent(value));
    } catch {
      /* not a cookie of ours */
    }
  }
  return out;
}

/** A Set-Cookie value: HttpOnly, SameSite=Lax, Path=/account, Secure when the base URL is https. */
export function serializeCookie(name: string, value: string, opts: { secure: boolean; maxAgeSeconds?: number }): string {
  const parts = [`${name}=${encodeURIComponent(value)}`, `Path=${COOKIE_PATH}`, 'HttpOnly', 'SameSite=Lax'];
  if (opts.maxAgeSeconds !== undefined) parts.push(`Max-Age=${opts.maxAgeSeconds}`);
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}
