import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { AppConfig } from '../config/config.js';
import { LocalDiskStorage } from './asset-storage.js';

describe('LocalDiskStorage', () => {
  it('leaves no partial file when the source fails before the file is even open (an upload over the limit)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sf-storage-'));
    try {
      const storage = new LocalDiskStorage({ storageDir: dir } as AppConfig);
      await storage.onModuleInit();
      // The source fails on its first read, in the tick the pipeline starts: before the open's callback.
      const failing = () =>
        new Readable({
          read() {
            this.destroy(new Error('over the limit'));
          },
        });
      const results = await Promise.allSettled(Array.from({ length: 50 }, () => storage.write(failing())));
      expect(results.every((r) => r.status === 'rejected')).toBe(true);
      expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
      // And a source that succeeds is stored whole, with nothing left in tmp/.
      const key = await storage.write(Readable.from([Buffer.from('hello')]));
      expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
      expect(readdirSync(join(dir, key.slice(0, 2)))).toEqual([key.slice(3)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
