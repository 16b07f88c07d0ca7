/**
 * Embedded PostgreSQL for installs with no DATABASE_URL: PGlite (PostgreSQL compiled to WASM)
 * persisted under DATA_DIR, served over the PostgreSQL wire protocol on 127.0.0.1 by
 * pglite-socket, so the application reaches it with the ordinary `pg` driver, the same
 * migrations and the same SQL as a real server.
 *
 * PGlite allows one owner per data directory. The owner records itself in `<DATA_DIR>/embedded-postgres.json`
 * (pid and port, created exclusively). Another process, such as the admin CLI while the server runs,
 * finds that file, checks that the pid is alive, and connects to the owner's socket instead of
 * opening the files a second time.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

interface LockInfo {
  pid: number;
  port: number;
}

const LOCK_FILE = 'embedded-postgres.json';

function urlFor(port: number): string {
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readLock(dataDir: string): LockInfo | null {
  try {
    const info = JSON.parse(readFileSync(join(dataDir, LOCK_FILE), 'utf8')) as LockInfo;
    return typeof info.pid === 'number' && typeof info.port === 'number' ? info : null;
  } catch {
    return null;
  }
}

/** The URL of an embedded PostgreSQL another live process serves from this data directory, if any. */
export function findRunningEmbedded(dataDir: string): string | null {
  const info = readLock(dataDir);
  if (!info || info.pid === process.pid || !isAlive(info.pid) || info.port === 0) return null;
  return urlFor(info.port);
}

/** Takes the data directory's lock file; false when a live process holds it. Stale locks are removed. */
function tryLock(dataDir: string): boolean {
  const path = join(dataDir, LOCK_FILE);
  for (let i = 0; i < 2; i++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, JSON.stringify({ pid: process.pid, port: 0 }));
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const info = readLock(dataDir);
      if (info && isAlive(info.pid) && info.pid !== process.pid) return false;
      rmSync(path, { force: true });
    }
  }
  return false;
}

export async function startEmbeddedPostgres(dataDir: string, opts: { waitMs?: number; log?: (m: string) => void } = {}): Promise<EmbeddedPostgres> {
  mkdirSync(dataDir, { recursive: true });
  const deadline = Date.now() + (opts.waitMs ?? 30000);
  while (!tryLock(dataDir)) {
    const holder = readLock(dataDir);
    if (Date.now() > deadline) {
      throw new Error(`The embedded database in ${dataDir} is in use by process ${holder?.pid}; stop it or set DATABASE_URL`);
    }
    await sleep(250);
  }
  const lockPath = join(dataDir, LOCK_FILE);
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const { pg_trgm } = await import('@electric-sql/pglite/contrib/pg_trgm');
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
    const db = await PGlite.create({ dataDir: join(dataDir, 'pgdata'), extensions: { pg_trgm } });
    keepExtendedQueriesTogether(db);
    const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: 64 });
    await server.start();
    const conn = server.getServerConn();
    const port = Number(conn.split(':').pop());
    writeLockPort(lockPath, port);
    opts.log?.(`embedded PostgreSQL (PGlite) serving ${join(dataDir, 'pgdata')} on 127.0.0.1:${port}`);
    let stopped = false;
    return {
      url: urlFor(port),
      async stop() {
        if (stopped) return;
        stopped = true;
        await server.stop().catch(() => undefined);
        await db.close().catch(() => undefined);
        rmSync(lockPath, { force: true });
      },
    };
  } catch (e) {
    rmSync(lockPath, { force: true });
    throw e;
  }
}

/** Frontend message types of the extended query protocol that leave a batch open until Sync. */
const EXTENDED = new Set(['P', 'B', 'D', 'E', 'C', 'H'].map((c) => c.charCodeAt(0)));
/** Sync, simple Query and Terminate end a batch. */
const BATCH_END = new Set(['S', 'Q', 'X'].map((c) => c.charCodeAt(0)));

/**
 * All connections to pglite-socket share PGlite's one session, and its queue runs one frontend message
 * at a time, keeping a connection's turn only while a transaction is open. An extended-protocol batch
 * (Parse, Bind, Describe, Execute, Sync) is not a transaction between its messages, so two pooled
 * connections' batches interleave and one binds the other's unnamed statement: "unnamed prepared
 * statement does not exist", "bind message supplies 2 parameters", or, when the shapes agree, another
 * query's rows (electric-sql/pglite#1046, open in 0.2.17). The queue asks `db.isInTransaction()` whether
 * to keep the turn, so the database reports a transaction while a batch is open as well: the
 * connection that sent Parse keeps the session until its Sync.
 */
function keepExtendedQueriesTogether(db: { isInTransaction(): boolean; execProtocolRawStream(message: Uint8Array, options?: object): Promise<void> }): void {
  let batchOpen = false;
  const inTransaction = db.isInTransaction.bind(db);
  const exec = db.execProtocolRawStream.bind(db);
  db.isInTransaction = () => batchOpen || inTransaction();
  db.execProtocolRawStream = (message, options) => {
    const type = message[0];
    if (type !== undefined && EXTENDED.has(type)) batchOpen = true;
    else if (type !== undefined && BATCH_END.has(type)) batchOpen = false;
    return exec(message, options);
  };
}

function writeLockPort(path: string, port: number): void {
  const fd = openSync(path, 'w');
  writeSync(fd, JSON.stringify({ pid: process.pid, port }));
  closeSync(fd);
}
