import { createHmac, randomBytes } from 'node:crypto';

/** Secrets are `whsec_` + base64 of 32 random bytes; the bytes (not the text) are the HMAC key, as in Standard Webhooks. */
export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** `v1,<base64 HMAC-SHA256(secret bytes, "{id}.{timestamp}.{body}")>` (Standard Webhooks). */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', secretKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/**
 * The three Standard Webhooks headers for one delivery. `secrets` are the current secret first and,
 * for 24 h after a rotation, the previous one: both signatures, space-separated.
 */
export function signatureHeaders(secrets: readonly string[], id: string, body: string, now = Date.now()): Record<string, string> {
  const ts = Math.floor(now / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': secrets.map((s) => sign(s, id, ts, body)).join(' '),
  };
}
