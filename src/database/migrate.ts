import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations/index.js';

/** Arbitrary constant: the advisory lock that serializes migrations across instances starting together. */
const MIGRATION_LOCK = 727_274_001;

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock, so that two instances
 * starting at once do not both run them: the second waits, then finds nothing to do.
 */
export async function runMigrations(url: string, log: (msg: string) => void = () => undefined): Promise<string[]> {
  const ds = new DataSource({ type: 'postgres', url, migrations: MIGRATIONS, migrationsTableName: 'migrations', logging: false });
  await ds.initialize();
  const runner = ds.createQueryRunner();
  try {
    await runner.connect();
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      const done = await ds.runMigrations({ transaction: 'each' });
      for (const m of done) log(`migration applied: ${m.name}`);
      return done.map((m) => m.name);
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    }
  } finally {
    await runner.release().catch(() => undefined);
    await ds.destroy().catch(() => undefined);
  }
}
