import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.js';

describe('embedded PostgreSQL over pglite-socket', () => {
  let dir: string;
  let db: EmbeddedPostgres;
  let pool: pg.Pool;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sf-embedded-'));
    db = await startEmbeddedPostgres(dir);
    pool = new pg.Pool({ connectionString: db.url, max: 8 });
  }, 60000);
  afterAll(async () => {
    await pool?.end();
    await db?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  // Parameterised queries of different shapes from several pooled connections at once: each answer must
  // be its own query's. Without the batch affinity one connection's Bind met another's unnamed statement
  // ("bind message supplies 2 parameters, but prepared statement "" requires 1") or read its rows.
  it('keeps each connection’s extended-protocol batch together', async () => {
    const one = (i: number) => pool.query<{ v: string }>('SELECT $1::text AS v', [`one-${i}`]).then((r) => [`one-${i}`, r.rows[0]?.v]);
    const two = (i: number) => pool.query<{ v: string }>('SELECT $1::text || $2::text AS v', [`two-${i}`, '!']).then((r) => [`two-${i}!`, r.rows[0]?.v]);
    const three = (i: number) =>
      pool.query<{ v: string }>('SELECT $3::text || $2::text || $1::text AS v', ['c', 'b', `three-${i}`]).then((r) => [`three-${i}bc`, r.rows[0]?.v]);
    const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => [one, two, three][i % 3](i)));
    for (const [expected, got] of answers) expect(got).toBe(expected);
  }, 60000);

  // Deterministic form of the same race: one connection sends Parse and waits; another connection's whole
  // query must not run in between, or the Bind that follows meets the other statement.
  it('does not let another connection between a Parse and its Bind', async () => {
    // pg's Connection speaks the protocol message by message (its typings leave out connect and startup).
    const conn = new pg.Connection() as pg.Connection & {
      connect(port: number, host: string): void;
      startup(config: { user: string; database: string }): void;
      parse(query: { text: string }, more: boolean): void;
    };
    const port = Number(new URL(db.url).port);
    const connected = once(conn, 'connect');
    conn.connect(port, '127.0.0.1');
    await connected;
    const ready = () => once(conn, 'readyForQuery');
    let r = ready();
    conn.startup({ user: 'postgres', database: 'postgres' });
    await r;
    const rows: unknown[] = [];
    const errors: unknown[] = [];
    conn.on('dataRow', (m: { fields: unknown[] }) => rows.push(m.fields[0]));
    conn.on('errorMessage', (e: Error) => errors.push(e.message));
    const parsed = once(conn, 'parseComplete');
    conn.parse({ text: 'SELECT $1::text AS v' }, false);
    conn.flush();
    await parsed;
    const other = pool.query<{ v: number }>('SELECT $1::int + $2::int AS v', [1, 2]);
    await sleep(100);
    r = ready();
    conn.bind({ values: ['mine'] }, false);
    conn.execute({}, false);
    conn.sync();
    await r;
    conn.end();
    expect(errors).toEqual([]);
    expect(rows).toEqual(['mine']);
    expect((await other).rows[0]?.v).toBe(3);
  });

  it('keeps a transaction on its connection while other connections query', async () => {
    await pool.query('CREATE TABLE t (id int PRIMARY KEY)');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO t VALUES ($1)', [1]);
      const outside = pool.query<{ n: string }>('SELECT count(*)::text AS n FROM t WHERE id = $1', [1]);
      await client.query('ROLLBACK');
      expect((await outside).rows[0]?.n).toBe('0');
    } finally {
      client.release();
    }
  });
});
