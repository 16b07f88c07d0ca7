import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** CI=true (or 1), as GitHub Actions, GitLab CI and the project's .ci/run set it. */
export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.CI === 'true' || env.CI === '1';
}

/**
 * The reviewed snapshot a value must equal, read from `file`. Outside CI, a missing file (or any
 * file, with UPDATE_SNAPSHOTS=1) is first written from `actual`, so a developer can review the diff
 * and commit it. In CI nothing is ever written: a missing snapshot throws, and a different one is
 * returned as it is, so the caller's comparison fails.
 */
export function reviewedSnapshot<T>(file: string, actual: T, env: NodeJS.ProcessEnv = process.env): T {
  const exists = existsSync(file);
  if (inCi(env)) {
    if (!exists) throw new Error(`${file} is missing: the reviewed snapshot must be committed (generate it outside CI with UPDATE_SNAPSHOTS=1 and review it)`);
  } else if (!exists || env.UPDATE_SNAPSHOTS === '1') {
    writeFileSync(file, JSON.stringify(actual, null, 2) + '\n');
  }
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}
