import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpSmsProvider } from './http.provider.js';
import { SmsProviderError } from './sms-provider.js';

/** A local gateway whose next answer the test sets: the provider's real HTTP exchange. */
describe('HttpSmsProvider: what a gateway answers is stored as text PostgreSQL can hold', () => {
  let server: Server;
  let next: { status: number; body: Buffer } = { status: 200, body: Buffer.from('{}') };
  let provider: HttpSmsProvider;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(next.status, { 'content-type': 'application/json' });
        res.end(next.body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sms`;
    provider = new HttpSmsProvider({ url, token: null, timeoutMs: 5000, callbackUrl: 'http://127.0.0.1/cb' });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const sms = { messageId: 1, to: '+15555550100', body: 'hi', idempotencyKey: 'textmessage-1-1' };

  it('a message id with NUL or an unpaired surrogate, and one cut inside a surrogate pair, is kept with U+FFFD', async () => {
    next = { status: 200, body: Buffer.from(JSON.stringify({ id: 'gw\u0000-\ud800-1' })) };
    expect(await provider.send(sms)).toEqual({ providerMessageId: 'gw\ufffd-\ufffd-1' });
    next = { status: 200, body: Buffer.from(JSON.stringify({ id: `${'x'.repeat(199)}\ud83d\ude00` })) };
    expect(await provider.send(sms)).toEqual({ providerMessageId: `${'x'.repeat(199)}\ufffd` });
  });

  it('an error answer with NUL and bytes that are not UTF-8 becomes a storable error message', async () => {
    next = { status: 400, body: Buffer.from([0x62, 0x61, 0x64, 0x00, 0xff]) };
    const e = await provider.send(sms).then(
      () => null,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(SmsProviderError);
    expect((e as SmsProviderError).message).toBe('gateway answered 400: bad\ufffd\ufffd');
    expect((e as SmsProviderError).kind).toBe('rejected');
  });
});
