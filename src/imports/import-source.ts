import { CsvError, parse } from 'csv-parse';
import { isUtf8 } from 'node:buffer';
import { createInterface } from 'node:readline';
import { Transform, type TransformCallback } from 'node:stream';
import { AppError } from '../common/errors.js';
import { detectDelimiter, ownValue } from './import.rules.js';
import type { JobFiles } from './job-files.js';

/** Bytes read to find the header line (and the delimiter). */
const SNIFF_BYTES = 64 * 1024;
/** A longer CSV record is refused (bounds the memory one row may take). */
const MAX_RECORD_BYTES = 1024 * 1024;

/** A stored import file opened for reading: its header, then its data rows as cells in header order. */
export interface ImportSource {
  header: string[];
  rows: AsyncGenerator<unknown[]>;
}

async function firstLine(files: JobFiles, key: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of files.open(key, SNIFF_BYTES - 1)) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/^\uFEFF/, '');
  const end = text.search(/\r?\n/);
  return end === -1 ? text : text.slice(0, end);
}

/**
 * Opens a stored CSV (UTF-8, with or without BOM; `,` `;` or tab, detected from the header line) or
 * JSON Lines file (the rows of a JSON body; `columns` are their keys) as a stream of rows. Nothing
 * but the current record is held in memory.
 */
export async function openSource(files: JobFiles, key: string, format: 'csv' | 'jsonl', columns: string[] | null): Promise<ImportSource> {
  if (format === 'jsonl') {
    const header = columns ?? [];
    // The file is opened when the rows are first read, not before: readline starts reading at once, and
    // lines it emits before the loop below attaches its iterator are lost (a small file then reads as
    // empty, or the loop waits for a 'close' that was already emitted).
    async function* rows(): AsyncGenerator<unknown[]> {
      const lines = createInterface({ input: files.open(key), crlfDelay: Infinity });
      try {
        for await (const line of lines) {
          if (line === '') continue;
          const record = JSON.parse(line) as unknown;
          yield header.map((c) => ownValue(record, c));
        }
      } finally {
        lines.close();
      }
    }
    return { header, rows: rows() };
  }
  const delimiter = detectDelimiter(await firstLine(files, key));
  const input = files.open(key);
  const text = new TextCheck();
  const parser = input
    .pipe(text)
    .pipe(parse({ bom: true, delimiter, relax_column_count: true, skip_empty_lines: true, max_record_size: MAX_RECORD_BYTES, trim: false }));
  input.on('error', (e) => parser.destroy(e));
  text.on('error', (e) => parser.destroy(e));
  const iterator = parser[Symbol.asyncIterator]() as AsyncIterator<string[]>;
  const first = await iterator.next().catch((e: unknown) => {
    throw csvError(e);
  });
  if (first.done) {
    input.destroy();
    throw new AppError('validation_failed', 'The file has no header line', [{ field: 'file', message: 'is empty' }]);
  }
  const header = first.value.map((h) => h.trim());
  async function* rows(): AsyncGenerator<unknown[]> {
    try {
      for (;;) {
        const next = await iterator.next().catch((e: unknown) => {
          throw csvError(e);
        });
        if (next.done) return;
        yield next.value;
      }
    } finally {
      parser.destroy();
      input.destroy();
    }
  }
  return { header, rows: rows() };
}

/** csv-parse's own errors: a CsvError (codes `CSV_*`, and `INVALID_OPENING_QUOTE` without the prefix), or its buffer's `INVALID_BUFFER_STATE`. */
function isParserError(e: unknown): e is Error & { code?: string; lines?: number } {
  return e instanceof CsvError || (e instanceof Error && e.message === 'INVALID_BUFFER_STATE');
}

/**
 * An error met while reading the file as the import's answer: what the parser refused (a stray or
 * unclosed quote, a record too long...) and a file that is not UTF-8 text are problems of the file,
 * a 400-style error naming the line that ends the import at once; anything else (the disk) is
 * left as it is, for the job to retry.
 */
function csvError(e: unknown): Error {
  if (e instanceof AppError) return e;
  if (isParserError(e)) {
    const reason = e.message || e.code || 'unreadable';
    return new AppError('validation_failed', `The file is not valid CSV near line ${e.lines ?? '?'}: ${reason}`, [{ field: 'file', message: reason }]);
  }
  return e instanceof Error ? e : new Error(String(e));
}

/** The error of a file that is not UTF-8 text (a binary file, or text in another encoding). */
export function notTextError(reason: string): AppError {
  return new AppError('validation_failed', `The file is not a UTF-8 text (CSV) file: ${reason}`, [{ field: 'file', message: `is not UTF-8 text: ${reason}` }]);
}

/** The bytes at the end of `buf` that begin a UTF-8 character the buffer does not hold whole (0 to 3). */
function incompleteTail(buf: Buffer): number {
  for (let i = buf.length - 1; i >= Math.max(0, buf.length - 4); i--) {
    const b = buf[i];
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back for the lead byte
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return i + need > buf.length ? buf.length - i : 0;
  }
  return 0;
}

/**
 * Passes a file through unchanged while checking that it is UTF-8 text: a NUL byte (which no text
 * file holds, and PostgreSQL refuses) or a byte sequence that is not UTF-8 fails the stream with
 * notTextError, naming the byte offset. A character split between two chunks is checked whole.
 */
export class TextCheck extends Transform {
  private offset = 0;
  private carry: Buffer = Buffer.alloc(0);

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    const buf = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    const start = this.offset - this.carry.length;
    const nul = buf.indexOf(0);
    if (nul !== -1) {
      cb(notTextError(`it holds a NUL byte at byte ${start + nul} (a binary file?)`));
      return;
    }
    const whole = buf.length - incompleteTail(buf);
    if (!isUtf8(buf.subarray(0, whole))) {
      cb(notTextError(`a byte sequence after byte ${start} is not UTF-8 (save the file as UTF-8 CSV)`));
      return;
    }
    this.carry = Buffer.from(buf.subarray(whole));
    this.offset += chunk.length;
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    if (this.carry.length) cb(notTextError(`it ends inside a UTF-8 character at byte ${this.offset - this.carry.length}`));
    else cb();
  }
}
