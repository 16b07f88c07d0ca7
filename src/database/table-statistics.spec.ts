import { describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { waitUntil } from '../../test/support/wait.js';
import { ANALYZE_AFTER_ROWS, TableStatistics } from './table-statistics.js';

/** ANALYZE after bulk writes, on the real database: not below the threshold, once after it (a fresh table has never been analyzed: reltuples -1). */
describe('TableStatistics (real PostgreSQL)', () => {
  const spec = useServiceSpec();
  const reltuples = async () =>
    (await spec.ctx.query<{ n: number }>(`SELECT reltuples::float8 AS n FROM pg_class WHERE oid = 'workflow_enrollments'::regclass`))[0].n;

  it('analyzes a table once the rows written to it add up to the threshold, a moment after the last write', async () => {
    const stats = spec.ctx.get(TableStatistics);
    await spec.ctx.query(`ANALYZE workflow_enrollments`);
    // Mark the statistics stale (as a table never analyzed is) so that the ANALYZE shows.
    await spec.ctx.query(`UPDATE pg_class SET reltuples = -1 WHERE oid = 'workflow_enrollments'::regclass`);
    stats.bulkWritten('workflow_enrollments', ANALYZE_AFTER_ROWS - 1);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await reltuples()).toBe(-1);
    stats.bulkWritten('workflow_enrollments', 1);
    await waitUntil('the ANALYZE', async () => ((await reltuples()) >= 0 ? true : undefined), 10000, 100);
  });
});
