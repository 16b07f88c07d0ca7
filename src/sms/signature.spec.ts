import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { parseRetryAfter } from './http.provider.js';
import { idempotencyKey, parseIdempotencyKey } from './sms-provider.js';
import { signBody, verifySignature } from './signature.js';

describe('delivery report signatures (HMAC-SHA256 of the raw body)', () => {
  const body = Buffer.from('{"reference":"textmessage-1-1","status":"delivered"}');
  const good = 'sha256=' + createHmac('sha256', 's3cret').update(body).digest('hex');

  it('accepts the right signature, with or without the sha256= prefix, any hex case', () => {
    expect(signBody('s3cret', body)).toBe(good);
    expect(verifySignature('s3cret', body, good)).toBe(true);
    expect(verifySignature('s3cret', body, good.slice(7))).toBe(true);
    expect(verifySignature('s3cret', body, good.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
  });

  it('refuses anything else', () => {
    expect(verifySignature('other', body, good)).toBe(false);
    expect(verifySignature('s3cret', Buffer.from(body.toString() + ' '), good)).toBe(false);
    expect(verifySignature('s3cret', body, undefined)).toBe(false);
    expect(verifySignature('s3cret', body, '')).toBe(false);
    expect(verifySignature('s3cret', body, good.slice(0, -2))).toBe(false);
    expect(verifySignature('s3cret', body, 'sha256=' + 'z'.repeat(64))).toBe(false);
    expect(verifySignature(null, body, good)).toBe(false);
    expect(verifySignature('s3cret', undefined, good)).toBe(false);
    expect(verifySignature('s3cret', body, ['a'])).toBe(false);
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
