import { describe, expect, it } from '@jest/globals';
import { storableText, storableTextOf } from './storable-text.js';

describe('storable text', () => {
  it('replaces NUL and unpaired surrogates with U+FFFD and keeps everything else', () => {
    expect(storableText('a\u0000b')).toBe('a\ufffdb');
    expect(storableText('x\ud800y\udc00z')).toBe('x\ufffdy\ufffdz');
    expect(storableText('pair \ud83d\ude00 ok')).toBe('pair \ud83d\ude00 ok');
    expect(storableText('tab\tcr\r\u0001\u007f é')).toBe('tab\tcr\r\u0001\u007f é');
    expect(storableText('')).toBe('');
  });

  it('decodes bytes that are not valid UTF-8, and NUL bytes, to replacement characters', () => {
    expect(storableTextOf(Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0xfe, 0xc3]))).toBe('ok\ufffd\ufffd\ufffd\ufffd');
    expect(storableTextOf(Buffer.from('héllo', 'utf8'))).toBe('héllo');
  });
});
