import { type ExecutionContext, SetMetadata } from '@nestjs/common';
import { routeMetadata } from '../common/route-access.js';

/**
 * Separate rate-limit buckets for routes that need a stricter limit than the plan limits.
 * `oauth`: the OAuth2 token and revocation endpoints, counted per client address (whatever token
 * the request carries) against OAUTH_RATE_LIMIT_PER_MINUTE per minute, so secrets cannot be guessed
 * quickly. Their requests do not count against the account's or the address's general limit.
 */
export type RateLimitBucket = 'oauth';

export const RATE_LIMIT_BUCKET_KEY = 'sf:rate-limit-bucket';

/** Counts the route's requests in their own bucket (see RateLimitBucket). */
export const RateLimitBucket = (bucket: RateLimitBucket) => SetMetadata(RATE_LIMIT_BUCKET_KEY, bucket);

/** The bucket of the route a request reached, or null for the plan limits. */
export function rateLimitBucketOf(ctx: ExecutionContext): RateLimitBucket | null {
  return (routeMetadata(RATE_LIMIT_BUCKET_KEY, ctx) as RateLimitBucket | undefined) ?? null;
}
