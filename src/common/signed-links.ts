import { Injectable } from '@nestjs/common';

/** What a signed link carries besides its path: `?expires=<unix seconds>&signature=<hex>`. */
export interface SignedLinkParams {
  /** The route's path parameters (e.g. `id`). */
  params: Record<string, string>;
  expires: string | undefined;
  signature: string | undefined;
}

/** Answers whether a link's signature is valid and unexpired; never throws for a bad link. */
export type SignedLinkVerifier = (link: SignedLinkParams) => Promise<boolean>;

/**
 * The verifiers of signed links (credential `signed-link`, common/route-access.ts), one per route
 * path pattern, registered by the feature that hands the links out (exports). The authentication
 * guard asks here, so the credential is checked in the global guard chain while the secrets stay
 * with their feature.
 */
@Injectable()
export class SignedLinks {
  private readonly verifiers = new Map<string, SignedLinkVerifier>();

  register(routePath: string, verify: SignedLinkVerifier): void {
    this.verifiers.set(routePath, verify);
  }

  async verify(routePath: string, link: SignedLinkParams): Promise<boolean> {
    const verify = this.verifiers.get(routePath);
    if (!verify || typeof link.expires !== 'string' || typeof link.signature !== 'string') return false;
    return verify(link);
  }
}
