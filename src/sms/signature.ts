import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Header carrying the signature of a delivery report or an inbound message from the SMS gateway:
 * `t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>`. The
 * timestamp is signed with the body, and one more than SIGNATURE_TOLERANCE_SECONDS away from now is
 * refused, so a captured request (a STOP or START without messageId) cannot be replayed later.
 */
export const SIGNATURE_HEADER = 'x-signature';

/** How far a signature's timestamp may be from the server's time, either way (as Standard Webhooks receivers allow). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** The header's format, for error messages and the API description. */
export const SIGNATURE_FORMAT = 'X-Signature: t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>';

function hmac(secret: string, timestamp: string, rawBody: Buffer | string): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
}

/** The X-Signature value for these bytes at `nowMs`. */
export function signBody(secret: string, rawBody: Buffer | string, nowMs = Date.now()): string {
  const t = String(Math.floor(nowMs / 1000));
  return `t=${t},sha256=${hmac(secret, t, rawBody).toString('hex')}`;
}

/**
 * Why `header` does not sign exactly these bytes under `secret` within the tolerance of `nowMs`, or
 * null when it does. The HMAC is compared in constant time; several `sha256=` entries are allowed
 * (a gateway rotating its secret), and a missing secret, body or header is never valid.
 */
export function signatureProblem(secret: string | null, rawBody: Buffer | undefined, header: unknown, nowMs = Date.now()): string | null {
  if (!secret || !rawBody || typeof header !== 'string' || header.trim() === '') return `the request is not signed (${SIGNATURE_FORMAT})`;
  let timestamp: string | null = null;
  const given: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const name = part.slice(0, eq).trim().toLowerCase();
    const value = part.slice(eq + 1).trim();
    if (eq < 0) return `the signature is malformed (${SIGNATURE_FORMAT})`;
    if (name === 't' && timestamp === null && /^\d{1,12}$/.test(value)) timestamp = value;
    else if (name === 'sha256' && /^[0-9a-f]{64}$/i.test(value)) given.push(Buffer.from(value, 'hex'));
    else return `the signature is malformed (${SIGNATURE_FORMAT})`;
  }
  if (timestamp === null || !given.length) return `the signature needs its timestamp and its HMAC (${SIGNATURE_FORMAT})`;
  if (Math.abs(Number(timestamp) - nowMs / 1000) > SIGNATURE_TOLERANCE_SECONDS) {
    return `the signature's timestamp is more than ${SIGNATURE_TOLERANCE_SECONDS / 60} minutes from the server's time (a replayed or delayed request: sign it again when sending)`;
  }
  const expected = hmac(secret, timestamp, rawBody);
  let match = false;
  for (const g of given) if (g.length === expected.length && timingSafeEqual(g, expected)) match = true;
  return match ? null : `the signature does not match the body (${SIGNATURE_FORMAT})`;
}

/** Whether `header` signs exactly these bytes under `secret`, with a timestamp within the tolerance of `nowMs`. */
export function verifySignature(secret: string | null, rawBody: Buffer | undefined, header: unknown, nowMs = Date.now()): boolean {
  return signatureProblem(secret, rawBody, header, nowMs) === null;
}
