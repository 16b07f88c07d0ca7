import { describe, expect, it } from '@jest/globals';
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSource } from './import-source.js';
import type { JobFiles } from './job-files.js';

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
});
