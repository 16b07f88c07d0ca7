import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { AssetStorage, StoredObjectMissingError } from './asset-storage.js';
import type { UploadedAssetFile } from './asset-upload.engine.js';
import { AssetDownloadsService } from './asset-downloads.service.js';
import { AssetsRepository } from './assets.repository.js';
import { AssetsService } from './assets.service.js';

describe('AssetsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let assets: AssetsService;
  let storage: AssetStorage;
  let who: Principal;

  beforeAll(async () => {
    ctx = await startServiceContext();
    assets = ctx.get(AssetsService);
    storage = ctx.get(AssetStorage as unknown as new () => AssetStorage);
    who = await ctx.principal();
  });
  afterAll(async () => {
    await ctx.close();
  });

  /** A file as the upload engine leaves it: stored, with its metadata. */
  async function stored(text: string, name = 'file.txt'): Promise<UploadedAssetFile> {
    const data = Buffer.from(text);
    const storageKey = await storage.write(Readable.from([data]));
    return {
      storageKey,
      size: data.length,
      checksum: createHash('sha256').update(data).digest('hex'),
      mime: 'text/plain',
      extension: 'txt',
      originalFilename: name,
    } as UploadedAssetFile;
  }

  async function exists(key: string): Promise<boolean> {
    try {
      (await storage.open(key)).destroy();
      return true;
    } catch (e) {
      if (e instanceof StoredObjectMissingError) return false;
      throw e;
    }
  }

  const create = async (fields: Record<string, unknown>, text = 'x') => assets.create({ body: fields, multipart: false, file: await stored(text) }, who);

  it('creates an asset from an upload with a generated alias, then the next suffix for the same title', async () => {
    const a = await create({ title: 'Été Brochure' });
    expect(a).toMatchObject({ title: 'Été Brochure', alias: 'ete-brochure', revision: 1, language: 'en', isPublished: true, category: null, size: 1 });
    expect(a.downloadUrl).toMatch(new RegExp(`/api/assets/${a.id}:ete-brochure$`));
    expect(a.createdBy).toBe(who.userId);
    const b = await create({ title: 'ete brochure' });
    expect(b.alias).toBe('ete-brochure-2');
  });

  it('generated aliases never collide under concurrency', async () => {
    const made = await Promise.all(Array.from({ length: 10 }, () => create({ title: 'Parallel title' })));
    expect(new Set(made.map((m) => m.alias)).size).toBe(10);
    for (const m of made) expect(m.alias).toMatch(/^parallel-title(-\d+)?$/);
  });

  it('requires a file, and leaves nothing behind when refused', async () => {
    const e = await ctx.failure(assets.create({ body: { title: 'No file' }, multipart: false }, who));
    expect(e.details?.[0].field).toBe('file');
    const file = await stored('refused');
    const bad = await ctx.failure(assets.create({ body: { title: '' }, multipart: false, file }, who));
    expect(bad.status).toBe(400);
    expect(await exists(file.storageKey)).toBe(false);
  });

  it('a taken alias is a 409 naming the alias and the existing asset; the upload is discarded', async () => {
    const first = await create({ title: 'Owner', alias: 'owned-alias' });
    const file = await stored('second');
    const e = await ctx.failure(assets.create({ body: { title: 'Other', alias: 'owned-alias' }, multipart: false, file }, who));
    expect(e.status).toBe(409);
    expect(e.details).toEqual([{ field: 'alias', message: 'is already taken', existingId: first.id }]);
    expect(await exists(file.storageKey)).toBe(false);
  });

  it('a category that does not exist is a 400 naming category (its foreign key)', async () => {
    const e = await ctx.failure(create({ title: 'Lost', category: 987654 }));
    expect(e.status).toBe(400);
    expect(e.details?.[0].field).toBe('category');
  });

  it('embeds the category and filters the list by status', async () => {
    const [cat] = await ctx.query<{ id: number }>(
      `INSERT INTO categories (title, alias, bundle, color) VALUES ('Docs', 'svc-docs', 'asset', '#112233') RETURNING id`,
    );
    const a = await create({ title: 'Categorised', category: cat.id, isPublished: false });
    expect(a.category).toMatchObject({ id: cat.id, title: 'Docs', alias: 'svc-docs', color: '#112233', bundle: 'asset' });
    const unpublished = await assets.list({ status: 'unpublished', limit: '200' });
    expect(unpublished.assets.map((x) => x.id)).toContain(a.id);
    expect(unpublished.assets.every((x) => !x.isPublished)).toBe(true);
    const published = await assets.list({ status: 'published', limit: '200' });
    expect(published.assets.map((x) => x.id)).not.toContain(a.id);
    const found = await assets.list({ search: 'Categorised' });
    expect(found.total).toBe(1);
  });

  it('PATCH changes only the given properties; a new file replaces the old one and bumps the revision', async () => {
    const a = await create({ title: 'Patch me', description: 'keep' }, 'v1');
    const oldKey = (await ctx.get(AssetsRepository).findById(a.id))!.storageKey;
    const patched = await assets.patch(a.id, { body: { language: 'de' }, multipart: false }, who);
    expect(patched).toMatchObject({ title: 'Patch me', description: 'keep', language: 'de', revision: 1, alias: 'patch-me' });
    const file = await stored('version two');
    const v2 = await assets.patch(a.id, { body: { title: 'Patched' }, multipart: true, file }, who);
    expect(v2).toMatchObject({ title: 'Patched', alias: 'patch-me', revision: 2, size: 11, modifiedBy: who.userId });
    expect(await exists(oldKey)).toBe(false);
    expect(await exists(file.storageKey)).toBe(true);
    await expect(assets.patch(99999999, { body: { title: 'x' }, multipart: false }, who)).rejects.toMatchObject({ status: 404 });
  });

  it('reads multipart form fields and refuses bad ones (NUL included)', async () => {
    const a = await create({ title: 'Form fields' });
    const r = await assets.patch(a.id, { body: { isPublished: '0', description: '' }, multipart: true }, who);
    expect(r).toMatchObject({ isPublished: false, description: null });
    const e = await ctx.failure(assets.patch(a.id, { body: { title: 'a\u0000b' }, multipart: true }, who));
    expect(e.details).toEqual([{ field: 'title', message: 'must not contain NUL characters or invalid Unicode' }]);
    const order = await ctx.failure(
      assets.patch(a.id, { body: { publishUp: '2026-02-01T00:00:00Z', publishDown: '2026-01-01T00:00:00Z' }, multipart: false }, who),
    );
    expect(order.details?.[0].field).toBe('publishDown');
  });

  it('concurrent PATCHes of different properties all survive', async () => {
    const a = await create({ title: 'Race' });
    const changes = [{ description: 'd' }, { language: 'fr' }, { isPublished: false }, { title: 'Race 2' }, { alias: 'race-alias' }];
    await Promise.all(changes.map((body) => assets.patch(a.id, { body, multipart: false }, who)));
    expect(await assets.get(a.id)).toMatchObject({ description: 'd', language: 'fr', isPublished: false, title: 'Race 2', alias: 'race-alias' });
  });

  it('PUT replaces (omitted properties reset, alias from the new title) or creates', async () => {
    const a = await create({ title: 'Put source', description: 'gone', language: 'fr' });
    const { created, asset } = await assets.put(a.id, { body: { title: 'Put target' }, multipart: false }, who);
    expect(created).toBe(false);
    expect(asset).toMatchObject({ id: a.id, title: 'Put target', alias: 'put-target', description: null, language: 'en', revision: 1 });
    // An alias already derived from the title is kept.
    expect((await assets.put(a.id, { body: { title: 'Put target', description: 'again' }, multipart: false }, who)).asset.alias).toBe('put-target');
    const made = await assets.put(987654321, { body: { title: 'Put new' }, multipart: true, file: await stored('n') }, who);
    expect(made.created).toBe(true);
    expect(made.asset.id).not.toBe(987654321);
  });

  it('concurrent PUTs to one title get distinct generated aliases', async () => {
    const list = await Promise.all(Array.from({ length: 6 }, (_, i) => create({ title: `Put race ${i}` })));
    const put = await Promise.all(list.map((a) => assets.put(a.id, { body: { title: 'Same put title' }, multipart: false }, who)));
    expect(new Set(put.map((p) => p.asset.alias)).size).toBe(6);
  });

  it('DELETE answers the asset once, 404 to the others, and removes its file', async () => {
    const a = await create({ title: 'Delete race' });
    const key = (await ctx.get(AssetsRepository).findById(a.id))!.storageKey;
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => assets.remove(a.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) expect(r.reason).toMatchObject({ status: 404 });
    expect(await exists(key)).toBe(false);
    await expect(assets.get(a.id)).rejects.toMatchObject({ status: 404 });
  });

  it('counts downloads atomically: every download, and each client once', async () => {
    const repo = ctx.get(AssetsRepository);
    const a = await create({ title: 'Counted' });
    const one = Buffer.alloc(32, 1);
    const two = Buffer.alloc(32, 2);
    await Promise.all([repo.countDownload(a.id, one), repo.countDownload(a.id, one), repo.countDownload(a.id, two)]);
    expect(await assets.get(a.id)).toMatchObject({ downloadCount: 3, uniqueDownloadCount: 2 });
    expect(await repo.findPublished(a.id, a.alias)).toMatchObject({ id: a.id });
    expect(await repo.findPublished(a.id, 'other')).toBeNull();
    await assets.remove(a.id);
    const e = await ctx.failure(repo.countDownload(a.id, one));
    expect(e.status).toBe(404);
  });

  describe('public download (AssetDownloadsService behind a bare Express app)', () => {
    let server: ReturnType<ReturnType<typeof express>['listen']>;
    let base: string;

    beforeAll(async () => {
      const downloads = ctx.get(AssetDownloadsService);
      const app = express();
      app.get('/dl/:id/:alias', (req, res, next) => {
        downloads.serve(Number(req.params.id), req.params.alias, req, res).catch(next);
      });
      app.use((e: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
        const err = e instanceof AppError ? e : null;
        if (err?.headers) for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
        res.status(err?.status ?? 500).json({ error: { code: err?.code ?? 'internal', message: (e as Error).message } });
      });
      await new Promise<void>((resolve) => {
        server = app.listen(0, '127.0.0.1', () => resolve());
      });
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });

    it('serves the file with validators, ranges, 304 and 416, and counts full downloads', async () => {
      const a = await assets.create({ body: { title: 'Served file' }, multipart: false, file: await stored('0123456789', 'été.txt') }, who);
      const url = `${base}/dl/${a.id}/${a.alias}`;
      const full = await fetch(url);
      expect(full.status).toBe(200);
      expect(await full.text()).toBe('0123456789');
      expect(full.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(full.headers.get('content-disposition')).toBe(`inline; filename=ete.txt; filename*=UTF-8''%C3%A9t%C3%A9.txt`);
      const etag = full.headers.get('etag')!;
      const part = await fetch(url, { headers: { Range: 'bytes=2-4' } });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe('bytes 2-4/10');
      expect(await part.text()).toBe('234');
      const outside = await fetch(url, { headers: { Range: 'bytes=20-30' } });
      expect(outside.status).toBe(416);
      expect(outside.headers.get('content-range')).toBe('bytes */10');
      expect((await fetch(url, { headers: { 'If-None-Match': etag } })).status).toBe(304);
      expect((await fetch(url, { headers: { Range: 'bytes=2-4', 'If-Range': '"stale"' } })).status).toBe(200);
      expect((await fetch(url, { method: 'HEAD' })).status).toBe(200);
      // Counted: the two 200 GETs; not the later range, the 304, the 416 or the HEAD.
      expect(await assets.get(a.id)).toMatchObject({ downloadCount: 2, uniqueDownloadCount: 1 });
    });

    it('answers 404 for a wrong alias, an alias outside the alias rule (NUL included) and an unpublished asset', async () => {
      const a = await create({ title: 'Hidden file', isPublished: false });
      const b = await create({ title: 'Shown file' });
      for (const path of [`/dl/${a.id}/${a.alias}`, `/dl/${b.id}/wrong`, `/dl/${b.id}/${b.alias}%00`, `/dl/${b.id}/%00`, `/dl/${b.id}/Upper`]) {
        const res = await fetch(base + path);
        expect(res.status).toBe(404);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
      }
    });
  });
});
