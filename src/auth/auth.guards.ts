import { type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { NowOrLater, RequestCheck } from '../common/request-check.js';
import { timingSafeEqual } from 'node:crypto';
import { parseBasicAuthorization, parseBearerAuthorization } from './basic-auth.js';
import { AppError } from '../common/errors.js';
import type { AppRequest, Principal } from '../common/request.js';
import { AUTHENTICATED, type Permission, routeAccess } from '../common/route-access.js';
import { SignedLinks } from '../common/signed-links.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { signatureProblem, SIGNATURE_HEADER } from '../sms/signature.js';
import { hasPermission } from './permissions.js';
import { TokensService } from './tokens.service.js';

const BEARER_CHALLENGE = { 'WWW-Authenticate': 'Bearer' };
const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="SalesFlow", charset="UTF-8"' };

function constantTimeEquals(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * First global guard: checks the credential the route declares (common/route-access.ts) and
 * records the outcome on the request: `req.principal` for a token, `req.credential` for a
 * machine credential (the metrics token, a signed SMS delivery report), `req.authError` when one
 * was presented but refused. It never refuses a request itself, so the rate limiter (next guard)
 * counts failed attempts per address before the permission guard answers 401.
 */
@Injectable()
export class AuthenticationGuard implements RequestCheck {
  constructor(
    private readonly tokens: TokensService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly links: SignedLinks,
  ) {}

  /** Answers without a promise when nothing needs one (a cached token, no credential, a refused one). */
  check(context: ExecutionContext): NowOrLater<boolean> {
    const req = context.switchToHttp().getRequest<AppRequest & { rawBody?: Buffer }>();
    req.principal = null;
    req.credential = undefined;
    const { credential } = routeAccess(context);
    if (credential === 'sms-signature') {
      const problem = signatureProblem(this.config.smsWebhookSecret, req.rawBody, req.headers[SIGNATURE_HEADER]);
      if (problem === null) req.credential = 'sms-signature';
      else req.authError = `The SMS gateway's request is refused: ${problem}`;
      return true;
    }
    if (credential === 'signed-link') {
      const query = req.query as Record<string, unknown>;
      const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
      const route = (req as { route?: { path?: unknown } }).route;
      const link = { params: req.params as Record<string, string>, expires: text(query.expires), signature: text(query.signature) };
      const refuse = () => {
        req.authError = 'The link is not valid or has expired; ask for a new one';
        return true;
      };
      if (typeof route?.path !== 'string') return refuse();
      return this.links.verify(route.path, link).then((valid) => {
        if (!valid) return refuse();
        req.credential = 'signed-link';
        return true;
      });
    }
    // Express parses the query string again on every read of req.query: read it once.
    const query = req.query as Record<string, unknown> | undefined;
    if (query && ('access_token' in query || 'token' in query || 'api_key' in query)) {
      req.authError = 'Tokens are not accepted in the query string; send Authorization: Bearer <token>';
      return true;
    }
    const header = req.headers.authorization;
    if (!header) return true;
    let secret = parseBearerAuthorization(header);
    if (secret && credential === 'metrics-token' && this.config.metricsToken && constantTimeEquals(secret, this.config.metricsToken)) {
      req.credential = 'metrics-token';
      return true;
    }
    if (!secret && credential === 'token-or-basic') {
      const basic = parseBasicAuthorization(header);
      if (basic.kind === 'basic' && basic.password) secret = basic.password;
      else if (basic.kind === 'malformed') {
        req.authError = 'The Authorization header is not valid HTTP Basic credentials';
        return true;
      }
    }
    if (!secret && credential === 'write-key') {
      // Segment's write key: the token as the user name, the password empty.
      const basic = parseBasicAuthorization(header);
      if (basic.kind === 'basic' && basic.user && !basic.password) secret = basic.user;
      else if (basic.kind !== 'absent') {
        req.authError = 'HTTP Basic credentials here are a write key: the token as the user name and an empty password';
        return true;
      }
    }
    if (!secret) {
      req.authError =
        credential === 'token-or-basic'
          ? 'The Authorization header must be "Bearer <token>" or HTTP Basic with the token as password'
          : credential === 'write-key'
            ? 'The Authorization header must be "Bearer <token>" or HTTP Basic with the token as user name and an empty password'
            : 'The Authorization header must be "Bearer <token>"';
      return true;
    }
    const principal = this.tokens.authenticateNow(secret);
    if (principal instanceof Promise) return principal.then((p) => this.identify(req, p));
    return this.identify(req, principal);
  }

  private identify(req: AppRequest, principal: Principal | null): true {
    req.principal = principal;
    if (!principal) req.authError = 'The token is unknown, expired or revoked';
    else req.credential = 'token';
    return true;
  }
}

/**
 * Last credential guard, closed by default: a route is reachable only when it is @Public(), its
 * machine credential was verified, or the principal holds its @RequirePermission(). 401 without a
 * valid credential, 403 without the permission.
 */
@Injectable()
export class PermissionGuard implements RequestCheck {
  check(context: ExecutionContext): boolean {
    const { credential, permission, alsoRequires } = routeAccess(context);
    // A public route, or a console page whose session cookie account/console.guard.ts checks.
    if (credential === 'none' || credential === 'session') return true;
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (credential === 'sms-signature') {
      if (req.credential === 'sms-signature') return true;
      throw new AppError('unauthorized', req.authError ?? "The SMS gateway's request is not signed with SMS_WEBHOOK_SECRET");
    }
    if (credential === 'signed-link') {
      if (req.credential === 'signed-link') return true;
      throw new AppError('unauthorized', req.authError ?? 'The link is not valid or has expired');
    }
    if (credential === 'metrics-token' && req.credential === 'metrics-token') return true;
    if (!req.principal) {
      const fallback =
        credential === 'metrics-token'
          ? 'Metrics need Authorization: Bearer <METRICS_TOKEN> or an API token with the * permission'
          : credential === 'token-or-basic'
            ? 'This page needs a token: Bearer, or HTTP Basic with the token as password (any user name)'
            : credential === 'write-key'
              ? 'A token is required: Bearer, or HTTP Basic with the token as user name and an empty password (a write key)'
              : 'An API token is required: send Authorization: Bearer <token>';
      throw new AppError('unauthorized', req.authError ?? fallback, undefined, credential === 'token-or-basic' ? BASIC_CHALLENGE : BEARER_CHALLENGE);
    }
    if (!permission) throw new AppError('forbidden', 'This route is not open to tokens');
    if (permission === AUTHENTICATED) return true;
    if (!hasPermission(req.principal.permissions, permission as Permission)) {
      throw new AppError('forbidden', `The token lacks the permission "${permission}"`);
    }
    for (const also of alsoRequires) {
      if (!hasPermission(req.principal.permissions, also)) {
        throw new AppError('forbidden', `The token lacks the permission "${also}" (this route answers ${also.split(':')[0]} records too)`);
      }
    }
    return true;
  }
}
