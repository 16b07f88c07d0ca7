import { applyDecorators, type CanActivate, type ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Public } from '../auth/permissions.js';
import { SignedInSession } from '../common/route-access.js';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ConsoleService, type ConsoleSession } from './console.service.js';
import { LOGIN_CSRF_COOKIE, parseCookies, sameToken, SESSION_COOKIE } from './session.rules.js';

export interface ConsoleRequest extends AppRequest {
  /** The signed-in console user (routes marked @SignedIn()). */
  console?: ConsoleSession;
}

/** The session ConsoleGuard put on a @SignedIn() route's request (401 if there is none). */
export function signedIn(req: ConsoleRequest): ConsoleSession {
  if (!req.console) throw new AppError('unauthorized', 'Sign in to continue');
  return req.console;
}

const CONSOLE_KEY = 'sf:console';
type ConsoleAccess = 'session' | 'upload' | 'form' | 'open';

/**
 * A console page for a signed-in user. The global chain sees it as public-with-a-label ("session" in
 * GET /api/endpoints): API tokens open no console page; ConsoleGuard checks the session cookie.
 */
export const SignedIn = () => applyDecorators(SignedInSession(), SetMetadata(CONSOLE_KEY, 'session'));
/**
 * A signed-in multipart form (a file upload). Its body is not parsed when the guards run (multer parses
 * it in the route's interceptor, which must not stream a file anywhere for a forged form), so the
 * guard checks the session and the origin, and the form's CSRF token is checked from the parsed
 * fields: by multer's fileFilter before a byte of the file is stored (the token field comes first in
 * the form), and by ConsoleUploadCsrf before the handler runs (consoleUploadOptions, console-upload.ts).
 */
export const SignedInUpload = () => applyDecorators(SignedInSession(), SetMetadata(CONSOLE_KEY, 'upload'));
/** A form anyone may post (sign-in, invitation): only its CSRF token (double-submit cookie) is checked. */
export const AnonymousForm = () => applyDecorators(Public(), SetMetadata(CONSOLE_KEY, 'form'));
/** A page or asset anyone may read. */
export const OpenPage = () => applyDecorators(Public(), SetMetadata(CONSOLE_KEY, 'open'));

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The `_csrf` field of a parsed form body ('' without one). */
function formToken(req: ConsoleRequest): string {
  const body = req.body as Record<string, unknown> | undefined;
  return typeof body?._csrf === 'string' ? body._csrf : '';
}

const expiredForm = () => new AppError('forbidden', 'The form has expired or did not come from this site; reload the page and try again');

/** Throws 403 unless the parsed form carries the signed-in session's CSRF token (for SignedInUpload routes, once multer has read the fields). */
export function checkUploadToken(req: ConsoleRequest): void {
  if (!req.console || !sameToken(formToken(req), req.console.csrfToken)) throw expiredForm();
}

/**
 * The console's credential check, after the global guards: a Bearer token is never a console
 * credential (401); a signed-in route needs an active session cookie (401, which the console's
 * filter turns into a redirect to the sign-in page); every state-changing request needs the CSRF
 * token of its form and, when the browser names one, our own origin (403).
 */
@Injectable()
export class ConsoleGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly account: ConsoleService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const access = this.reflector.getAllAndOverride<ConsoleAccess>(CONSOLE_KEY, [context.getHandler(), context.getClass()]);
    if (!access) throw new AppError('forbidden', 'This console route declares no access rule');
    const req = context.switchToHttp().getRequest<ConsoleRequest>();
    if (req.headers.authorization !== undefined) {
      throw new AppError('unauthorized', 'The account pages take no API token; sign in at /account/login');
    }
    const cookies = parseCookies(req.headers.cookie);
    let session: ConsoleSession | null = null;
    if (access === 'session' || access === 'upload') {
      session = await this.account.resolve(cookies.get(SESSION_COOKIE));
      if (!session) throw new AppError('unauthorized', 'Sign in to continue');
      req.console = session;
    }
    if (SAFE.has(req.method) || access === 'open') return true;
    this.checkOrigin(req);
    // A multipart body is parsed after the guards: its token is checked then (see SignedInUpload).
    if (access === 'upload' && req.is('multipart/form-data')) return true;
    const expected = session ? session.csrfToken : (cookies.get(LOGIN_CSRF_COOKIE) ?? '');
    if (!sameToken(formToken(req), expected)) throw expiredForm();
    return true;
  }

  private checkOrigin(req: ConsoleRequest): void {
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      throw new AppError('forbidden', 'Cross-site form posts are refused');
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== new URL(this.config.baseUrl).origin) {
      throw new AppError('forbidden', 'Cross-site form posts are refused');
    }
  }
}
