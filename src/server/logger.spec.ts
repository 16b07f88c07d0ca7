import { describe, expect, it } from '@jest/globals';
import { redact } from './logger.js';

describe('redact', () => {
  it('removes credentials by key and by shape', () => {
    const out = redact({
      headers: { authorization: 'Bearer sf_abcdefghijklmnopqrstuvwxyz', 'x-request-id': 'r1' },
      msg: 'token sf_abcdefghijklmnopqrstuvwxyz0123 used; Basic dXNlcjpwYXNz sent',
      client_secret: 'hunter2',
    }) as Record<string, unknown>;
    expect(JSON.stringify(out)).not.toMatch(/abcdefghijklmnop|hunter2|dXNlcjpwYXNz/);
    expect((out.headers as Record<string, string>)['x-request-id']).toBe('r1');
  });
});
