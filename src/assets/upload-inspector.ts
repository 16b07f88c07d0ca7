import { createHash, Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { AppError } from '../common/errors.js';
import { SNIFF_BYTES } from './asset-file.js';

export const payloadTooLarge = (maxBytes: number) =>
  new AppError('payload_too_large', `The file is larger than the limit of ${maxBytes} bytes (ASSET_MAX_BYTES)`);

/**
 * Passes an upload through while counting it against the size limit (failing the stream as soon
 * as it is exceeded), hashing it, and keeping only its first bytes for type detection.
 */
export class UploadInspector extends Transform {
  size = 0;
  private readonly hash: Hash = createHash('sha256');
  private readonly head: Buffer[] = [];
  private headLength = 0;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      cb(payloadTooLarge(this.maxBytes));
      return;
    }
    this.hash.update(chunk);
    if (this.headLength < SNIFF_BYTES) {
      const part = chunk.subarray(0, SNIFF_BYTES - this.headLength);
      this.head.push(Buffer.from(part));
      this.headLength += part.length;
    }
    cb(null, chunk);
  }

  sample(): Buffer {
    return Buffer.concat(this.head, this.headLength);
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}
