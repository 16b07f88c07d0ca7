/**
 * What every benchmark script shares: the project root, the database URLs, a free port, the Node
 * options the image deploys with, and an API token made with the build's own CLI.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ADMIN_URL = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** Kept equal to NODE_OPTIONS in the Dockerfile: the benchmarks run the app as it is deployed. */
export const DEPLOYED_NODE_OPTIONS = (/^ENV NODE_OPTIONS="([^"]*)"/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')) ?? [])[1] ?? '';

/** The URL of database `name` on the server of `adminUrl`. */
export function databaseUrl(name, adminUrl = ADMIN_URL) {
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A TCP port free on 127.0.0.1 at the time of asking. */
export function freePort() {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** A token with every permission on the enterprise plan, made by the CLI of the build in `cwd` (default this checkout). */
export function createToken(env, name, cwd = ROOT) {
  return execFileSync(
    process.execPath,
    ['dist/cli.js', 'token:create', '--user', 'bench@example.com', '--name', name, '--permissions', '*', '--plan', 'enterprise'],
    { cwd, env },
  )
    .toString()
    .trim()
    .split('\n')
    .pop();
}
