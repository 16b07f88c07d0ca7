import { describe, expect, it } from '@jest/globals';
import { deflateSync } from 'node:zlib';
import { clientExtension, detectType, dispositionType, formFieldsToBody, looksLikeText, sanitizeFilename, slugify } from './asset-file.js';

describe('sanitizeFilename', () => {
  it.each([
    ['report.pdf', 'report.pdf'],
    ['../../etc/passwd', 'passwd'],
    ['..\\..\\windows\\win.ini', 'win.ini'],
    ['/abs/path/to/file.txt', 'file.txt'],
    ['C:\\Users\\me\\Desktop\\x.docx', 'x.docx'],
    ['..', 'file'],
    ['', 'file'],
    ['dir/', 'file'],
    ['a\u0000b\r\nc.txt', 'abc.txt'],
    ['evil\u202egnp.exe', 'evilgnp.exe'],
    ['  spaced.txt  ', 'spaced.txt'],
    ['.hidden', '.hidden'],
    ['e\u0301te\u0301.txt', 'été.txt'],
  ])('%j → %j', (raw, expected) => {
    expect(sanitizeFilename(raw)).toBe(expected);
  });

  it('shortens long names to 255 characters, keeping the extension', () => {
    const name = sanitizeFilename('é'.repeat(400) + '.pdf');
    expect([...name]).toHaveLength(255);
    expect(name.endsWith('.pdf')).toBe(true);
  });
});

describe('clientExtension', () => {
  it('reads plain extensions only', () => {
    expect(clientExtension('a.PDF')).toBe('pdf');
    expect(clientExtension('archive.tar.gz')).toBe('gz');
    expect(clientExtension('noext')).toBeNull();
    expect(clientExtension('weird.ex e')).toBeNull();
  });
});

describe('detectType', () => {
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]),
    Buffer.from('IHDR'),
    Buffer.alloc(17),
    deflateSync(Buffer.alloc(4)),
  ]);

  it('trusts the content, not the name', async () => {
    expect(await detectType(png, 'notes.txt')).toEqual({ mime: 'image/png', extension: 'png' });
    expect(await detectType(Buffer.from('%PDF-1.7\n%âãÏÓ\n'), 'x.png')).toEqual({ mime: 'application/pdf', extension: 'pdf' });
    expect(await detectType(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0]), 'photo')).toEqual({
      mime: 'image/jpeg',
      extension: 'jpg',
    });
  });

  it('recognises text, with the subtype from an allow-listed extension', async () => {
    expect(await detectType(Buffer.from('hello\n'), 'a.txt')).toEqual({ mime: 'text/plain', extension: 'txt' });
    expect(await detectType(Buffer.from('a,b\n1,2\n'), 'data.csv')).toEqual({ mime: 'text/csv', extension: 'csv' });
    expect(await detectType(Buffer.from('{"a":1}'), 'x.json')).toEqual({ mime: 'application/json', extension: 'json' });
    // HTML and SVG are never served as such from the API's origin.
    expect(await detectType(Buffer.from('<script>alert(1)</script>'), 'x.html')).toEqual({ mime: 'text/plain', extension: 'txt' });
    expect(await detectType(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), 'x.svg')).toEqual({ mime: 'text/plain', extension: 'txt' });
    expect(await detectType(Buffer.alloc(0), 'empty.txt')).toEqual({ mime: 'text/plain', extension: 'txt' });
    // An extension named after a member of Object.prototype is no allow-listed extension.
    for (const name of ['x.constructor', 'x.toString', 'x.valueOf', 'x.hasOwnProperty']) {
      expect(await detectType(Buffer.from('hello\n'), name)).toEqual({ mime: 'text/plain', extension: 'txt' });
    }
  });

  it('falls back to application/octet-stream for unknown binaries', async () => {
    expect(await detectType(Buffer.from([0x8a, 0x11, 0x00, 0xfe, 0x13, 0x37]), 'fw.BIN')).toEqual({ mime: 'application/octet-stream', extension: 'bin' });
    expect(await detectType(Buffer.from([0x8a, 0x11, 0x00, 0xfe]), 'noext')).toEqual({ mime: 'application/octet-stream', extension: 'bin' });
    expect(await detectType(Buffer.from([0x8a, 0x11, 0x00, 0xfe]), 'blob.dat')).toEqual({ mime: 'application/octet-stream', extension: 'dat' });
  });
});

