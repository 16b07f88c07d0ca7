import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '../common/errors.js';
import { SNIFF_BYTES } from './asset-file.js';
import { UploadInspector } from './upload-inspector.js';

async function run(chunks: Buffer[], max: number) {
  const inspector = new UploadInspector(max);
  let written = 0;
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      written += chunk.length;
      cb();
    },
  });
  await pipeline(Readable.from(chunks), inspector, sink);
  return { inspector, written };
}

describe('UploadInspector', () => {
  it('passes the data through, counting, hashing and keeping only the head', async () => {
    const chunks = Array.from({ length: 10 }, (_, i) => Buffer.alloc(64 * 1024, i));
    const { inspector, written } = await run(chunks, 10 * 64 * 1024);
    expect(written).toBe(10 * 64 * 1024);
    expect(inspector.size).toBe(10 * 64 * 1024);
    expect(inspector.digest()).toBe(createHash('sha256').update(Buffer.concat(chunks)).digest('hex'));
    const sample = inspector.sample();
    expect(sample.length).toBe(SNIFF_BYTES);
    expect(sample.equals(Buffer.concat(chunks).subarray(0, SNIFF_BYTES))).toBe(true);
  });

  it('fails with payload_too_large as soon as the limit is passed, not at the end', async () => {
    let produced = 0;
    const endless = new Readable({
      read() {
        produced += 1000;
        this.push(Buffer.alloc(1000));
      },
    });
    const inspector = new UploadInspector(5000);
    const err = await pipeline(endless, inspector, new Writable({ write: (_c, _e, cb) => cb() })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('payload_too_large');
    expect((err as AppError).status).toBe(413);
    expect(produced).toBeLessThan(100_000);
  });

  it('accepts a file of exactly the limit', async () => {
    const { inspector } = await run([Buffer.alloc(3000), Buffer.alloc(2000)], 5000);
    expect(inspector.size).toBe(5000);
  });
});
