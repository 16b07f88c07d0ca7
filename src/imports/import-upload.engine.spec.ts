import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Request } from 'express';
import type { AppConfig } from '../config/config.js';
import { AppError } from '../common/errors.js';
import { ImportUploadEngine } from './import-upload.engine.js';
import { JobFiles } from './job-files.js';

/** Runs one file through the engine as multer would; answers the callback's error, whether the file stream itself failed, and the files left when the callback ran. */
async function upload(engine: ImportUploadEngine, data: Buffer, dir: string) {
  const stream = new PassThrough();
  let streamFailed = false;
  stream.on('error', () => (streamFailed = true));
  const file = { fieldname: 'file', originalname: 'a.csv', encoding: '7bit', mimetype: 'text/csv', stream } as unknown as Express.Multer.File;
  const done = new Promise<{ err: unknown; left: string[] }>((resolve) =>
    engine._handleFile({} as Request, file, (err) => resolve({ err, left: readdirSync(join(dir, 'imports')) })),
  );
  for (let i = 0; i < data.length; i += 512) stream.write(data.subarray(i, i + 512));
  stream.end();
  return { ...(await done), streamFailed };
}

describe('ImportUploadEngine', () => {
  it('over the limit, reports 413 only once the partial file is gone, without failing the file stream (multer would answer at once)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'import-engine-'));
    try {
      const files = new JobFiles({ storageDir: dir } as AppConfig);
      await files.onModuleInit();
      const engine = new ImportUploadEngine(files, 1024);
      for (let i = 0; i < 5; i++) {
        const { err, streamFailed, left } = await upload(engine, Buffer.alloc(8 * 1024, 65), dir);
        expect(err).toBeInstanceOf(AppError);
        expect((err as AppError).code).toBe('payload_too_large');
        expect(streamFailed).toBe(false);
        expect(left).toEqual([]);
      }
      const ok = await upload(engine, Buffer.alloc(1024, 65), dir);
      expect(ok.err).toBeNull();
      expect(ok.left).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
