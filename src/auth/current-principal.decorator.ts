import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { AppRequest, Principal } from '../common/request.js';

/** The authenticated caller of the current request (set by AuthenticationGuard). */
export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  return ctx.switchToHttp().getRequest<AppRequest>().principal!;
});
