import { describe, expect, it } from '@jest/globals';
import { normalizeDomain, normalizeWebsite } from './company.rules.js';

describe('company rules', () => {
  it.each([
    ['example.com', 'example.com'],
    ['  Example.COM ', 'example.com'],
    ['https://www.Example.com:8443/about?x=1#top', 'example.com'],
    ['http://user:pw@shop.example.co.uk/', 'shop.example.co.uk'],
    ['//www.example.org', 'example.org'],
    ['example.com.', 'example.com'],
    ['WWW.ACME.IO', 'acme.io'],
    ['www.com', 'www.com'],
    ['bücher.de', 'xn--bcher-kva.de'],
    ['sub.www.example.com', 'sub.www.example.com'],
  ])('normalises the domain %p to %p', (input, expected) => {
    expect(normalizeDomain(input)).toBe(expected);
  });

  it.each(['', '   ', 'localhost', '127.0.0.1', 'http://', 'exa mple.com', 'under_score.com', '-bad.com', 'example.123', 'a'.repeat(300) + '.com', 'www.'])(
    'refuses the domain %p',
    (input) => {
      expect(normalizeDomain(input)).toBeNull();
    },
  );

  it('normalises websites to http(s) URLs', () => {
    expect(normalizeWebsite('example.com/about')).toBe('https://example.com/about');
    expect(normalizeWebsite(' http://example.com ')).toBe('http://example.com');
    expect(normalizeWebsite('ftp://example.com')).toBeNull();
    expect(normalizeWebsite('javascript:alert(1)')).toBeNull();
    expect(normalizeWebsite('not a url')).toBeNull();
  });
});
