import type { Request } from 'express';
import type { StorageEngine } from 'multer';
import { pipeline } from 'node:stream';
import { TextCheck } from './import-source.js';
import { type JobFiles, SizeLimit } from './job-files.js';

/** What an import upload left in storage, on `req.file`. */
export interface StoredImportFile {
  storageKey: string;
  size: number;
  originalname: string;
}

/**
 * multer storage engine for import uploads: streams the `file` part through a size limit
 * (IMPORT_MAX_BYTES, 413 beyond) and a check that it is UTF-8 text (a binary file is a 400 at
 * once, not a failed job later) into the job files, never buffering it. On failure nothing is kept,
 * and the failure is reported only once the partial file is gone.
 */
export class ImportUploadEngine implements StorageEngine {
  constructor(
    private readonly files: JobFiles,
    private readonly maxBytes: number,
  ) {}

  _handleFile(_req: Request, file: Express.Multer.File, cb: (error?: unknown, info?: Partial<StoredImportFile>) => void): void {
    const limit = new SizeLimit(this.maxBytes);
    const upload = file.stream;
    const check = new TextCheck();
    upload.pipe(limit);
    const source = pipeline(limit, check, () => undefined);
    // Over the limit or not text, the write fails and removes its partial file before `cb` reports the
    // error. The file stream itself is drained, not failed: multer answers a failed file stream at once
    // (without waiting for `cb`), which would let the answer go out while the partial file still exists.
    const drain = (): void => {
      upload.unpipe(limit);
      upload.resume();
    };
    limit.once('error', drain);
    check.once('error', drain);
    upload.once('error', (e: Error) => limit.destroy(e));
    this.files.write('imports', source).then(
      ({ key, size }) => cb(null, { storageKey: key, size }),
      (e: unknown) => cb(e),
    );
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void): void {
    this.files.delete((file as Partial<StoredImportFile>).storageKey ?? null).then(
      () => cb(null),
      (e: unknown) => cb(e instanceof Error ? e : new Error(String(e))),
    );
  }
}
