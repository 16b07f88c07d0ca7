import { Injectable } from '@nestjs/common';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import {
  buildMarketingQuery,
  buildSalesQuery,
  REPORT_SCHEDULES,
  REPORT_TYPES,
  type ReportOutput,
  shapeMarketingResult,
  shapeSalesResult,
} from './report-definition.js';
import { Report } from './report.entity.js';

export const REPORT_LIST_SPEC = defineList({
  name: 'reports',
  sortable: ['id', 'name', 'type', 'isPublished', 'schedule', 'lastRun', 'createdAt', 'modifiedAt'],
  searchExpression: 'sf_text(r.name, r.description)',
  filters: {
    type: { type: 'string', column: 'r.type', values: REPORT_TYPES },
    isPublished: { type: 'boolean', column: 'r.is_published' },
  },
  fields: {
    id: { type: 'id', sql: 'r.id' },
    name: { type: 'string', sql: 'r.name' },
    description: { type: 'string', sql: 'r.description' },
    type: { type: 'enum', sql: 'r.type', values: REPORT_TYPES },
    isPublished: { type: 'boolean', sql: 'r.is_published' },
    schedule: { type: 'enum', sql: 'r.schedule', values: REPORT_SCHEDULES },
    lastRun: { type: 'datetime', sql: 'r.last_run' },
    ...auditFields('r'),
  },
  properties: [
    'id',
    'name',
    'description',
    'type',
    'isPublished',
    'schedule',
    'lastRun',
    'nextRun',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
    'filters',
    'columns',
  ],
});

/** Results kept per report; older ones are deleted by each run. */
export const KEEP_RESULTS = 10;

export type ReportChanges = Omit<Partial<Report>, 'id' | 'createdAt'>;

export interface StoredResult {
  reportId: number;
  generatedAt: Date;
  trigger: 'manual' | 'schedule';
  jobId: string;
  output: ReportOutput;
}

/**
 * Every query of the `reports` and `report_results` tables, and the report aggregations. Writes
 * take an optional transaction handle (the pool by default).
 */
@Injectable()
export class ReportsRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Report);
  }

  list(q: ListQuery): Promise<ListPage<Report>> {
    return paginate(this.repo().createQueryBuilder('r'), q, REPORT_LIST_SPEC);
  }

  findById(id: number, tx?: Tx): Promise<Report | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until the transaction ends: concurrent edits (and a run storing its result) apply one after the other. */
  findForUpdate(id: number, tx: Tx): Promise<Report | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  exists(id: number): Promise<boolean> {
    return this.repo().exists({ where: { id } });
  }

  async insert(values: ReportChanges, tx?: Tx): Promise<number> {
    const saved = await this.repo(tx).save(this.repo(tx).create(values));
    return saved.id;
  }

  async update(id: number, changes: ReportChanges, tx?: Tx): Promise<void> {
    const { id: _id, createdAt: _createdAt, ...columns } = changes as Partial<Report>;
    await this.repo(tx).update({ id }, columns);
  }

  /** Deletes the report (its results go by cascade) and answers it as it was, or null: of concurrent deletes exactly one finds it. */
  remove(id: number): Promise<Report | null> {
    return this.transactions.run(async (tx) => {
      const report = await this.findForUpdate(id, tx);
      if (!report) return null;
      await this.repo(tx).delete({ id });
      return report;
    });
  }

  /** Published reports with a schedule (the ones that need a job scheduler). */
  async scheduled(): Promise<Pick<Report, 'id' | 'schedule' | 'isPublished'>[]> {
    const rows: { id: number; schedule: Report['schedule']; is_published: boolean }[] = await this.db().query(
      `SELECT id, schedule, is_published FROM reports WHERE schedule IS NOT NULL AND is_published ORDER BY id`,
    );
    return rows.map((r) => ({ id: r.id, schedule: r.schedule, isPublished: r.is_published }));
  }

  async latestResult(reportId: number): Promise<{ generatedAt: Date; data: unknown[]; summary: Record<string, unknown> } | null> {
    const rows: { generated_at: Date; data: unknown[]; summary: Record<string, unknown> }[] = await this.db().query(
      `SELECT generated_at, data, summary FROM report_results WHERE report_id = $1 ORDER BY generated_at DESC, id DESC LIMIT 1`,
      [reportId],
    );
    return rows[0] ? { generatedAt: rows[0].generated_at, data: rows[0].data, summary: rows[0].summary } : null;
  }

  /** Stores a run's result, sets lastRun and prunes old results to KEEP_RESULTS; answers the result's id. */
  async storeResult(r: StoredResult, tx: Tx): Promise<number> {
    const [{ id }]: { id: string }[] = await tx.query(
      `INSERT INTO report_results (report_id, generated_at, trigger, job_id, data, summary) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [r.reportId, r.generatedAt, r.trigger, r.jobId, JSON.stringify(r.output.data), JSON.stringify(r.output.summary)],
    );
    await tx.query(`UPDATE reports SET last_run = $2 WHERE id = $1`, [r.reportId, r.generatedAt]);
    await tx.query(
      `DELETE FROM report_results WHERE report_id = $1 AND id NOT IN
         (SELECT id FROM report_results WHERE report_id = $1 ORDER BY generated_at DESC, id DESC LIMIT ${KEEP_RESULTS})`,
      [r.reportId],
    );
    return Number(id);
  }

  /**
   * Computes a report's result with one aggregation in PostgreSQL. This is a read model over other
   * features' tables (deals and users for sales; campaigns, campaign_members and text_messages for
   * marketing), kept as raw SQL here because it is what the benchmark row
   * measures (bench/run.mjs "sales report over 1M deals", time until the sales report is ready): one scan with GROUPING SETS over deals_won_closed_idx, never a loop over records.
   * The SQL text is built (and unit-tested) in report-definition.ts.
   */
  async aggregate(report: Pick<Report, 'type' | 'filters' | 'columns'>, now: Date): Promise<ReportOutput> {
    if (report.type === 'sales') {
      const q = buildSalesQuery(report.filters ?? {}, report.columns, now);
      return shapeSalesResult(await this.db().query(q.sql, q.params), report.columns);
    }
    const q = buildMarketingQuery(report.filters ?? {}, now);
    return shapeMarketingResult(await this.db().query(q.sql, q.params), report.columns);
  }
}
