import { type ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import type { RequestCheck } from '../common/request-check.js';
import type { AppRequest } from '../common/request.js';
import { AppError } from '../common/errors.js';
import { isFallbackRoute, routeMetadata } from '../common/route-access.js';

export const CONSUMES_KEY = 'sf:consumes';
/** Media types a route accepts for its body (default: application/json). */
export const Consumes = (...types: string[]) => SetMetadata(CONSUMES_KEY, types);

/**
 * Refuses a request body in a media type the route does not take (415), instead of silently
 * ignoring it. Requests without a body are not affected.
 */
@Injectable()
export class ContentTypeGuard implements RequestCheck {
  check(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (!['POST', 'PUT', 'PATCH'].includes(req.method)) return true;
    // An unknown route answers 404/405 whatever the body.
    if (isFallbackRoute(context)) return true;
    const length = req.headers['content-length'];
    const hasBody = (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
    if (!hasBody) return true;
    const accepted = (routeMetadata(CONSUMES_KEY, context) as string[] | undefined) ?? ['application/json'];
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    const ok = accepted.some((a) => type === a || (a === 'application/json' && /^application\/[a-z0-9.+-]*\+json$/.test(type)));
    if (!ok) {
      throw new AppError('unsupported_media_type', `This route takes ${accepted.join(' or ')} bodies, not "${type || 'none'}"`);
    }
    return true;
  }
}
