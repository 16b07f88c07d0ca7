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

/** The environment of an app the benches start: the database, the port, quiet logs, and `extra`. */
export function appEnv(databaseUrl, port, extra = {}) {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** Deletes a run's Redis keys (those under `prefix:`), so a bench on the machine's Redis leaves nothing behind. */
export async function deleteRedisKeys(url, prefix) {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
}
