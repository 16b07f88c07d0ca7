import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '../common/errors.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

/** A `.part` file older than this is left over from a stopped process (swept at start). */
const STALE_PART_MS = 24 * 3600 * 1000;

const KEY_PATTERN = /^(imports|exports)\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Fails the stream once more than `maxBytes` passed through (413 naming IMPORT_MAX_BYTES). */
export class SizeLimit extends Transform {
  size = 0;
  constructor(private readonly maxBytes: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      cb(new AppError('payload_too_large', `The file is larger than the limit of ${this.maxBytes} bytes (IMPORT_MAX_BYTES)`));
      return;
    }
    cb(null, chunk);
  }
}

/**
 * Files of import and export jobs under STORAGE_DIR (`imports/<uuid>`, `exports/<uuid>`): written
 * to a `.part` file, flushed, then renamed, so a reader never sees half a file. Streamed in and
 * out, never held in memory. API and worker processes must share STORAGE_DIR (as for assets).
 */
@Injectable()
export class JobFiles implements OnModuleInit {
  private readonly root: string;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.root = config.storageDir;
  }

  async onModuleInit(): Promise<void> {
    for (const kind of ['imports', 'exports']) {
      const dir = join(this.root, kind);
      await mkdir(dir, { recursive: true });
      // Partial files left by a process that stopped mid-write (an export's worker killed, an upload cut off).
      const now = Date.now();
      for (const name of await readdir(dir)) {
        if (!name.endsWith('.part')) continue;
        const s = await stat(join(dir, name)).catch(() => null);
        if (s && now - s.mtimeMs > STALE_PART_MS) await unlink(join(dir, name)).catch(() => undefined);
      }
    }
  }

  private pathOf(key: string): string {
    if (!KEY_PATTERN.test(key)) throw new Error(`invalid job file key ${JSON.stringify(key)}`);
    return join(this.root, key);
  }

  /** Streams `source` into a new file; resolves with its key and size. On any error nothing is kept. */
  async write(kind: 'imports' | 'exports', source: Readable | AsyncIterable<string | Buffer>): Promise<{ key: string; size: number }> {
    const key = `${kind}/${randomUUID()}`;
    const path = this.pathOf(key);
    const part = `${path}.part`;
    const out = createWriteStream(part, { flags: 'wx', mode: 0o640, flush: true });
    try {
      await pipeline(source, out);
      await rename(part, path);
      return { key, size: (await stat(path)).size };
    } catch (e) {
      // The file is opened asynchronously: a source that fails at once (a binary upload refused by its
      // first bytes) can fail the pipeline before the open has created the file, and an unlink then would
      // find nothing and leave the .part behind: wait for the stream's close first (as asset storage does).
      if (!out.closed) await new Promise<void>((done) => out.once('close', () => done()));
      await unlink(part).catch(() => undefined);
      throw e;
    }
  }

  /** Reads a file (its first `end + 1` bytes with `end`). */
  open(key: string, end?: number): Readable {
    return createReadStream(this.pathOf(key), end === undefined ? {} : { end });
  }

  async size(key: string): Promise<number | null> {
    return (await stat(this.pathOf(key)).catch(() => null))?.size ?? null;
  }

  async delete(key: string | null): Promise<void> {
    if (!key) return;
    await unlink(this.pathOf(key)).catch((e: unknown) => {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    });
  }
}
