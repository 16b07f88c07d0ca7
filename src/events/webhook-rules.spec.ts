import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { sign, signatureHeaders } from './signature.js';
import { MAX_RETRY_DELAY_MS, nextAttemptAt, parseRetryAfter, RETRY_WINDOW_MS, retryDelayMs, verdictFor } from './webhook-retry.js';
import { checkUrlForm, isPrivateAddress, resolveTarget, WebhookUrlError } from './webhook-url.js';

describe('webhook retry schedule', () => {
  it('retries network errors, timeouts, 408, 429 and 5xx; 410 is gone; other answers outside 2xx are dead at once', () => {
    expect(verdictFor(null)).toBe('retry');
    for (const s of [408, 429, 500, 502, 503, 599]) expect(verdictFor(s)).toBe('retry');
    for (const s of [200, 201, 204, 299]) expect(verdictFor(s)).toBe('succeeded');
    expect(verdictFor(410)).toBe('gone');
    for (const s of [301, 302, 304, 307, 400, 401, 403, 404, 409, 422]) expect(verdictFor(s)).toBe('dead');
  });

  it('waits 4 times longer after each failure, at most 12 h, and honours Retry-After', () => {
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(n, 5_000))).toEqual([5_000, 20_000, 80_000, 320_000, 1_280_000]);
    expect(retryDelayMs(30, 5_000)).toBe(MAX_RETRY_DELAY_MS);
    expect(retryDelayMs(1, 5_000, 120_000)).toBe(120_000);
    expect(retryDelayMs(1, 5_000, 10 * 24 * 3600_000)).toBe(MAX_RETRY_DELAY_MS);
  });

  it('keeps retrying for 72 hours after the first attempt, then the delivery is dead', () => {
    const start = new Date('2026-01-01T00:00:00Z');
    let now = start;
    let n = 0;
    const schedule: number[] = [];
    for (;;) {
      n++;
      const next = nextAttemptAt(n, start, now, 5_000);
      if (!next) break;
      schedule.push(next.getTime() - now.getTime());
      now = next;
    }
    expect(now.getTime() - start.getTime()).toBeLessThanOrEqual(RETRY_WINDOW_MS);
    expect(now.getTime() - start.getTime()).toBeGreaterThan(RETRY_WINDOW_MS - MAX_RETRY_DELAY_MS);
    expect(schedule.slice(0, 3)).toEqual([5_000, 20_000, 80_000]);
    expect(n).toBeGreaterThan(10);
    expect(n).toBeLessThan(20);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe('webhook URL rules', () => {
  const strict = { allowHttp: false, allowPrivate: false };

  it('refuses loopback, link-local, private, shared, multicast and reserved addresses, v4 and v6', () => {
    for (const ip of [
      '127.0.0.1',
      '127.8.9.10',
      '10.0.0.1',
      '172.16.5.4',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fd12:3456::1',
      'fc00::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
      '64:ff9b::10.0.0.1',
      '64:ff9b::7f00:1',
      '64:ff9b:1::8.8.8.8', // NAT64 local-use prefix
      '100::1', // discard
      'fec0::1', // site-local
      '2001:db8::1',
      '::ffff:0:0', // IPv4-mapped 0.0.0.0
      'fe80::1%eth0',
      'not an address',
    ]) {
      expect([ip, isPrivateAddress(ip)]).toEqual([ip, true]);
    }
    for (const ip of [
      '93.184.216.34',
      '8.8.8.8',
      '172.32.0.1',
      '192.169.0.1',
      '2606:2800:220:1:248:1893:25c8:1946',
      '::ffff:8.8.8.8',
      '::ffff:808:808',
      '64:ff9b::8.8.8.8',
      '2002:808:808::1', // 6to4 of 8.8.8.8
      '2a00:1450:4001:81b::200e',
    ]) {
      expect([ip, isPrivateAddress(ip)]).toEqual([ip, false]);
    }
  });

  it('refuses IPv6 forms that embed a non-public IPv4 address, and Teredo', () => {
    for (const ip of [
      // IPv4-compatible (deprecated): never public, whatever it embeds
      '::127.0.0.1',
      '::7f00:1',
      '::10.0.0.1',
      '::8.8.8.8',
      // IPv4-translated (RFC 2765): never public
      '::ffff:0:127.0.0.1',
      '::ffff:0:7f00:1',
      '::ffff:0:8.8.8.8',
      // 6to4 of loopback, private, link-local, CGNAT, "this network" and reserved IPv4 addresses
      '2002:7f00:1::',
      '2002:7f00:1::1',
      '2002:a00:1::',
      '2002:c0a8:101::1',
      '2002:a9fe:a9fe::',
      '2002:6440:1::',
      '2002::',
      '2002:f000::1',
      // Teredo (2001:0000::/32), whatever it tunnels to
      '2001::1',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      // NAT64 of a private address, in hex
      '64:ff9b::a9fe:a9fe',
    ]) {
      expect([ip, isPrivateAddress(ip)]).toEqual([ip, true]);
    }
  });

  it('refuses those forms written as URL hosts, at creation and at delivery (after resolution)', async () => {
    for (const url of [
      'https://[::127.0.0.1]/hook',
      'https://[::ffff:0:127.0.0.1]/hook',
      'https://[2002:7f00:1::]/hook',
      'https://[2001::1]/hook',
      'https://[::ffff:7f00:1]/hook',
      'https://[64:ff9b::127.0.0.1]/hook',
    ]) {
      await expect(resolveTarget(url, strict)).rejects.toThrow(/loopback, link-local or private/);
    }
    await expect(resolveTarget('https://[2002:808:808::1]/hook', strict)).resolves.toMatchObject({ address: '2002:808:808::1', family: 6 });
  });

  it('requires https unless http is allowed, and refuses credentials in the URL', () => {
    expect(() => checkUrlForm('http://example.com/hook', strict)).toThrow(/https/);
    expect(checkUrlForm('http://example.com/hook', { ...strict, allowHttp: true }).hostname).toBe('example.com');
    expect(() => checkUrlForm('ftp://example.com/', { ...strict, allowHttp: true })).toThrow(WebhookUrlError);
    expect(() => checkUrlForm('https://u:p@example.com/', strict)).toThrow(/credentials/);
    expect(() => checkUrlForm('/relative', strict)).toThrow(/absolute/);
  });

  it('checks every address a name resolves to (localhost), and literal addresses, unless private targets are allowed', async () => {
    await expect(resolveTarget('https://localhost/hook', strict)).rejects.toThrow(/loopback, link-local or private/);
    await expect(resolveTarget('https://[::1]:8443/hook', strict)).rejects.toThrow(/::1/);
    await expect(resolveTarget('https://169.254.169.254/latest', strict)).rejects.toThrow(WebhookUrlError);
    await expect(resolveTarget('https://host.invalid/hook', strict)).rejects.toThrow(/does not resolve/);
    const ok = await resolveTarget('http://127.0.0.1:9/hook', { allowHttp: true, allowPrivate: true });
    expect(ok).toMatchObject({ address: '127.0.0.1', family: 4 });
    const pub = await resolveTarget('https://93.184.216.34/hook', strict);
    expect(pub.address).toBe('93.184.216.34');
  });
});

describe('webhook signatures (Standard Webhooks)', () => {
  it('signs "{id}.{timestamp}.{body}" with the secret bytes; both secrets after a rotation', () => {
    const secret = 'whsec_' + Buffer.alloc(32, 1).toString('base64');
    const sig = sign(secret, 'msg_1', 1700000000, '{"a":1}');
    // The key is the secret's base64-decoded bytes, not its text.
    expect(sig).toBe(`v1,${createHmac('sha256', Buffer.alloc(32, 1)).update('msg_1.1700000000.{"a":1}').digest('base64')}`);
    expect(sign(secret, 'msg_1', 1700000001, '{"a":1}')).not.toBe(sig);
    const other = 'whsec_' + Buffer.alloc(32, 2).toString('base64');
    const h = signatureHeaders([secret, other], 'msg_1', '{"a":1}', 1700000000_000);
    expect(h).toEqual({
      'webhook-id': 'msg_1',
      'webhook-timestamp': '1700000000',
      'webhook-signature': `${sig} ${sign(other, 'msg_1', 1700000000, '{"a":1}')}`,
    });
  });
});
