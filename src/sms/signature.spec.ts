import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { parseRetryAfter } from './http.provider.js';
import { idempotencyKey, parseIdempotencyKey } from './sms-provider.js';
import { signatureProblem, signBody, verifySignature } from './signature.js';

describe('SMS gateway signatures (HMAC-SHA256 of "<timestamp>.<raw body>", the timestamp within 5 minutes)', () => {
  const body = Buffer.from('{"reference":"textmessage-1-1","status":"delivered"}');
  const now = Date.UTC(2026, 10, 27, 12, 0, 0);
  const t = now / 1000;
  const hex = (secret: string, ts: number, raw: Buffer | string = body) => createHmac('sha256', secret).update(`${ts}.${raw.toString()}`).digest('hex');
  const good = `t=${t},sha256=${hex('s3cret', t)}`;

  it('signs and accepts the timestamped signature, in any order, any hex case, with spaces, and one of several HMACs', () => {
    expect(signBody('s3cret', body, now)).toBe(good);
    expect(verifySignature('s3cret', body, good, now)).toBe(true);
    expect(verifySignature('s3cret', body, `sha256=${hex('s3cret', t).toUpperCase()}, t=${t}`, now)).toBe(true);
    expect(verifySignature('s3cret', body, `t=${t},sha256=${hex('old', t)},sha256=${hex('s3cret', t)}`, now)).toBe(true);
    // Within 5 minutes either way (clocks differ a little, requests take a moment).
    expect(verifySignature('s3cret', body, `t=${t - 300},sha256=${hex('s3cret', t - 300)}`, now)).toBe(true);
    expect(verifySignature('s3cret', body, `t=${t + 300},sha256=${hex('s3cret', t + 300)}`, now)).toBe(true);
  });

  it('refuses a replay: a signature older (or newer) than 5 minutes, and a timestamp changed after signing', () => {
    const old = `t=${t - 301},sha256=${hex('s3cret', t - 301)}`;
    expect(verifySignature('s3cret', body, old, now)).toBe(false);
    expect(signatureProblem('s3cret', body, old, now)).toMatch(/more than 5 minutes/);
    expect(verifySignature('s3cret', body, `t=${t + 301},sha256=${hex('s3cret', t + 301)}`, now)).toBe(false);
    // The old signature with a fresh timestamp: the HMAC covers the timestamp.
    expect(verifySignature('s3cret', body, `t=${t},sha256=${hex('s3cret', t - 3600)}`, now)).toBe(false);
    expect(signatureProblem('s3cret', body, `t=${t},sha256=${hex('s3cret', t - 3600)}`, now)).toMatch(/does not match/);
  });

  it('refuses anything else, saying why', () => {
    const bodyOnly = 'sha256=' + createHmac('sha256', 's3cret').update(body).digest('hex');
    expect(verifySignature('s3cret', body, bodyOnly, now)).toBe(false);
    expect(signatureProblem('s3cret', body, bodyOnly, now)).toMatch(/needs its timestamp/);
    expect(verifySignature('other', body, good, now)).toBe(false);
    expect(verifySignature('s3cret', Buffer.from(body.toString() + ' '), good, now)).toBe(false);
    expect(signatureProblem('s3cret', body, undefined, now)).toMatch(/not signed/);
    expect(verifySignature('s3cret', body, '', now)).toBe(false);
    expect(verifySignature('s3cret', body, good.slice(0, -2), now)).toBe(false);
    expect(signatureProblem('s3cret', body, `t=${t},sha256=${'z'.repeat(64)}`, now)).toMatch(/malformed/);
    expect(verifySignature('s3cret', body, `t=${t},t=${t},sha256=${hex('s3cret', t)}`, now)).toBe(false);
    expect(verifySignature('s3cret', body, `t=-1,sha256=${hex('s3cret', -1)}`, now)).toBe(false);
    expect(verifySignature('s3cret', body, `t=${t}`, now)).toBe(false);
    expect(verifySignature(null, body, good, now)).toBe(false);
    expect(verifySignature('s3cret', undefined, good, now)).toBe(false);
    expect(verifySignature('s3cret', body, ['a'], now)).toBe(false);
  });
});

describe('idempotency keys and Retry-After', () => {
  it('round-trips the message id and send number', () => {
    expect(idempotencyKey(12, 3)).toBe('textmessage-12-3');
    expect(parseIdempotencyKey('textmessage-12-3')).toEqual({ messageId: 12, sendCount: 3 });
    expect(parseIdempotencyKey('textmessage-0-1')).toBeNull();
    expect(parseIdempotencyKey('textmessage-99999999999-1')).toBeNull();
    expect(parseIdempotencyKey('sms-1-1')).toBeNull();
    expect(parseIdempotencyKey(5)).toBeNull();
  });
  it('reads Retry-After in seconds or as a date, capped', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter('999999')).toBe(600000);
    expect(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(10000);
  });
});
