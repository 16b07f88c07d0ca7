import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reviewedSnapshot } from './snapshot.js';

describe('reviewedSnapshot (the endpoint-permission snapshot test)', () => {
  let dir: string;
  let file: string;
  const actual = [{ method: 'GET', path: '/a', permission: 'contacts:read' }];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'snapshot-'));
    file = join(dir, 'endpoints.snapshot.json');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('in CI, a missing snapshot fails and is not written', () => {
    expect(() => reviewedSnapshot(file, actual, { CI: 'true' })).toThrow(/missing/);
    expect(existsSync(file)).toBe(false);
    expect(() => reviewedSnapshot(file, actual, { CI: 'true', UPDATE_SNAPSHOTS: '1' })).toThrow(/missing/);
    expect(existsSync(file)).toBe(false);
  });

  it('in CI, a different snapshot is returned unchanged (the comparison fails), even with UPDATE_SNAPSHOTS=1', () => {
    writeFileSync(file, JSON.stringify([{ method: 'GET', path: '/a', permission: 'public' }]));
    expect(reviewedSnapshot(file, actual, { CI: 'true', UPDATE_SNAPSHOTS: '1' })).not.toEqual(actual);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual([{ method: 'GET', path: '/a', permission: 'public' }]);
  });

  it('in CI, an equal snapshot passes', () => {
    writeFileSync(file, JSON.stringify(actual));
    expect(reviewedSnapshot(file, actual, { CI: 'true' })).toEqual(actual);
  });

  it('outside CI, writes a missing snapshot, and rewrites one only with UPDATE_SNAPSHOTS=1', () => {
    expect(reviewedSnapshot(file, actual, {})).toEqual(actual);
    expect(existsSync(file)).toBe(true);
    const changed = [{ method: 'GET', path: '/a', permission: '*' }];
    expect(reviewedSnapshot(file, changed, {})).toEqual(actual);
    expect(reviewedSnapshot(file, changed, { UPDATE_SNAPSHOTS: '1' })).toEqual(changed);
  });
});
