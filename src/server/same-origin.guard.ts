import { type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { RequestCheck } from '../common/request-check.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { routeAccess } from '../common/route-access.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The body types a page of another site can send without a CORS preflight (and so without asking us). */
const SIMPLE_FORM_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain']);

function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/**
 * Cross-site request forgery protection for routes whose credential a browser sends by itself
 * (HTTP Basic, cached after the login prompt: the queue dashboard). A state-changing request
 * (anything but GET/HEAD/OPTIONS) is refused with 403 when it comes from another origin (Origin,
 * or Sec-Fetch-Site when Origin is absent) or carries a body type an HTML form or a no-preflight
 * fetch can send (form-encoded, multipart, text/plain). Bearer-only routes need none of this: a
 * browser never adds a bearer token on its own.
 */
@Injectable()
export class SameOriginGuard implements RequestCheck {
  private readonly ownOrigin: string | null;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.ownOrigin = originOf(config.baseUrl);
  }

  check(context: ExecutionContext): boolean {
    if (routeAccess(context).credential !== 'token-or-basic') return true;
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (SAFE_METHODS.has(req.method)) return true;
    const origin = req.headers.origin;
    if (origin !== undefined) {
      const hostOrigin = req.headers.host ? `${req.protocol}://${req.headers.host}` : null;
      if (origin !== this.ownOrigin && origin !== hostOrigin) {
        throw new AppError('forbidden', `Cross-origin requests may not change anything here (Origin ${origin.slice(0, 200)})`);
      }
    } else {
      const site = req.headers['sec-fetch-site'];
      if (site === 'cross-site' || site === 'same-site') throw new AppError('forbidden', 'Cross-site requests may not change anything here');
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (SIMPLE_FORM_TYPES.has(type)) {
      throw new AppError('forbidden', `State-changing requests here must send JSON, not "${type}" (a type another site's page can send)`);
    }
    return true;
  }
}
