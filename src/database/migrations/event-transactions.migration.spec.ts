import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { createDatabase } from '../../../test/support/app.js';
import { EventTransactions1763700002640 } from './1763700002640-event-transactions.js';
import { MIGRATIONS } from './index.js';

/**
 * The feed's re-keying keeps every existing event's number: a reader whose cursor was taken before
 * the migration continues after it without a gap or a repeat, and new events follow the old ones.
 */
describe('migration EventTransactions: existing events keep their numbers', () => {
  let db: Awaited<ReturnType<typeof createDatabase>>;
  let client: pg.Client;
  const migrate = async (upTo: number) => {
    const ds = new DataSource({ type: 'postgres', url: db.url, migrations: MIGRATIONS.slice(0, upTo), migrationsTableName: 'migrations', logging: false });
    await ds.initialize();
    await ds.runMigrations({ transaction: 'each' });
    await ds.destroy();
  };
  beforeAll(async () => {
    db = await createDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await db.drop();
  });

  it('numbers what waited, keeps the numbers given, and carries on from them', async () => {
    const at = MIGRATIONS.indexOf(EventTransactions1763700002640);
    expect(at).toBeGreaterThan(0);
    await migrate(at);
    // The old scheme: three events numbered (one of them pruned since), two still waiting.
    await client.query(
      `INSERT INTO events (type, data, sequence) VALUES ('contact.created', '{"id":1}', 1), ('contact.updated', '{"id":1}', 2), ('contact.created', '{"id":2}', 3)`,
    );
    await client.query(`UPDATE event_feed_state SET last_sequence = 3`);
    await client.query(`DELETE FROM events WHERE sequence = 1`);
    await client.query(`UPDATE event_feed_state SET pruned_through = 1`);
    await client.query(`INSERT INTO events (type, data) VALUES ('deal.created', '{"id":5}'), ('deal.updated', '{"id":5}')`);
    await migrate(MIGRATIONS.length);

    const feed = async (after: number) =>
      (
        await client.query<{ type: string; sequence: string }>(
          `SELECT type, n::text AS sequence FROM (
             SELECT e.type, t.first_sequence + row_number() OVER (PARTITION BY e.tx ORDER BY e.insert_order) - 1 AS n
               FROM events e JOIN event_transactions t ON t.tx = e.tx) x ORDER BY n`,
        )
      ).rows.filter((r) => Number(r.sequence) > after);
    expect(await feed(0)).toEqual([
      { type: 'contact.updated', sequence: '2' },
      { type: 'contact.created', sequence: '3' },
      { type: 'deal.created', sequence: '4' },
      { type: 'deal.updated', sequence: '5' },
    ]);
    const state = await client.query<{ last_sequence: string; pruned_through: string }>(`SELECT last_sequence, pruned_through FROM event_feed_state`);
    expect(state.rows[0]).toEqual({ last_sequence: '5', pruned_through: '1' });
    // A new event is keyed by its transaction and waits for the next pass (nothing numbers it here).
    await client.query(`INSERT INTO events (type, data) VALUES ('category.created', '{"id":9}')`);
    const waiting = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM events e WHERE NOT EXISTS (SELECT 1 FROM event_transactions t WHERE t.tx = e.tx) AND e.tx > 0`,
    );
    expect(waiting.rows[0].n).toBe('1');
  });
});
