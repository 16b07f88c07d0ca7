import { All, Controller, Module, NotFoundException, Req, SetMetadata } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { AppRequest } from '../common/request.js';
import { FALLBACK_ROUTE_KEY, Public } from '../common/route-access.js';

/**
 * The last route: every request no other route matched. Being a route, it passes through the
 * global guard chain like any other, so an unknown path or method is counted by the rate limiter
 * and answered with the X-RateLimit-* headers (which every response carries), anonymous requests
 * per address and token requests on their plan. It answers what the router would have: 404, or
 * 405 with Allow for a known path (the exception filter tells them apart from the route table).
 * Not listed in GET /api/endpoints or the OpenAPI document.
 */
@ApiExcludeController()
@SetMetadata(FALLBACK_ROUTE_KEY, true)
@Controller()
export class FallbackController {
  @All(['/', '*path'])
  @Public()
  notFound(@Req() req: AppRequest): never {
    // The metrics label of an unmatched request stays "unmatched", not this route's pattern.
    (req as { route?: unknown }).route = undefined;
    throw new NotFoundException(`Cannot ${req.method} ${req.path}`);
  }
}

/** Import last in AppModule: Nest registers routes module by module, and this one must come after all. */
@Module({ controllers: [FallbackController] })
export class FallbackModule {}