describe('looksLikeText', () => {
  it('accepts UTF-8 (also cut mid-character) and refuses NUL, invalid UTF-8 and control noise', () => {
    expect(looksLikeText(Buffer.from('plain ascii\r\n\ttabbed'))).toBe(true);
    expect(looksLikeText(Buffer.from('héllo 東京'))).toBe(true);
    expect(looksLikeText(Buffer.from('東京').subarray(0, 4))).toBe(true);
    expect(looksLikeText(Buffer.from('a\u0000b'))).toBe(false);
    expect(looksLikeText(Buffer.from([0xc3, 0x28]))).toBe(false);
    expect(looksLikeText(Buffer.from('\u0001\u0002\u0003\u0004abc'))).toBe(false);
  });
});

describe('dispositionType', () => {
  it('shows media, PDF and plain text inline; offers the rest as downloads', () => {
    expect(dispositionType('image/png')).toBe('inline');
    expect(dispositionType('application/pdf')).toBe('inline');
    expect(dispositionType('text/plain')).toBe('inline');
    expect(dispositionType('image/svg+xml')).toBe('attachment');
    expect(dispositionType('application/zip')).toBe('attachment');
    expect(dispositionType('text/csv')).toBe('attachment');
  });
});

describe('aliases', () => {
  it.each([
    ['Price list', 'price-list'],
    ['Été 2026: Brochure!', 'ete-2026-brochure'],
    ['  --Hello__World--  ', 'hello-world'],
    ['Ünïcödé Straße', 'unicode-strasse'],
    ['Smørrebrød Æble', 'smorrebrod-aeble'],
    ['東京', 'asset'],
    ['!!!', 'asset'],
  ])('slugify(%j) = %j', (title, alias) => {
    expect(slugify(title)).toBe(alias);
  });

  it('keeps generated aliases short enough for a suffix', () => {
    const alias = slugify('word '.repeat(100));
    expect(alias.length).toBeLessThanOrEqual(64);
    expect(alias.endsWith('-')).toBe(false);
  });
});

describe('formFieldsToBody', () => {
  it('reads booleans, category ids and empty values', () => {
    expect(formFieldsToBody({ title: 'T', isPublished: '1', category: '7', description: '', publishUp: '', alias: '' })).toEqual({
      body: { title: 'T', isPublished: true, category: 7, description: null, publishUp: null },
      errors: [],
    });
    expect(formFieldsToBody({ isPublished: 'FALSE', category: '' }).body).toEqual({ isPublished: false, category: null });
    expect(formFieldsToBody({ isPublished: '0' }).body).toEqual({ isPublished: false });
  });

  it('reports bad values and repeated fields', () => {
    const { errors } = formFieldsToBody({ isPublished: 'yes', category: '3a', title: ['a', 'b'] });
    expect(errors.map((e) => e.field).sort()).toEqual(['category', 'isPublished', 'title']);
  });

  it('refuses NUL characters, which PostgreSQL text cannot hold', () => {
    const { body, errors } = formFieldsToBody({ title: 'a\u0000b', description: 'ok' });
    expect(errors).toEqual([{ field: 'title', message: 'must not contain NUL characters' }]);
    expect(body).toEqual({ description: 'ok' });
  });

  it('passes unknown fields through for the validation to refuse', () => {
    expect(formFieldsToBody({ bogus: 'x' }).body).toEqual({ bogus: 'x' });
  });
});
