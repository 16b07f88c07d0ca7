import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryFailedError } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { iso } from '../common/dates.js';
import { JOB_IDS, type JobPayloads } from '../jobs/job-names.js';
import { type JobContext, JobQueue } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import {
  buildMarketingQuery,
  buildSalesQuery,
  nextRunAt,
  type ReportOutput,
  shapeMarketingResult,
  shapeSalesResult,
} from './report-definition.js';
import { Report } from './report.entity.js';
import { ReportsService } from './reports.service.js';

/** Results kept per report; older ones are deleted by each run. */
const KEEP_RESULTS = 10;
/** How often the report schedulers are re-created from the database. */
const SYNC_EVERY_MS = 10 * 60_000;

/**
 * The report jobs. `reports.run` computes a report with one SQL aggregation, stores the result,
 * sets lastRun and leaves a `report_ready` notification for the report's owner, all in one
 * transaction (safe to run twice: a second run stores a second, equal result).
 * `reports.sync-schedules` makes the job schedulers match the reports table (on worker start,
 * which the in-process runner needs after every restart, and every 10 minutes).
 */
@Injectable()
export class ReportsProcessor implements OnModuleInit {
  private readonly logger = new Logger('Reports');

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobQueue,
    private readonly reports: ReportsService,
    private readonly notifications: NotificationsService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('reports.run', (p, ctx) => this.run(p, ctx));
    this.jobs.handle('reports.sync-schedules', () => this.syncSchedules());
    this.jobs.onWorkerStart('reports: sync schedules', async () => {
      await this.syncSchedules();
      await this.jobs.upsertSchedule(JOB_IDS.reportsSyncSchedule, 'reports.sync-schedules', {}, { everyMs: SYNC_EVERY_MS });
    });
  }

  /** Computes a report's result from the database (aggregated in SQL). */
  async compute(report: Pick<Report, 'type' | 'filters' | 'columns'>, now: Date): Promise<ReportOutput> {
    if (report.type === 'sales') {
      const q = buildSalesQuery(report.filters ?? {}, report.columns, now);
      return shapeSalesResult(await this.db.query(q.sql, q.params), report.columns);
    }
    const q = buildMarketingQuery(report.filters ?? {}, now);
    return shapeMarketingResult(await this.db.query(q.sql, q.params), report.columns);
  }

  async run({ reportId, trigger }: JobPayloads['reports.run'], ctx: JobContext): Promise<void> {
    const report = await this.db.getRepository(Report).findOne({ where: { id: reportId } });
    if (!report) {
      if (trigger === 'schedule') await this.reports.removeScheduleQuietly(reportId);
      return;
    }
    if (trigger === 'schedule' && nextRunAt(report.schedule, report.isPublished, this.config.reportSchedulePatterns, new Date()) === null) {
      // A scheduler that outlived its schedule (edited while the queue was unreachable).
      await this.reports.removeScheduleQuietly(reportId);
      return;
    }
    const started = Date.now();
    const generatedAt = new Date();
    const output = await this.compute(report, generatedAt);
    try {
      await this.db.transaction(async (m) => {
        const [{ id: resultId }] = await m.query(
          `INSERT INTO report_results (report_id, generated_at, trigger, job_id, data, summary) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
          [reportId, generatedAt, trigger, ctx.jobId, JSON.stringify(output.data), JSON.stringify(output.summary)],
        );
        await m.query(`UPDATE reports SET last_run = $2 WHERE id = $1`, [reportId, generatedAt]);
        await m.query(
          `DELETE FROM report_results WHERE report_id = $1 AND id NOT IN
             (SELECT id FROM report_results WHERE report_id = $1 ORDER BY generated_at DESC, id DESC LIMIT ${KEEP_RESULTS})`,
          [reportId],
        );
        if (report.createdBy !== null) {
          await this.notifications.notify(
            report.createdBy,
            'report_ready',
            `The report "${report.name}" is ready`,
            { reportId, reportName: report.name, resultId: Number(resultId), generatedAt: iso(generatedAt), trigger },
            m,
          );
        }
      });
    } catch (e) {
      // Deleted while it ran: nothing to store.
      if (e instanceof QueryFailedError && (e as QueryFailedError & { driverError?: { code?: string } }).driverError?.code === '23503') return;
      throw e;
    }
    this.logger.log({ msg: 'report ran', reportId, trigger, rows: output.data.length, ms: Date.now() - started });
  }

  async syncSchedules(): Promise<void> {
    const rows: { id: number; schedule: Report['schedule']; is_published: boolean }[] = await this.db.query(
      `SELECT id, schedule, is_published FROM reports WHERE schedule IS NOT NULL AND is_published ORDER BY id`,
    );
    for (const r of rows) await this.reports.syncSchedule({ id: r.id, schedule: r.schedule, isPublished: r.is_published });
  }
}
