import type { Response } from 'express';
import { hasPermission, type Permission } from '../auth/permissions.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import type { AppConfig } from '../config/config.js';
import type { ConsoleRequest } from './console.guard.js';
import type { Chrome } from './console.views.js';
import { LOGIN_CSRF_COOKIE, newOpaqueToken, parseCookies, serializeCookie, SESSION_COOKIE } from './session.rules.js';

export const FORM = 'application/x-www-form-urlencoded';

export function sendPage(res: Response, status: number, html: string): void {
  res.status(status).type('html').send(html);
}

export function seeOther(res: Response, location: string): void {
  res.redirect(303, location);
}

/** A form field as one string ('' when missing or repeated). */
export function field(body: unknown, name: string): string {
  const v = (body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}

/** A form field that may repeat (checkboxes), as a list of strings. */
export function fields(body: unknown, name: string): string[] {
  const v = (body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export function chromeOf(req: ConsoleRequest): Chrome {
  return req.console ? { user: { name: req.console.user.name, email: req.console.user.email }, csrf: req.console.csrfToken } : {};
}

export function sessionCookieOf(req: ConsoleRequest): string | undefined {
  return parseCookies(req.headers.cookie).get(SESSION_COOKIE);
}

export function setSessionCookie(res: Response, config: AppConfig, token: string): void {
  res.append('Set-Cookie', serializeCookie(SESSION_COOKIE, token, { secure: config.account.secureCookies }));
  res.append('Set-Cookie', serializeCookie(LOGIN_CSRF_COOKIE, '', { secure: config.account.secureCookies, maxAgeSeconds: 0 }));
}

export function clearSessionCookie(res: Response, config: AppConfig): void {
  res.append('Set-Cookie', serializeCookie(SESSION_COOKIE, '', { secure: config.account.secureCookies, maxAgeSeconds: 0 }));
}

/** The CSRF token of an anonymous form (sign-in, invitation): the browser's cookie, or a new one. */
export function anonymousCsrf(req: ConsoleRequest, res: Response, config: AppConfig): string {
  const existing = parseCookies(req.headers.cookie).get(LOGIN_CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = newOpaqueToken();
  res.append('Set-Cookie', serializeCookie(LOGIN_CSRF_COOKIE, token, { secure: config.account.secureCookies, maxAgeSeconds: 7200 }));
  return token;
}

export function clientMeta(req: ConsoleRequest): { ip: string | null; userAgent: string | null } {
  return { ip: req.ip ?? req.socket.remoteAddress ?? null, userAgent: req.headers['user-agent'] ?? null };
}

/** The permission the page's API route requires, checked on the signed-in user as the API checks a token's (403 otherwise). */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (!hasPermission(principal.permissions, permission)) throw new AppError('forbidden', `This page needs the permission "${permission}"`);
}

/** True when the signed-in user holds the permission (whether to offer an action). */
export const mayDo = (principal: Principal, permission: Permission): boolean => hasPermission(principal.permissions, permission);

/** An error's messages by form field (the API's `details`), for showing each next to its field; the rest under `''`. */
export function errorsByField(e: AppError): Map<string, string> {
  const out = new Map<string, string>();
  for (const d of e.details ?? []) {
    const key = typeof d.field === 'string' ? d.field : '';
    out.set(key, out.has(key) ? `${out.get(key)}; ${d.message}` : d.message);
  }
  if (!out.size) out.set('', e.message);
  return out;
}
