import type { Request } from 'express';
import type { StorageEngine } from 'multer';
import { AssetStorage } from './asset-storage.js';
import { detectType, sanitizeFilename } from './asset-file.js';
import { UploadInspector } from './upload-inspector.js';

/** What an upload left in storage, as the service sees it on `req.file`. */
export interface StoredUpload {
  storageKey: string;
  size: number;
  /** SHA-256 of the content, hex (the download ETag). */
  checksum: string;
  mime: string;
  extension: string;
  /** The client's file name, sanitised; metadata for Content-Disposition only. */
  originalFilename: string;
}

export type UploadedAssetFile = Express.Multer.File & StoredUpload;

/**
 * multer storage engine for asset uploads: streams the `file` part through an UploadInspector
 * into AssetStorage (never buffering the file), then detects its type from the content. On any
 * failure (limit, client abort, disk) the storage keeps nothing; multer removes stored files
 * through `_removeFile` when the request fails after them.
 */
export class AssetUploadEngine implements StorageEngine {
  constructor(
    private readonly storage: AssetStorage,
    private readonly maxBytes: number,
  ) {}

  _handleFile(_req: Request, file: Express.Multer.File, cb: (error?: unknown, info?: Partial<UploadedAssetFile>) => void): void {
    const inspector = new UploadInspector(this.maxBytes);
    const upload = file.stream;
    upload.pipe(inspector);
    // Over the limit, the inspector fails and storage removes its partial file before `cb` reports the
    // error. The file stream itself is drained, not failed: multer answers a failed file stream at once,
    // which let the 413 go out while the partial file still existed.
    inspector.once('error', () => {
      upload.unpipe(inspector);
      upload.resume();
    });
    upload.once('error', (e: Error) => inspector.destroy(e));
    this.storage
      .write(inspector)
      .then(async (storageKey) => {
        try {
          const originalFilename = sanitizeFilename(file.originalname);
          const type = await detectType(inspector.sample(), originalFilename);
          cb(null, { storageKey, size: inspector.size, checksum: inspector.digest(), originalFilename, ...type });
        } catch (e) {
          await this.storage.delete(storageKey).catch(() => undefined);
          cb(e);
        }
      })
      .catch((e: unknown) => cb(e));
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void): void {
    const key = (file as Partial<UploadedAssetFile>).storageKey;
    if (!key) {
      cb(null);
      return;
    }
    this.storage.delete(key).then(
      () => cb(null),
      (e: unknown) => cb(e instanceof Error ? e : new Error(String(e))),
    );
  }
}
