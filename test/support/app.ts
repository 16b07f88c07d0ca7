/**
 * End-to-end harness: starts the real, built application (node dist/main.js) as a child process
 * against the machine's PostgreSQL (a fresh database per app) and Redis (a fresh key prefix), and
 * talks to it over HTTP. Tokens are made with the real admin CLI.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { Redis } from 'ioredis';
import request from 'supertest';

const execFileAsync = promisify(execFile);
export const ROOT = resolve(import.meta.dirname, '..', '..');
/** NODE_OPTIONS of the deployed image (Dockerfile): suites that measure memory run the app as deployed. */
export const DEPLOYED_NODE_OPTIONS = (/^ENV NODE_OPTIONS="([^"]*)"/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')) ?? [])[1] ?? '';
export const ADMIN_DB_URL = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

export function dbUrl(name: string): string {
  const u = new URL(ADMIN_DB_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function createDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `sf_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_DB_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return {
    name,
    url: dbUrl(name),
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_DB_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await c.end();
    },
  };
}

export interface StartOptions {
  /** Extra environment for the app. */
  env?: Record<string, string>;
  /** Use the embedded PostgreSQL and no Redis (the README's zero-dependency mode). */
  embedded?: boolean;
  /** Without Redis, but with the machine's PostgreSQL. */
  noRedis?: boolean;
  /** Share another app's database and Redis prefix (a second instance). */
  shareWith?: TestApp;
  role?: 'api' | 'worker' | 'all';
  /** Use this PostgreSQL (e.g. a private server of a fault suite) instead of a fresh database. */
  databaseUrl?: string;
  /** Use this Redis instead of the machine's (with a fresh key prefix). */
  redisUrl?: string;
}

export interface TestApp {
  url: string;
  port: number;
  env: Record<string, string>;
  databaseUrl: string | null;
  process: ChildProcess;
  logs: string[];
  /** supertest bound to the app's address. */
  http: ReturnType<typeof request>;
  /** Runs the admin CLI with the app's environment; resolves with stdout. */
  cli(args: string[]): Promise<{ stdout: string; stderr: string; code: number }>;
  /** Creates a token with the CLI and returns its secret. */
  token(permissions?: string, opts?: { user?: string; plan?: string; expires?: string; name?: string }): Promise<string>;
  /** A pg client on the app's database (for assertions), closed by stop(). */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Sends a signal and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<number | null>;
  stop(): Promise<void>;
}

async function waitHealthy(url: string, proc: ChildProcess, logs: string[], timeoutMs = 60000, heartbeat?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`app exited with ${proc.exitCode}:\n${logs.join('').slice(-4000)}`);
    // A worker has no HTTP server: it is up once it writes its heartbeat file.
    if (heartbeat) {
      if (existsSync(heartbeat)) return;
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`app did not become healthy:\n${logs.join('').slice(-4000)}`);
}

export async function startApp(opts: StartOptions = {}): Promise<TestApp> {
  const port = await freePort();
  let db: Awaited<ReturnType<typeof createDatabase>> | null = null;
  let dataDir: string | null = null;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    NODE_ENV: 'test',
    PORT: String(port),
    HOST: '127.0.0.1',
    BASE_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: 'warn',
    APP_ROLE: opts.role ?? 'all',
  };
  if (opts.shareWith) {
    for (const k of ['DATABASE_URL', 'REDIS_URL', 'REDIS_PREFIX', 'DATA_DIR', 'STORAGE_DIR']) {
      if (opts.shareWith.env[k] !== undefined) env[k] = opts.shareWith.env[k];
    }
  } else if (opts.databaseUrl) {
    env.DATABASE_URL = opts.databaseUrl;
    dataDir = mkdtempSync(join(tmpdir(), 'sf-data-'));
    env.DATA_DIR = dataDir;
    env.STORAGE_DIR = join(dataDir, 'storage');
    if (opts.redisUrl) {
      env.REDIS_URL = opts.redisUrl;
      env.REDIS_PREFIX = `t${randomBytes(5).toString('hex')}`;
    }
  } else if (opts.embedded) {
    dataDir = mkdtempSync(join(tmpdir(), 'sf-embedded-'));
    env.DATA_DIR = dataDir;
    env.STORAGE_DIR = join(dataDir, 'storage');
  } else {
    db = await createDatabase();
    env.DATABASE_URL = db.url;
    dataDir = mkdtempSync(join(tmpdir(), 'sf-data-'));
    env.DATA_DIR = dataDir;
    env.STORAGE_DIR = join(dataDir, 'storage');
    if (!opts.noRedis) {
      env.REDIS_URL = TEST_REDIS_URL;
      env.REDIS_PREFIX = `t${randomBytes(5).toString('hex')}`;
    }
  }
  const heartbeat = env.APP_ROLE === 'worker' ? join(tmpdir(), `sf-worker-${randomBytes(6).toString('hex')}.beat`) : undefined;
  if (heartbeat) env.HEARTBEAT_FILE = heartbeat;
  Object.assign(env, opts.env ?? {});
  const logs: string[] = [];
  const proc = spawn(process.execPath, ['dist/main.js'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d: Buffer) => logs.push(d.toString()));
  proc.stderr.on('data', (d: Buffer) => logs.push(d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const databaseUrl = env.DATABASE_URL ?? null;
  let client: pg.Client | null = null;

  const kill = (signal: NodeJS.Signals = 'SIGTERM') =>
    new Promise<number | null>((res) => {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        res(proc.exitCode);
        return;
      }
      proc.once('exit', (code) => res(code));
      proc.kill(signal);
    });

  const app: TestApp = {
    url,
    port,
    env,
    databaseUrl,
    process: proc,
    logs,
    http: request(url),
    async cli(args) {
      try {
        const { stdout, stderr } = await execFileAsync(process.execPath, ['dist/cli.js', ...args], { cwd: ROOT, env });
        return { stdout, stderr, code: 0 };
      } catch (e) {
        const err = e as { stdout?: string; stderr?: string; code?: number };
        return { stdout: err.stdout ?? '', stderr: err.stderr ?? '', code: err.code ?? 1 };
      }
    },
    async token(permissions = '*', o = {}) {
      const args = ['token:create', '--user', o.user ?? 'admin@example.com', '--name', o.name ?? 'test', '--permissions', permissions];
      if (o.plan) args.push('--plan', o.plan);
      if (o.expires) args.push('--expires', o.expires);
      const r = await app.cli(args);
      if (r.code !== 0) throw new Error(`token:create failed: ${r.stderr}`);
      return r.stdout.trim().split('\n').pop()!;
    },
    async sql(text, params = []) {
      if (!databaseUrl) throw new Error('sql() needs DATABASE_URL');
      if (!client) {
        client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
      }
      return (await client.query(text, params)).rows;
    },
    kill,
    async stop() {
      await kill('SIGTERM');
      if (heartbeat) rmSync(heartbeat, { force: true });
      if (client) await client.end().catch(() => undefined);
      if (opts.shareWith) return;
      if (db) await db.drop();
      if (env.REDIS_PREFIX && !opts.redisUrl) await clearRedisPrefix(env.REDIS_PREFIX);
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitHealthy(url, proc, logs, 60000, heartbeat);
  } catch (e) {
    await app.stop();
    throw e;
  }
  return app;
}

export async function clearRedisPrefix(prefix: string): Promise<void> {
  const r = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await r.connect();
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await r.del(...keys);
    } while (cursor !== '0');
  } catch {
    /* Redis gone: nothing to clean */
  } finally {
    r.disconnect();
  }
}

/** Asserts the error shape (docs/decisions/errors.md) and returns the error object. */
export function expectError(res: { status: number; body: unknown }, status: number, code: string) {
  const body = res.body as { error?: { code?: string; status?: number; message?: string } };
  if (res.status !== status || body?.error?.code !== code || body.error.status !== status || typeof body.error.message !== 'string') {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  return body.error as { code: string; status: number; message: string; details?: { field: string; message: string }[] };
}

/**
 * Suites whose data and assertions both depend on "today" (UTC) wait out the last minutes of a day,
 * so that seeding and checking happen on the same date.
 */
export async function awayFromMidnight(marginMs = 180_000): Promise<void> {
  const toMidnight = 86_400_000 - (Date.now() % 86_400_000);
  if (toMidnight < marginMs) await new Promise((r) => setTimeout(r, toMidnight + 2000));
}
