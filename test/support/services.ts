/**
 * Private PostgreSQL and Redis servers for the fault suites: each suite starts its own on a free
 * port under a temporary directory, and stops, kills or restarts them at will, never touching the
 * machine's shared services.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createDatabase, freePort, startApp, type TestApp } from './app.js';
import { adminToken } from './fixtures.js';

function pgBin(name: string): string {
  const versions = readdirSync('/usr/lib/postgresql').sort();
  return join('/usr/lib/postgresql', versions[versions.length - 1], 'bin', name);
}

/** initdb refuses to run as root: run the server's tools as the postgres user when we are root. */
function asPostgres(cmd: string, args: string[]): { cmd: string; args: string[] } {
  return process.getuid?.() === 0 ? { cmd: 'runuser', args: ['-u', 'postgres', '--', cmd, ...args] } : { cmd, args };
}

export interface PrivatePostgres {
  port: number;
  url: string;
  stop(mode?: 'fast' | 'immediate'): void;
  start(): void;
  destroy(): void;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'sf-pg-'));
  const data = join(dir, 'data');
  if (process.getuid?.() === 0)
    chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
  const port = await freePort();
  const init = asPostgres(pgBin('initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  execFileSync(init.cmd, init.args, { stdio: 'ignore' });
  const ctl = (args: string[]) => {
    const c = asPostgres(pgBin('pg_ctl'), args);
    execFileSync(c.cmd, c.args, { stdio: 'ignore' });
  };
  const start = () =>
    ctl([
      '-D',
      data,
      '-l',
      join(dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`,
      'start',
    ]);
  start();
  let running = true;
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop(mode = 'fast') {
      if (!running) return;
      ctl(['-D', data, '-m', mode, '-w', 'stop']);
      running = false;
    },
    start() {
      if (running) return;
      start();
      running = true;
    },
    destroy() {
      try {
        if (running) ctl(['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* already down */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivateRedis {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'sf-redis-'));
  const port = await freePort();
  let proc: ChildProcess | null = null;
  const start = async () => {
    // Append-only, so queued jobs survive a restart as they would in production.
    proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'],
      {
        stdio: 'ignore',
      },
    );
    const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    const deadline = Date.now() + 10000;
    for (;;) {
      try {
        await client.connect();
        await client.ping();
        break;
      } catch {
        if (Date.now() > deadline) throw new Error('private redis did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    client.disconnect();
  };
  const stop = async () => {
    const p = proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((res) => {
      p.once('exit', () => res());
      p.kill('SIGTERM');
    });
    proc = null;
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An API process and a worker process sharing a private Redis and a database of their own, with the admin's token. */
export interface SplitDeployment {
  redis: PrivateRedis;
  db: Awaited<ReturnType<typeof createDatabase>>;
  api: TestApp;
  worker: TestApp;
  auth: string;
}

/** Starts a SplitDeployment (the fault suites' set-up) with `env` for both processes. */
export async function startSplitDeployment(env: Record<string, string>): Promise<SplitDeployment> {
  const redis = await startPrivateRedis();
  const db = await createDatabase();
  const api = await startApp({ role: 'api', databaseUrl: db.url, redisUrl: redis.url, env });
  const worker = await startApp({ role: 'worker', shareWith: api, env });
  return { redis, db, api, worker, auth: await adminToken(api) };
}

/** Stops what startSplitDeployment started (each part that was started), the worker first: the suite may have replaced it. */
export async function stopSplitDeployment(d: Partial<Omit<SplitDeployment, 'worker'>> & { worker?: TestApp | null }): Promise<void> {
  await d.worker?.stop();
  await d.api?.stop();
  await d.redis?.destroy();
  await d.db?.drop();
}
