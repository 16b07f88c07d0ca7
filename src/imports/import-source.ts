import { parse } from 'csv-parse';
import { createInterface } from 'node:readline';
import { AppError } from '../common/errors.js';
import { detectDelimiter } from './import.rules.js';
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
          const record = JSON.parse(line) as Record<string, unknown>;
          yield header.map((c) => record[c]);
        }
      } finally {
        lines.close();
      }
    }
    return { header, rows: rows() };
  }
  const delimiter = detectDelimiter(await firstLine(files, key));
  const input = files.open(key);
  const parser = input.pipe(parse({ bom: true, delimiter, relax_column_count: true, skip_empty_lines: true, max_record_size: MAX_RECORD_BYTES, trim: false }));
  input.on('error', (e) => parser.destroy(e));
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

/** A CSV syntax error (unclosed quote, record too long) as a 400-style message naming the line. */
function csvError(e: unknown): Error {
  const err = e as { code?: string; lines?: number; message?: string };
  if (typeof err.code === 'string' && err.code.startsWith('CSV_')) {
    return new AppError('validation_failed', `The file is not valid CSV near line ${err.lines ?? '?'}: ${err.message ?? err.code}`, [
      { field: 'file', message: err.message ?? err.code },
    ]);
  }
  return e instanceof Error ? e : new Error(String(e));
}
