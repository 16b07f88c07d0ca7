#!/usr/bin/env node
/**
 * `npm run lint`: ESLint (typescript-eslint strict type-checked, eslint.config.js), Prettier's check (.prettierrc)
 * and the import boundaries (dependency-cruiser, .dependency-cruiser.cjs). Runs all three even when one fails,
 * so one run shows every problem, then exits non-zero if any failed.
 * Fixing: `npm run lint:fix` applies ESLint's and Prettier's automatic fixes; boundaries are fixed by hand.
 */
import { spawnSync } from 'node:child_process';

const checks = ['lint:eslint', 'lint:format', 'lint:boundaries'];
const failed = [];
for (const check of checks) {
  console.log(`\n> npm run ${check}`);
  const r = spawnSync('npm', ['run', '--silent', check], { stdio: 'inherit' });
  if (r.status !== 0) failed.push(check);
}
console.log(failed.length ? `\nlint: failed (${failed.join(', ')})` : '\nlint: all checks passed');
process.exit(failed.length ? 1 : 0);
