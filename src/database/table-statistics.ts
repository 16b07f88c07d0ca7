import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { outsideTransaction, Transactions } from './transactions.js';

/** Tables whose bulk writes are followed by queries whose plans depend on fresh statistics. */
export type AnalyzedTable = 'workflow_enrollments';

/** Rows written since the last ANALYZE that make the statistics worth refreshing. */
export const ANALYZE_AFTER_ROWS = 5_000;
/** The ANALYZE waits this long after the last bulk write (its transaction has committed by then)… */
const QUIET_MS = 1_000;
/** …but no longer than this after the first one, while bulk writes go on. */
const MAX_WAIT_MS = 5_000;

/**
 * Keeps the planner's statistics of a table fresh after bulk writes, as PostgreSQL advises after a
 * bulk load. Autovacuum analyzes a table only at its next nap (a minute by default; never when it
 * is off), while the queries right after the write depend on them: after 100,000 enrolments the
 * workflow runner's claim, planned on a table the planner believes small, sorted every due
 * enrollment on each claim instead of reading the due index in order. After `rows` written to a
 * table add up to ANALYZE_AFTER_ROWS, one `ANALYZE <table>` runs on the pool, a second after the last
 * such write (at most 5 s after the first); a failure is logged, never thrown to the writer.
 */
@Injectable()
export class TableStatistics implements OnModuleDestroy {
  private readonly logger = new Logger('TableStatistics');
  private readonly pending = new Map<AnalyzedTable, { rows: number; since: number; timer: NodeJS.Timeout | null }>();
  private stopped = false;

  constructor(private readonly transactions: Transactions) {}

  /** Counts `rows` written to `table` (in the caller's transaction, committed or about to be). */
  bulkWritten(table: AnalyzedTable, rows: number): void {
    if (this.stopped || rows <= 0) return;
    const p = this.pending.get(table) ?? { rows: 0, since: Date.now(), timer: null };
    this.pending.set(table, p);
    p.rows += rows;
    if (p.rows < ANALYZE_AFTER_ROWS) return;
    if (p.timer) clearTimeout(p.timer);
    const wait = Math.max(0, Math.min(QUIET_MS, p.since + MAX_WAIT_MS - Date.now()));
    p.timer = outsideTransaction(() => setTimeout(() => void this.analyze(table), wait));
    p.timer.unref();
  }

  private async analyze(table: AnalyzedTable): Promise<void> {
    this.pending.delete(table);
    if (this.stopped) return;
    try {
      await this.transactions.db.query(`ANALYZE ${table}`);
    } catch (e) {
      this.logger.warn({ msg: 'ANALYZE after a bulk write failed', table, err: (e as Error).message });
    }
  }

  onModuleDestroy(): void {
    this.stopped = true;
    for (const p of this.pending.values()) if (p.timer) clearTimeout(p.timer);
    this.pending.clear();
  }
}
