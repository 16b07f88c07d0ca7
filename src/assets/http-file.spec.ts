import { describe, expect, it } from '@jest/globals';
import { parse as parseContentDisposition } from 'content-disposition';
import { asciiFallbackFilename, contentDisposition, ifRangeAllows, isNotModified, parseRange } from './http-file.js';

describe('Content-Disposition', () => {
  it('keeps a plain ASCII name as the filename only (a token, or quoted when it needs quotes)', () => {
    expect(contentDisposition('report-2026.pdf')).toBe('attachment; filename=report-2026.pdf');
    expect(contentDisposition('a b.txt', 'inline')).toBe('inline; filename="a b.txt"');
  });

  it('adds filename* (RFC 8187) with a readable ASCII fallback for unicode names', () => {
    expect(contentDisposition('été.pdf')).toBe(`attachment; filename=ete.pdf; filename*=UTF-8''%C3%A9t%C3%A9.pdf`);
    expect(contentDisposition('東京.txt')).toBe(`attachment; filename=download.txt; filename*=UTF-8''%E6%9D%B1%E4%BA%AC.txt`);
  });

  it('never lets quotes, backslashes or percent signs into the fallback; filename* keeps the exact name', () => {
    const header = contentDisposition('a"b\\c%d e.txt');
    expect(header).toBe(`attachment; filename="a_b_c_d e.txt"; filename*=UTF-8''a%22b%5Cc%25d%20e.txt`);
    const parsed = parseContentDisposition(header);
    expect(parsed.type).toBe('attachment');
    expect(parsed.parameters.filename).toBe('a"b\\c%d e.txt');
  });

  it('round-trips any name through a parser', () => {
    for (const name of ['prix été – 東京 "x".txt', "a'b(c)*d e", '😀.png', 'plain.txt']) {
      expect(parseContentDisposition(contentDisposition(name, 'inline')).parameters.filename).toBe(name);
    }
  });

  it('builds a readable fallback', () => {
    expect(asciiFallbackFilename('Ünïcödé Café.docx')).toBe('Unicode Cafe.docx');
    expect(asciiFallbackFilename('😀.png')).toBe('download.png');
    expect(asciiFallbackFilename('😀')).toBe('download');
  });
});

describe('parseRange', () => {
  const table: [string | undefined, number, ReturnType<typeof parseRange>][] = [
    [undefined, 100, { kind: 'full' }],
    ['bytes=0-9', 100, { kind: 'partial', start: 0, end: 9 }],
    ['bytes=10-', 100, { kind: 'partial', start: 10, end: 99 }],
    ['bytes=-10', 100, { kind: 'partial', start: 90, end: 99 }],
    ['bytes=-500', 100, { kind: 'partial', start: 0, end: 99 }],
    ['bytes=90-500', 100, { kind: 'partial', start: 90, end: 99 }],
    ['bytes=99-99', 100, { kind: 'partial', start: 99, end: 99 }],
    ['BYTES = 5 - 6', 100, { kind: 'partial', start: 5, end: 6 }],
    // Adjacent ranges are merged into one.
    ['bytes=0-1,2-3', 100, { kind: 'partial', start: 0, end: 3 }],
    ['bytes=100-', 100, { kind: 'unsatisfiable' }],
    ['bytes=100-200', 100, { kind: 'unsatisfiable' }],
    ['bytes=-0', 100, { kind: 'unsatisfiable' }],
    ['bytes=0-', 0, { kind: 'unsatisfiable' }],
    ['bytes=-5', 0, { kind: 'unsatisfiable' }],
    ['bytes=99999999999999999999-', 100, { kind: 'unsatisfiable' }],
    // A reversed range selects nothing (as Express's static files answer it).
    ['bytes=9-3', 100, { kind: 'unsatisfiable' }],
    // Ignored (whole file): other units, malformed, several ranges.
    ['items=0-5', 100, { kind: 'full' }],
    ['bytes=abc', 100, { kind: 'full' }],
    ['bytes=-', 100, { kind: 'full' }],
    ['bytes=0-1,5-6', 100, { kind: 'full' }],
    ['bytes=1.5-3', 100, { kind: 'full' }],
    ['', 100, { kind: 'full' }],
  ];
  it.each(table)('%s of %i bytes', (header, size, expected) => {
    expect(parseRange(header, size)).toEqual(expected);
  });
});

describe('conditional requests', () => {
  const etag = '"abc"';
  const modified = new Date('2026-11-21T10:15:00Z');

  it('matches If-None-Match weakly, in lists, and *', () => {
    expect(isNotModified({ 'if-none-match': '"abc"' }, etag, modified)).toBe(true);
    expect(isNotModified({ 'if-none-match': 'W/"abc"' }, etag, modified)).toBe(true);
    expect(isNotModified({ 'if-none-match': '"x", "abc"' }, etag, modified)).toBe(true);
    expect(isNotModified({ 'if-none-match': '*' }, etag, modified)).toBe(true);
    expect(isNotModified({ 'if-none-match': '"abcd"' }, etag, modified)).toBe(false);
    expect(isNotModified({}, etag, modified)).toBe(false);
  });

  it('lets If-None-Match decide over If-Modified-Since', () => {
    expect(isNotModified({ 'if-modified-since': 'Sat, 21 Nov 2026 10:15:00 GMT' }, etag, modified)).toBe(true);
    expect(isNotModified({ 'if-modified-since': 'Sat, 21 Nov 2026 10:14:59 GMT' }, etag, modified)).toBe(false);
    expect(isNotModified({ 'if-modified-since': 'garbage' }, etag, modified)).toBe(false);
    expect(isNotModified({ 'if-none-match': '"other"', 'if-modified-since': 'Sat, 21 Nov 2026 10:15:00 GMT' }, etag, modified)).toBe(false);
  });

  it('validates conditional requests that also say Cache-Control: no-cache (as fetch() sends them)', () => {
    expect(isNotModified({ 'if-none-match': '"abc"', 'cache-control': 'no-cache' }, etag, modified)).toBe(true);
  });

  it('honours If-Range only for the current validator', () => {
    expect(ifRangeAllows(undefined, etag, modified)).toBe(true);
    expect(ifRangeAllows('"abc"', etag, modified)).toBe(true);
    expect(ifRangeAllows('W/"abc"', etag, modified)).toBe(false);
    expect(ifRangeAllows('"old"', etag, modified)).toBe(false);
    expect(ifRangeAllows('Sat, 21 Nov 2026 10:15:00 GMT', etag, modified)).toBe(true);
    expect(ifRangeAllows('Sat, 21 Nov 2026 09:00:00 GMT', etag, modified)).toBe(false);
  });
});
