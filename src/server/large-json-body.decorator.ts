import { SetMetadata } from '@nestjs/common';

export const LARGE_JSON_BODY_KEY = 'sf:large-json-body';

/**
 * The route takes a JSON body up to BATCH_BODY_LIMIT_BYTES instead of BODY_LIMIT_BYTES (batch
 * writes of up to 500 records or 10,000 ids, an import's rows). The body parsers run before Nest's
 * router, so they ask the route table, built at boot, by method and path (RouteTable.takesLargeJsonBody).
 */
export const LargeJsonBody = () => SetMetadata(LARGE_JSON_BODY_KEY, true);
