import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying the signature of a delivery report: `sha256=<hex>` (or the bare hex). */
export const SIGNATURE_HEADER = 'x-signature';

/** HMAC-SHA256 of the raw body with the shared secret, as `sha256=<hex>`. */
export function signBody(secret: string, rawBody: Buffer | string): string {
  return 'sha256=' + createHmac('sha256', secret).update(rawBody).digest('hex');
}

/**
 * Whether `header` is the HMAC-SHA256 of exactly these bytes under `secret`. Compared in constant
 * time; a missing secret, body or header is never valid.
 */
export function verifySignature(secret: string | null, rawBody: Buffer | undefined, header: unknown): boolean {
  if (!secret || !rawBody || typeof header !== 'string') return false;
  const hex = header.trim().replace(/^sha256=/i, '');
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
