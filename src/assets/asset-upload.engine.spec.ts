import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Request } from 'express';
import type { AppConfig } from '../config/config.js';
import { AppError } from '../common/errors.js';
import { LocalDiskStorage } from './asset-storage.js';
import { AssetUploadEngine } from './asset-upload.engine.js';

/** Runs one file through the engine as multer would; answers the callback's error and whether the file stream itself failed. */
async function upload(engine: AssetUploadEngine, data: Buffer) {
  const stream = new PassThrough();
  let streamFailed = false;
  stream.on('error', () => (streamFailed = true));
  const file = { fieldname: 'file', originalname: 'a.bin', encoding: '7bit', mimetype: 'application/octet-stream', stream } as unknown as Express.Multer.File;
  const done = new Promise<unknown>((resolve) => engine._handleFile({} as Request, file, (err) => resolve(err)));
  for (let i = 0; i < data.length; i += 512) stream.write(data.subarray(i, i + 512));
  stream.end();
  const err = await done;
  return { err, streamFailed };
}

describe('AssetUploadEngine', () => {
  it('over the limit, reports 413 only once the partial file is gone, without failing the file stream (multer would answer at once)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asset-engine-'));
    try {
      const storage = new LocalDiskStorage({ storageDir: dir } as AppConfig);
      await storage.onModuleInit();
      const engine = new AssetUploadEngine(storage, 1024);
      for (let i = 0; i < 5; i++) {
        const { err, streamFailed } = await upload(engine, Buffer.alloc(8 * 1024, 7));
        expect(err).toBeInstanceOf(AppError);
        expect((err as AppError).code).toBe('payload_too_large');
        expect(streamFailed).toBe(false);
        expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
      }
      const ok = await upload(engine, Buffer.alloc(1024, 7));
      expect(ok.err).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
