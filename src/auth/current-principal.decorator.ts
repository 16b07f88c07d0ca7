import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { AppError } from '../common/errors.js';
import type { AppRequest, Principal } from '../common/request.js';

/** The authenticated caller of the current request (set by AuthenticationGuard). */
export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const principal = ctx.switchToHttp().getRequest<AppRequest>().principal;
  // AuthenticationGuard has already answered 401 on every non-public route without one.
  if (!principal) throw new AppError('unauthorized', 'Authentication required');
  return principal;
});
