import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { iso } from '../common/dates.js';
import { Transactions } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { JOB_IDS, type JobPayloads } from '../jobs/job-names.js';
import { type JobContext, JobQueue } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { nextRunAt, type ReportOutput } from './report-definition.js';
import type { Report } from './report.entity.js';
import { ReportsRepository } from './reports.repository.js';
import { ReportsService } from './reports.service.js';
/** How often the report schedulers are re-created from the database. */
const SYNC_EVERY_MS = 10 * 60_000;

/**
 * The report jobs. `reports.run` computes a report with one SQL aggregation, stores the result,
 * sets lastRun and leaves a `report_ready` notification for the report's owner, all in one
 * transaction (safe to run twice: a second run stores a second, equal result). The report row is
 * locked while the result is stored, so a report deleted meanwhile is simply not stored for.
 * `reports.sync-schedules` makes the job schedulers match the reports table (on worker start,
 * which the in-process runner needs after every restart, and every 10 minutes).
 */
@Injectable()
export class ReportsProcessor implements OnModuleInit {
  private readonly logger = new Logger('Reports');

  constructor(
    private readonly repository: ReportsRepository,
    private readonly transactions: Transactions,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobQueue,
    private readonly reports: ReportsService,
    private readonly notifications: NotificationsService,
    private readonly events: EventsService,
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
  compute(report: Pick<Report, 'type' | 'filters' | 'columns'>, now: Date): Promise<ReportOutput> {
    return this.repository.aggregate(report, now);
  }

  async run({ reportId, trigger }: JobPayloads['reports.run'], ctx: JobContext): Promise<void> {
    const report = await this.repository.findById(reportId);
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
    const stored = await this.transactions.run(async (tx) => {
      // Deleted while it ran: nothing to store.
      const current = await this.repository.findForUpdate(reportId, tx);
      if (!current) return false;
      const resultId = await this.repository.storeResult({ reportId, generatedAt, trigger, jobId: ctx.jobId, output }, tx);
      await this.events.record(tx, 'report.completed', {
        ...this.reports.toRecord(Object.assign(current, { lastRun: generatedAt })),
        result: { id: resultId, generatedAt: iso(generatedAt), trigger },
      });
      if (current.createdBy !== null) {
        await this.notifications.notify(
          current.createdBy,
          'report_ready',
          `The report "${current.name}" is ready`,
          { reportId, reportName: current.name, resultId, generatedAt: iso(generatedAt), trigger },
          tx,
        );
      }
      return true;
    });
    if (stored) this.logger.log({ msg: 'report ran', reportId, trigger, rows: output.data.length, ms: Date.now() - started });
  }

  async syncSchedules(): Promise<void> {
    for (const r of await this.repository.scheduled()) await this.reports.syncSchedule(r);
  }
}
