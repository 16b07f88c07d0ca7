import { describe, expect, it } from '@jest/globals';
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '../common/errors.js';
import { openSource } from './import-source.js';
import type { JobFiles } from './job-files.js';

/** A stored file on disk as the import reads it (small chunks: characters and records split between chunks). */
async function withFile<T>(content: string | Buffer, run: (files: JobFiles) => Promise<T>, chunkBytes = 7): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'sf-source-'));
  try {
    writeFileSync(join(dir, 'rows'), content);
    const files = { open: (_key: string, end?: number) => createReadStream(join(dir, 'rows'), { end, highWaterMark: chunkBytes }) } as unknown as JobFiles;
    return await run(files);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every row of a CSV file, or the error reading it threw. */
async function readCsv(content: string | Buffer): Promise<{ header?: string[]; rows?: unknown[][]; error?: unknown }> {
  const chunkBytes = content.length > 4096 ? 64 * 1024 : 7;
  return withFile(
    content,
    async (files) => {
      try {
        const source = await openSource(files, 'rows', 'csv', null);
        const rows: unknown[][] = [];
        for await (const row of source.rows) rows.push(row);
        return { header: source.header, rows };
      } catch (error) {
        return { error };
      }
    },
    chunkBytes,
  );
}

describe('openSource (CSV)', () => {
  it('reads UTF-8 text whose characters are split between chunks', async () => {
    const r = await readCsv('name,city\nZoë,Zürich 日本\n"Å, ""q""",😀\n');
    expect(r.error).toBeUndefined();
    expect(r.header).toEqual(['name', 'city']);
    expect(r.rows).toEqual([
      ['Zoë', 'Zürich 日本'],
      ['Å, "q"', '😀'],
    ]);
  });

  // Every error csv-parse raises while reading a file is the file's problem: a 400-style AppError naming the
  // line, which ends the import at once (a plain Error would be retried as an internal failure).
  it.each([
    ['a stray quote inside a cell (INVALID_OPENING_QUOTE)', 'name,email\nJo "x",jo@x.test\n', /near line 2: Invalid Opening Quote/],
    ['a quote not closed (CSV_QUOTE_NOT_CLOSED)', 'name,email\n"Jo,jo@x.test\n', /near line \d+: Quote Not Closed/],
    ['text after a closing quote (CSV_INVALID_CLOSING_QUOTE)', 'name,email\n"Jo"x,jo@x.test\n', /near line 2: Invalid Closing Quote/],
    ['a record over 1 MiB (CSV_MAX_RECORD_SIZE)', `name,email\n${'x'.repeat(1024 * 1024 + 10)},a\n`, /near line 2: Max Record Size/],
    ['a stray quote in the header', 'na"me,email\nJo,jo@x.test\n', /near line 1: Invalid Opening Quote/],
  ])('%s is a file error', async (_what, content, message) => {
    const { error } = await readCsv(content);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).status).toBe(400);
    expect((error as AppError).message).toMatch(/^The file is not valid CSV near line/);
    expect((error as AppError).message).toMatch(message);
  });

  it.each([
    ['a NUL byte (a binary file)', Buffer.concat([Buffer.from('name,email\nJo,jo'), Buffer.from([0]), Buffer.from('@x.test\n')]), /NUL byte at byte 16/],
    ['a PNG', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52]), /not UTF-8|NUL byte/],
    ['Latin-1 text', Buffer.from('name,city\nJo,Z\xfcrich\n', 'latin1'), /not UTF-8/],
    ['a truncated UTF-8 character at the end', Buffer.concat([Buffer.from('name\nZo'), Buffer.from([0xc3])]), /ends inside a UTF-8 character/],
  ])('%s is refused as not UTF-8 text', async (_what, content, message) => {
    const { error } = await readCsv(content);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).status).toBe(400);
    expect((error as AppError).message).toMatch(/^The file is not a UTF-8 text \(CSV\) file/);
    expect((error as AppError).message).toMatch(message);
  });
});

describe('openSource (JSON Lines)', () => {
  // The worker awaits the database between opening a source and reading its rows; the rows must all be
  // there however long that takes (readline drops lines emitted before its iterator exists).
  it('reads every row even when the reading starts later than the opening', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sf-source-'));
    try {
      writeFileSync(join(dir, 'rows'), '{"name":"Hal","email":"hal@x.test"}\n{"name":"Ida"}\n');
      const files = { open: () => createReadStream(join(dir, 'rows')) } as unknown as JobFiles;
      const source = await openSource(files, 'rows', 'jsonl', ['name', 'email']);
      await sleep(50);
      const rows: unknown[][] = [];
      for await (const row of source.rows) rows.push(row);
      expect(rows).toEqual([
        ['Hal', 'hal@x.test'],
        ['Ida', undefined],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads a row's missing key as missing, never as a member of Object.prototype", async () => {
    const rows = await withFile('{"name":"Hal","constructor":"x"}\n{"name":"Ida"}\n', async (files) => {
      const source = await openSource(files, 'rows', 'jsonl', ['name', 'constructor', 'toString']);
      const out: unknown[][] = [];
      for await (const row of source.rows) out.push(row);
      return out;
    });
    expect(rows).toEqual([
      ['Hal', 'x', undefined],
      ['Ida', undefined, undefined],
    ]);
  });
});
