import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

/** Every regular file under a directory (recursively). */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

function crc32(buf: Buffer): number {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

/** A real PNG: 2×2 RGB pixels. */
function makePng(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(2, 0);
  ihdr.writeUInt32BE(2, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Deterministic bytes with no known file signature. */
function opaqueBytes(n: number): Buffer {
  const out = Buffer.alloc(n);
  let x = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  out[0] = 0x8a;
  out[1] = 0x11;
  out[2] = 0x00;
  return out;
}

/** A multipart body built by hand, so the raw file name reaches the server unaltered. */
function multipart(
  fields: Record<string, string>,
  file?: { name: string; data: Buffer; type?: string },
  more: { field: string; name: string; data: Buffer }[] = [],
) {
  const boundary = '----sfTestBoundary7MA4YWxkTrZu0gW';
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`, 'utf8'));
  }
  const files = [...(file ? [{ field: 'file', ...file }] : []), ...more];
  for (const f of files) {
    parts.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${f.field}"; filename="${f.name}"\r\nContent-Type: ${'type' in f && f.type ? f.type : 'application/octet-stream'}\r\n\r\n`,
        'utf8',
      ),
      f.data,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: Buffer.concat(parts) };
}

describe('assets', () => {
  let app: TestApp;
  let auth: string;
  let categoryId: number;
  let storageDir: string;

  beforeAll(async () => {
    // LOG_LEVEL info: the aborted-download test reads the line an abort logs at info.
    app = await startApp({ env: { LOG_LEVEL: 'info' } });
    storageDir = app.env.STORAGE_DIR;
    auth = await adminToken(app);
    const [cat] = await app.sql<{ id: number }>(
      `INSERT INTO categories (title, alias, description, color, bundle, created_by_user) VALUES ('Brochures', 'brochures', 'Sales brochures', '#4e5e9e', 'asset', 'Admin') RETURNING id`,
    );
    categoryId = cat.id;
  }, 120000);
  afterAll(async () => app?.stop());

  const upload = (fields: Record<string, string>, file?: { name: string; data: Buffer; type?: string }, token = auth) => {
    const { contentType, body } = multipart(fields, file);
    return app.http.post('/api/assets/new').set('Authorization', token).set('Content-Type', contentType).send(body);
  };
  const storedFileCount = () => filesUnder(storageDir).length;
  const keyOf = async (id: number) => (await app.sql<{ storage_key: string }>(`SELECT storage_key FROM assets WHERE id = $1`, [id]))[0].storage_key;
  const download = (url: string, headers: Record<string, string> = {}, method = 'GET') => fetch(url, { headers, method });

  it('uploads a text file: 201 with the full record; type, size and extension set by the server', async () => {
    const text = Buffer.from('Widget,Price\nGadget,10\n');
    const res = await upload({ title: 'Price list', description: 'Our prices', language: 'de' }, { name: 'prices.txt', data: text, type: 'image/png' });
    expect(res.status).toBe(201);
    const a = res.body.asset;
    expect(a).toMatchObject({
      title: 'Price list',
      description: 'Our prices',
      alias: 'price-list',
      language: 'de',
      isPublished: true,
      publishUp: null,
      publishDown: null,
      createdBy: expect.any(Number),
      createdByUser: expect.any(String),
      dateModified: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      modifiedBy: expect.any(Number),
      modifiedByUser: expect.any(String),
      downloadCount: 0,
      uniqueDownloadCount: 0,
      revision: 1,
      category: null,
      extension: 'txt',
      mime: 'text/plain',
      size: text.length,
      originalFilename: 'prices.txt',
    });
    expect(a.dateAdded).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    expect(a.downloadUrl).toBe(`${app.url}/api/assets/${a.id}:price-list`);
    // Stored under a server-generated name, not the client's.
    const key = await keyOf(a.id);
    expect(key).not.toContain('prices');
    expect(existsSync(join(storageDir, key))).toBe(true);

    const got = await app.http.get(`/api/assets/${a.id}`).set('Authorization', auth);
    expect(got.status).toBe(200);
    expect(got.body.asset).toEqual(a);
  });

  it('detects a PNG image and a PDF from their content, whatever the client calls them', async () => {
    const png = makePng();
    const res = await upload({ title: 'Logo' }, { name: 'logo.txt', data: png, type: 'text/plain' });
    expect(res.status).toBe(201);
    expect(res.body.asset).toMatchObject({ mime: 'image/png', extension: 'png', size: png.length, originalFilename: 'logo.txt' });

    const pdf = Buffer.from('%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n');
    const res2 = await upload({ title: 'Brochure' }, { name: 'brochure', data: pdf });
    expect(res2.status).toBe(201);
    expect(res2.body.asset).toMatchObject({ mime: 'application/pdf', extension: 'pdf', size: pdf.length });
  });

  it('stores an unknown binary as application/octet-stream and a CSV text as text/csv', async () => {
    const bin = opaqueBytes(3000);
    const res = await upload({ title: 'Firmware blob' }, { name: 'firmware.xyz', data: bin });
    expect(res.status).toBe(201);
    expect(res.body.asset).toMatchObject({ mime: 'application/octet-stream', extension: 'xyz', size: 3000 });

    const csv = await upload({ title: 'Leads export' }, { name: 'leads.CSV', data: Buffer.from('name,email\nAda,ada@example.com\n') });
    expect(csv.status).toBe(201);
    expect(csv.body.asset).toMatchObject({ mime: 'text/csv', extension: 'csv' });
  });

  it('keeps a path-like file name only as a plain name, and a unicode name intact', async () => {
    const before = storedFileCount();
    const evil = await upload({ title: 'Traversal' }, { name: '../../../etc/passwd', data: Buffer.from('root:x:0:0\n') });
    expect(evil.status).toBe(201);
    expect(evil.body.asset.originalFilename).toBe('passwd');
    const win = await upload({ title: 'Windows path' }, { name: '..\\..\\boot.ini', data: Buffer.from('[boot]\n') });
    expect(win.status).toBe(201);
    expect(win.body.asset.originalFilename).toBe('boot.ini');
    expect(storedFileCount()).toBe(before + 2);
    for (const f of filesUnder(storageDir)) expect(f.startsWith(storageDir + '/')).toBe(true);
    expect(existsSync(join(storageDir, '..', 'etc'))).toBe(false);

    const name = 'prix été 2026 – 東京 "final".txt';
    const uni = await upload({ title: 'Unicode name' }, { name: name.replace(/"/g, '%22'), data: Buffer.from('bonjour\n') });
    expect(uni.status).toBe(201);
    expect(uni.body.asset.originalFilename).toBe(name);
    const dl = await download(uni.body.asset.downloadUrl);
    expect(dl.status).toBe(200);
    const cd = dl.headers.get('content-disposition')!;
    expect(cd).toMatch(/^inline; filename="[\x20-\x7e]+"; filename\*=UTF-8''[A-Za-z0-9%!#$&+\-.^_`|~]+$/);
    expect(cd).toContain(`filename="prix ete 2026 _ __ _final_.txt"`);
    const encoded = /filename\*=UTF-8''(.+)$/.exec(cd)![1];
    expect(decodeURIComponent(encoded)).toBe(name);
  });

  it('reads form fields: isPublished from true/false/1/0, category as the category record', async () => {
    const res = await upload({ title: 'Catalogue 2026', isPublished: '0', category: String(categoryId) }, { name: 'c.txt', data: Buffer.from('x') });
    expect(res.status).toBe(201);
    expect(res.body.asset.isPublished).toBe(false);
    expect(res.body.asset.category).toEqual({
      createdByUser: 'Admin',
      modifiedByUser: null, // the category was written by SQL, with no user
      id: categoryId,
      title: 'Brochures',
      alias: 'brochures',
      description: 'Sales brochures',
      color: '#4e5e9e',
      bundle: 'asset',
    });

    const bad = expectError(
      await upload({ title: 'Bad', isPublished: 'yes', category: 'abc' }, { name: 'b.txt', data: Buffer.from('x') }),
      400,
      'validation_failed',
    );
    expect(bad.details!.map((d) => d.field).sort()).toEqual(['category', 'isPublished']);
    expectError(await upload({ title: 'Bad', bogus: '1' }, { name: 'b.txt', data: Buffer.from('x') }), 400, 'validation_failed');
    expectError(await upload({ title: 'Bad', publishUp: '2026-01-01T10:00:00' }, { name: 'b.txt', data: Buffer.from('x') }), 400, 'validation_failed');
    expectError(await upload({ description: 'no title' }, { name: 'b.txt', data: Buffer.from('x') }), 400, 'validation_failed');
    const noFile = expectError(await upload({ title: 'No file' }), 400, 'validation_failed');
    expect(noFile.details?.[0].field).toBe('file');
  });

  it('a refused upload leaves no file and no row (missing category, taken alias, bad fields)', async () => {
    const files = storedFileCount();
    const [{ n: rows }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    const missingCat = expectError(await upload({ title: 'Orphan', category: '987654' }, { name: 'o.txt', data: Buffer.from('x') }), 400, 'validation_failed');
    expect(missingCat.details?.[0].field).toBe('category');
    await upload({ title: 'Taken', alias: 'taken-alias' }, { name: 't.txt', data: Buffer.from('x') });
    const taken = expectError(await upload({ title: 'Other', alias: 'taken-alias' }, { name: 't.txt', data: Buffer.from('y') }), 409, 'conflict');
    expect(taken.details?.[0].field).toBe('alias');
    expectError(await upload({ title: 'Bad alias', alias: 'Not An Alias' }, { name: 't.txt', data: Buffer.from('x') }), 400, 'validation_failed');
    // A second file, or a file in another field, is refused and the stored one removed.
    const two = multipart({ title: 'Two files' }, { name: 'one.txt', data: Buffer.from('1') }, [{ field: 'file', name: 'two.txt', data: Buffer.from('2') }]);
    expectError(
      await app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', two.contentType).send(two.body),
      400,
      'validation_failed',
    );
    const other = multipart({ title: 'Other field' }, { name: 'x.txt', data: Buffer.from('x') }, [
      { field: 'attachment', name: 'y.txt', data: Buffer.from('y') },
    ]);
    expectError(
      await app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', other.contentType).send(other.body),
      400,
      'validation_failed',
    );
    expect(storedFileCount()).toBe(files + 1);
    const [{ n: after }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    expect(Number(after)).toBe(Number(rows) + 1);
  });

  it('refuses form fields named after built-in members and field text that is not UTF-8 (400), leaving no file and no row', async () => {
    const files = storedFileCount();
    const [{ n: rows }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    for (const name of ['__proto__', 'constructor', 'toString', 'valueOf']) {
      const err = expectError(await upload({ title: `Reserved ${name}`, [name]: 'x' }, { name: 'r.txt', data: Buffer.from('x') }), 400, 'validation_failed');
      expect(err.details).toContainEqual({ field: name, message: 'should not exist' });
    }
    // The byte 0xFF inside the title (busboy would decode it to U+FFFD and the title would be stored with it).
    const form = multipart({ title: 'Bad@@byte' }, { name: 'b.txt', data: Buffer.from('x') });
    const at = form.body.indexOf('@@');
    const body = Buffer.concat([form.body.subarray(0, at), Buffer.from([0xff]), form.body.subarray(at + 2)]);
    const bad = expectError(
      await app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', form.contentType).send(body),
      400,
      'validation_failed',
    );
    expect(bad.details).toEqual([{ field: 'title', message: 'must be valid UTF-8' }]);
    expect(storedFileCount()).toBe(files);
    const [{ n: after }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    expect(after).toBe(rows);
    // A JSON edit with the same byte is refused as well.
    const created = await upload({ title: 'Valid title é' }, { name: 'v.txt', data: Buffer.from('v') });
    expect(created.status).toBe(201);
    const json = Buffer.concat([Buffer.from('{"title":"A'), Buffer.from([0xff]), Buffer.from('"}')]);
    // (Sent as raw bytes: supertest would serialise a Buffer as JSON.)
    const res = await fetch(`${app.url}/api/assets/${created.body.asset.id as number}`, {
      method: 'PATCH',
      headers: { Authorization: auth, 'Content-Type': 'application/json' },
      body: json,
    });
    const edit = { status: res.status, body: await res.json() };
    expect(expectError(edit, 400, 'validation_failed').details).toEqual([{ field: 'body', message: 'must be valid UTF-8' }]);
    expect((await app.http.get(`/api/assets/${created.body.asset.id as number}`).set('Authorization', auth)).body.asset.title).toBe('Valid title é');
  });

  it('a client that disconnects mid-upload leaves no partial file and no row', async () => {
    const files = storedFileCount();
    const [{ n: rows }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    const { contentType, body } = multipart({ title: 'Aborted' }, { name: 'big.bin', data: opaqueBytes(2 * 1024 * 1024) });
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${app.url}/api/assets/new`, {
        method: 'POST',
        headers: { Authorization: auth, 'Content-Type': contentType, 'Content-Length': String(body.length) },
      });
      req.on('error', () => resolve());
      req.write(body.subarray(0, 512 * 1024), () => {
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 300);
      });
    });
    const deadline = Date.now() + 5000;
    while (storedFileCount() !== files && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(storedFileCount()).toBe(files);
    const [{ n: after }] = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM assets`);
    expect(after).toBe(rows);
  });

  it('generates unique aliases from titles', async () => {
    const a = await upload({ title: 'Été 2026: Brochure!' }, { name: 'a.txt', data: Buffer.from('a') });
    const b = await upload({ title: 'Ete 2026 brochure' }, { name: 'b.txt', data: Buffer.from('b') });
    const c = await upload({ title: '東京' }, { name: 'c.txt', data: Buffer.from('c') });
    expect(a.body.asset.alias).toBe('ete-2026-brochure');
    expect(b.body.asset.alias).toBe('ete-2026-brochure-2');
    expect(c.body.asset.alias).toMatch(/^asset(-\d+)?$/);
    // Concurrent uploads with the same title all get distinct aliases.
    const many = await Promise.all(Array.from({ length: 5 }, (_, i) => upload({ title: 'Same title' }, { name: `${i}.txt`, data: Buffer.from(String(i)) })));
    expect(many.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(many.map((r) => r.body.asset.alias)).size).toBe(5);
  });

  it('refuses a JSON create with 415 and other media types on edit too', async () => {
    expectError(await app.http.post('/api/assets/new').set('Authorization', auth).send({ title: 'JSON' }), 415, 'unsupported_media_type');
    expectError(await app.http.post('/api/assets').set('Authorization', auth).set('Content-Type', 'text/plain').send('hello'), 415, 'unsupported_media_type');
    const id = (await upload({ title: 'Edit types' }, { name: 'e.txt', data: Buffer.from('e') })).body.asset.id;
    expectError(
      await app.http.patch(`/api/assets/${id}`).set('Authorization', auth).set('Content-Type', 'text/plain').send('x'),
      415,
      'unsupported_media_type',
    );
  });

  it('serves a published asset publicly with Content-Type, Content-Disposition, ETag, Last-Modified and ranges', async () => {
    const content = Buffer.from('0123456789abcdefghij');
    const a = (await upload({ title: 'Range me' }, { name: 'range.txt', data: content })).body.asset;
    const full = await download(a.downloadUrl);
    expect(full.status).toBe(200);
    expect(Buffer.from(await full.arrayBuffer())).toEqual(content);
    expect(full.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(full.headers.get('content-length')).toBe('20');
    // RFC 6266: the file name as a token or a quoted string (content-disposition writes a token when it can).
    expect(full.headers.get('content-disposition')).toMatch(/^inline; filename=("range\.txt"|range\.txt)$/);
    expect(full.headers.get('accept-ranges')).toBe('bytes');
    expect(full.headers.get('x-content-type-options')).toBe('nosniff');
    const etag = full.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    const lastModified = full.headers.get('last-modified')!;
    expect(Number.isNaN(Date.parse(lastModified))).toBe(false);

    const part = await download(a.downloadUrl, { Range: 'bytes=2-5' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 2-5/20');
    expect(part.headers.get('content-length')).toBe('4');
    expect(await part.text()).toBe('2345');

    const suffix = await download(a.downloadUrl, { Range: 'bytes=-3' });
    expect(suffix.status).toBe(206);
    expect(await suffix.text()).toBe('hij');

    const open = await download(a.downloadUrl, { Range: 'bytes=15-' });
    expect(open.status).toBe(206);
    expect(await open.text()).toBe('fghij');

    const outside = await download(a.downloadUrl, { Range: 'bytes=50-60' });
    expect(outside.status).toBe(416);
    expect(outside.headers.get('content-range')).toBe('bytes */20');
    expect(((await outside.json()) as { error: { code: string; status: number } }).error).toMatchObject({ code: 'range_not_satisfiable', status: 416 });

    // Several ranges: the whole file. A stale If-Range: the whole file.
    expect((await download(a.downloadUrl, { Range: 'bytes=0-1,4-5' })).status).toBe(200);
    expect((await download(a.downloadUrl, { Range: 'bytes=2-5', 'If-Range': '"stale"' })).status).toBe(200);
    expect((await download(a.downloadUrl, { Range: 'bytes=2-5', 'If-Range': etag })).status).toBe(206);

    const cached = await download(a.downloadUrl, { 'If-None-Match': etag });
    expect(cached.status).toBe(304);
    expect(cached.headers.get('etag')).toBe(etag);
    expect((await download(a.downloadUrl, { 'If-Modified-Since': lastModified })).status).toBe(304);

    const head = await download(a.downloadUrl, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('20');

    // Counted: the full download, the 200s for multi-range and stale If-Range, and ranges from byte 0 only.
    const [{ download_count }] = await app.sql<{ download_count: string }>(`SELECT download_count FROM assets WHERE id = $1`, [a.id]);
    expect(Number(download_count)).toBe(3);

    // The record itself still needs a token.
    expectError(await app.http.get(`/api/assets/${a.id}`), 401, 'unauthorized');
  });

  it('serves binary files byte for byte', async () => {
    const png = makePng();
    const a = (await upload({ title: 'Pixel' }, { name: 'pixel.png', data: png })).body.asset;
    const res = await download(a.downloadUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer())).toEqual(png);
    const bin = opaqueBytes(70000);
    const b = (await upload({ title: 'Blob' }, { name: 'blob.dat', data: bin })).body.asset;
    const res2 = await download(b.downloadUrl);
    expect(res2.headers.get('content-type')).toBe('application/octet-stream');
    expect(res2.headers.get('content-disposition')).toMatch(/^attachment; filename=("blob\.dat"|blob\.dat)$/);
    expect(Buffer.from(await res2.arrayBuffer())).toEqual(bin);
  });

  it('a download the client closes early is logged as an abort, not as a failure', async () => {
    const a = (await upload({ title: 'Big blob' }, { name: 'big.dat', data: opaqueBytes(2_000_000) })).body.asset;
    const url = new URL(a.downloadUrl as string);
    const from = app.logs.length;
    // The client sends the request and closes its connection before the answer comes.
    await new Promise<void>((resolve, reject) => {
      const socket = connect(app.port, '127.0.0.1', () =>
        socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, () => {
          socket.destroy();
          resolve();
        }),
      );
      socket.on('error', reject);
    });
    const line = await waitUntil(
      'the abort in the log',
      async () =>
        app.logs
          .slice(from)
          .join('')
          .split('\n')
          .find((l) => l.includes('asset download aborted by the client') && l.includes(`"assetId":${a.id}`)),
      15000,
    );
    expect(line).toMatch(/"level":"info"/);
    expect(app.logs.slice(from).join('')).not.toMatch(/request failed|asset download interrupted/);
    expect((await download(a.downloadUrl)).status).toBe(200);
  });

  it('answers 404 on the download URL when unpublished, not yet or no longer published, or with a wrong alias', async () => {
    const file = { name: 'w.txt', data: Buffer.from('window') };
    const unpublished = (await upload({ title: 'Unpublished', isPublished: 'false' }, file)).body.asset;
    const future = (await upload({ title: 'Future', publishUp: new Date(Date.now() + 86400000).toISOString() }, file)).body.asset;
    const past = (await upload({ title: 'Past', publishDown: new Date(Date.now() - 1000).toISOString() }, file)).body.asset;
    const current = (
      await upload(
        { title: 'Current', publishUp: new Date(Date.now() - 86400000).toISOString(), publishDown: new Date(Date.now() + 86400000).toISOString() },
        file,
      )
    ).body.asset;
    for (const a of [unpublished, future, past]) {
      const res = await download(a.downloadUrl);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
    expect((await download(current.downloadUrl)).status).toBe(200);
    expect((await download(`${app.url}/api/assets/${current.id}:wrong-alias`)).status).toBe(404);
    expect((await download(`${app.url}/api/assets/999999:current`)).status).toBe(404);
    expect((await download(`${app.url}/api/assets/abc:current`)).status).toBe(404);

    // Publishing it opens the URL.
    const patched = await app.http.patch(`/api/assets/${unpublished.id}/edit`).set('Authorization', auth).send({ isPublished: true });
    expect(patched.status).toBe(200);
    expect((await download(unpublished.downloadUrl)).status).toBe(200);
    expectError(
      await app.http
        .patch(`/api/assets/${unpublished.id}`)
        .set('Authorization', auth)
        .send({ publishUp: '2026-05-01T00:00:00Z', publishDown: '2026-04-01T00:00:00Z' }),
      400,
      'validation_failed',
    );
  });

  it('counts 50 concurrent downloads exactly, and unique downloads once per client', async () => {
    const a = (await upload({ title: 'Popular' }, { name: 'popular.txt', data: Buffer.from('popular content\n') })).body.asset;
    const results = await Promise.all(
      Array.from({ length: 50 }, () => download(a.downloadUrl, { 'User-Agent': 'agent-one' }).then(async (r) => [r.status, await r.text()] as const)),
    );
    expect(results.every(([s, t]) => s === 200 && t === 'popular content\n')).toBe(true);
    await download(a.downloadUrl, { 'User-Agent': 'agent-two' }).then((r) => r.text());
    const got = await app.http.get(`/api/assets/${a.id}`).set('Authorization', auth);
    expect(got.body.asset.downloadCount).toBe(51);
    expect(got.body.asset.uniqueDownloadCount).toBe(2);
  });

  it('replaces the file with a multipart PATCH (revision + 1, old file removed); JSON edits only metadata', async () => {
    const a = (await upload({ title: 'Versioned' }, { name: 'v1.txt', data: Buffer.from('version one') })).body.asset;
    const oldKey = await keyOf(a.id);
    const json = await app.http.patch(`/api/assets/${a.id}/edit`).set('Authorization', auth).send({ title: 'Versioned doc', description: 'v1' });
    expect(json.status).toBe(200);
    expect(json.body.asset).toMatchObject({ title: 'Versioned doc', alias: 'versioned', revision: 1, description: 'v1', modifiedByUser: expect.any(String) });
    expect(json.body.asset.dateModified).not.toBeNull();

    const png = makePng();
    const { contentType, body } = multipart({ description: '' }, { name: 'v2.png', data: png });
    const replaced = await app.http.patch(`/api/assets/${a.id}`).set('Authorization', auth).set('Content-Type', contentType).send(body);
    expect(replaced.status).toBe(200);
    expect(replaced.body.asset).toMatchObject({
      revision: 2,
      mime: 'image/png',
      extension: 'png',
      size: png.length,
      originalFilename: 'v2.png',
      description: null,
      title: 'Versioned doc',
    });
    expect(existsSync(join(storageDir, oldKey))).toBe(false);
    const newKey = await keyOf(a.id);
    expect(existsSync(join(storageDir, newKey))).toBe(true);
    const dl = await download(a.downloadUrl);
    expect(Buffer.from(await dl.arrayBuffer())).toEqual(png);

    const v3 = multipart({ title: 'Versioned doc' }, { name: 'v3.txt', data: Buffer.from('three') });
    const put = await app.http.put(`/api/assets/${a.id}/edit`).set('Authorization', auth).set('Content-Type', v3.contentType).send(v3.body);
    expect(put.status).toBe(200);
    expect(put.body.asset).toMatchObject({ revision: 3, mime: 'text/plain', size: 5, language: 'en', category: null });

    // A PATCH on a missing id is 404 and keeps nothing of its upload.
    const files = storedFileCount();
    const missing = await app.http.patch('/api/assets/424242').set('Authorization', auth).set('Content-Type', contentType).send(body);
    expectError(missing, 404, 'not_found');
    expect(storedFileCount()).toBe(files);
  });

  it('PUT replaces metadata (defaults for omitted ones) or creates with a new id', async () => {
    const a = (
      await upload(
        { title: 'Put me', language: 'fr', isPublished: 'false', category: String(categoryId), description: 'd' },
        { name: 'p.txt', data: Buffer.from('p') },
      )
    ).body.asset;
    const put = await app.http.put(`/api/assets/${a.id}`).set('Authorization', auth).send({ title: 'Put me' });
    expect(put.status).toBe(200);
    expect(put.body.asset).toMatchObject({ id: a.id, alias: 'put-me', language: 'en', isPublished: true, category: null, description: null, revision: 1 });
    expectError(await app.http.put(`/api/assets/${a.id}`).set('Authorization', auth).send({ description: 'no title' }), 400, 'validation_failed');

    const noFile = expectError(await app.http.put('/api/assets/777777').set('Authorization', auth).send({ title: 'New by put' }), 400, 'validation_failed');
    expect(noFile.details?.[0].field).toBe('file');
    const { contentType, body } = multipart({ title: 'New by put' }, { name: 'n.txt', data: Buffer.from('n') });
    const created = await app.http.put('/api/assets/777777/edit').set('Authorization', auth).set('Content-Type', contentType).send(body);
    expect(created.status).toBe(201);
    expect(created.body.asset.id).not.toBe(777777);
    expect(created.body.asset.alias).toBe('new-by-put');
  });

  it('deleting an asset answers the record and removes its file; its URL is then 404', async () => {
    const a = (await upload({ title: 'Delete me' }, { name: 'd.txt', data: Buffer.from('bye') })).body.asset;
    const key = await keyOf(a.id);
    expect(existsSync(join(storageDir, key))).toBe(true);
    const del = await app.http.delete(`/api/assets/${a.id}/delete`).set('Authorization', auth);
    expect(del.status).toBe(200);
    expect(del.body.asset).toMatchObject({ id: a.id, title: 'Delete me' });
    expect(existsSync(join(storageDir, key))).toBe(false);
    expect((await download(a.downloadUrl)).status).toBe(404);
    expectError(await app.http.get(`/api/assets/${a.id}`).set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.delete(`/api/assets/${a.id}`).set('Authorization', auth), 404, 'not_found');
  });

  it('deleting a category leaves its assets uncategorised', async () => {
    const [cat] = await app.sql<{ id: number }>(`INSERT INTO categories (title, alias, bundle) VALUES ('Temp', 'temp', 'asset') RETURNING id`);
    const a = (await upload({ title: 'Categorised', category: String(cat.id) }, { name: 'c.txt', data: Buffer.from('c') })).body.asset;
    expect(a.category.id).toBe(cat.id);
    await app.sql(`DELETE FROM categories WHERE id = $1`, [cat.id]);
    const got = await app.http.get(`/api/assets/${a.id}`).set('Authorization', auth);
    expect(got.body.asset.category).toBeNull();
  });

  it('lists with status filter, search, paging and order', async () => {
    const all = await app.http.get('/api/assets').query({ limit: 200 }).set('Authorization', auth);
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(all.body.assets.length);
    const published = await app.http.get('/api/assets').query({ status: 'published', limit: 200 }).set('Authorization', auth);
    const unpublished = await app.http.get('/api/assets').query({ status: 'unpublished', limit: 200 }).set('Authorization', auth);
    expect(published.body.total + unpublished.body.total).toBe(all.body.total);
    expect(unpublished.body.total).toBeGreaterThan(0);
    expect(published.body.assets.every((a: { isPublished: boolean }) => a.isPublished)).toBe(true);
    expect(unpublished.body.assets.every((a: { isPublished: boolean }) => !a.isPublished)).toBe(true);

    const search = await app.http.get('/api/assets').query({ search: 'PRICE' }).set('Authorization', auth);
    expect(search.body.assets.map((a: { title: string }) => a.title)).toContain('Price list');
    const byDesc = await app.http.get('/api/assets').query({ search: 'sales brochures' }).set('Authorization', auth);
    expect(byDesc.body.total).toBe(0);
    const ordered = await app.http.get('/api/assets').query({ orderBy: 'size', orderByDir: 'desc', limit: 3 }).set('Authorization', auth);
    const sizes = ordered.body.assets.map((a: { size: number }) => a.size);
    expect([...sizes].sort((x: number, y: number) => y - x)).toEqual(sizes);
    expectError(await app.http.get('/api/assets').query({ status: 'draft' }).set('Authorization', auth), 400, 'validation_failed');
    expectError(await app.http.get('/api/assets').query({ orderBy: 'storage_key' }).set('Authorization', auth), 400, 'validation_failed');
  });

  it('needs assets:* permissions (403) and never stores the file of a refused request', async () => {
    const other = await tokenFor(app, 'contacts:read,contacts:write', { user: 'other@example.com' });
    const reader = await tokenFor(app, 'assets:read', { user: 'reader@example.com' });
    const files = storedFileCount();
    expectError(await upload({ title: 'Nope' }, { name: 'n.txt', data: Buffer.from('n') }, other), 403, 'forbidden');
    expectError(await upload({ title: 'Nope' }, { name: 'n.txt', data: Buffer.from('n') }, reader), 403, 'forbidden');
    expectError(await upload({ title: 'Nope' }, { name: 'n.txt', data: Buffer.from('n') }, 'Bearer nonsense'), 401, 'unauthorized');
    expect(storedFileCount()).toBe(files);
    expectError(await app.http.get('/api/assets').set('Authorization', other), 403, 'forbidden');
    const id = (await upload({ title: 'Guarded' }, { name: 'g.txt', data: Buffer.from('g') })).body.asset.id;
    expectError(await app.http.get(`/api/assets/${id}`).set('Authorization', other), 403, 'forbidden');
    expect((await app.http.get(`/api/assets/${id}`).set('Authorization', reader)).status).toBe(200);
    expectError(await app.http.patch(`/api/assets/${id}`).set('Authorization', reader).send({ title: 'x' }), 403, 'forbidden');
    expectError(await app.http.delete(`/api/assets/${id}`).set('Authorization', reader), 403, 'forbidden');
  });

  it('GET /api/endpoints lists the public download route and the protected ones', async () => {
    const res = await app.http.get('/api/endpoints').set('Authorization', auth);
    expect(res.status).toBe(200);
    const routes = res.body.endpoints as { method: string; path: string; permission: string }[];
    expect(routes).toEqual(
      expect.arrayContaining([
        { method: 'GET', path: '/api/assets/:id::alias', permission: 'public' },
        { method: 'GET', path: '/api/assets/:id', permission: 'assets:read' },
        { method: 'GET', path: '/api/assets', permission: 'assets:read' },
        { method: 'POST', path: '/api/assets/new', permission: 'assets:write' },
        { method: 'POST', path: '/api/assets', permission: 'assets:write' },
        { method: 'PATCH', path: '/api/assets/:id/edit', permission: 'assets:write' },
        { method: 'PUT', path: '/api/assets/:id', permission: 'assets:write' },
        { method: 'DELETE', path: '/api/assets/:id/delete', permission: 'assets:delete' },
      ]),
    );
    const doc = await app.http.get('/api/docs-json');
    const op = doc.body.paths['/api/assets/{id}:{alias}']?.get;
    expect(op).toBeDefined();
    expect(op['x-permission']).toBe('public');
    expect(doc.body.paths['/api/assets/new'].post['x-permission']).toBe('assets:write');
  });
});

describe('assets with a small upload limit', () => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    app = await startApp({ env: { ASSET_MAX_BYTES: '1024' } });
    auth = await adminToken(app);
  });
  afterAll(async () => app?.stop());

  it('refuses an upload over ASSET_MAX_BYTES with 413, leaving no file and no row; accepts one at the limit', async () => {
    const big = multipart({ title: 'Too big' }, { name: 'big.bin', data: opaqueBytes(200 * 1024) });
    const res = await app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', big.contentType).send(big.body);
    const err = expectError(res, 413, 'payload_too_large');
    expect(err.message).toContain('1024');
    expect(filesUnder(app.env.STORAGE_DIR)).toEqual([]);
    expect(await app.sql(`SELECT id FROM assets`)).toEqual([]);

    const exact = multipart({ title: 'Just fits' }, { name: 'fits.bin', data: opaqueBytes(1024) });
    const ok = await app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', exact.contentType).send(exact.body);
    expect(ok.status).toBe(201);
    expect(ok.body.asset.size).toBe(1024);

    // Replacing with an oversized file keeps the asset and its file as they were.
    const replace = multipart({}, { name: 'big.bin', data: opaqueBytes(5000) });
    expectError(
      await app.http.patch(`/api/assets/${ok.body.asset.id}`).set('Authorization', auth).set('Content-Type', replace.contentType).send(replace.body),
      413,
      'payload_too_large',
    );
    expect(filesUnder(app.env.STORAGE_DIR)).toHaveLength(1);
    const got = await app.http.get(`/api/assets/${ok.body.asset.id}`).set('Authorization', auth);
    expect(got.body.asset).toMatchObject({ revision: 1, size: 1024 });
  });
});
