import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AppError } from '../common/errors.js';
import type { AppRequest } from '../common/request.js';
import { AUTHENTICATED, hasPermission, type Permission, PERMISSION_KEY, PUBLIC_KEY } from './permissions.js';
import { TokensService } from './tokens.service.js';

/**
 * First global guard: resolves the bearer token into req.principal. It never refuses a request
 * itself, so the rate limiter (next guard) can count unauthenticated requests per address before
 * the permission guard answers 401.
 */
@Injectable()
export class AuthenticationGuard implements CanActivate {
  constructor(private readonly tokens: TokensService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<AppRequest>();
    req.principal = null;
    if (req.query && ('access_token' in req.query || 'token' in req.query || 'api_key' in req.query)) {
      req.authError = 'Tokens are not accepted in the query string; send Authorization: Bearer <token>';
      return true;
    }
    const header = req.headers.authorization;
    if (!header) return true;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      req.authError = 'The Authorization header must be "Bearer <token>"';
      return true;
    }
    req.principal = await this.tokens.authenticate(match[1]);
    if (!req.principal) req.authError = 'The token is unknown, expired or revoked';
    return true;
  }
}

/**
 * Last global guard, closed by default: a route is reachable only when it is @Public() or the
 * principal holds its @RequirePermission(). 401 without a valid token, 403 without the permission.
 */
@Injectable()
export class PermissionGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const req = context.switchToHttp().getRequest<AppRequest>();
    if (!req.principal) {
      throw new AppError('unauthorized', req.authError ?? 'An API token is required: send Authorization: Bearer <token>', undefined, {
        'WWW-Authenticate': 'Bearer',
      });
    }
    const needed = this.reflector.getAllAndOverride<Permission | typeof AUTHENTICATED>(PERMISSION_KEY, targets);
    if (!needed) throw new AppError('forbidden', 'This route is not open to tokens');
    if (needed === AUTHENTICATED) return true;
    if (!hasPermission(req.principal.permissions, needed)) {
      throw new AppError('forbidden', `The token lacks the permission "${needed}"`);
    }
    return true;
  }
}
