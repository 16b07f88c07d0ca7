import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso } from '../common/dates.js';
import { AppError, notFound, unavailable } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { nextRunAt, REPORT_COLUMNS, validateColumns, validateFilters } from './report-definition.js';
import { CreateReportDto, UpdateReportDto } from './report.dto.js';
import { Report } from './report.entity.js';
import { REPORT_LIST_SPEC, ReportsRepository } from './reports.repository.js';
import { Transactions, type Tx } from '../database/transactions.js';

export type ReportRecord = ReturnType<ReportsService['toRecord']>;

@Injectable()
export class ReportsService {
  private readonly logger = new Logger('Reports');

  constructor(
    private readonly reports: ReportsRepository,
    private readonly transactions: Transactions,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobQueue,
  ) {}

  /** The one mapper from a stored report to the API record. nextRun is computed from the schedule each time, so it is always the true next time. */
  toRecord(r: Report, now = new Date()) {
    return {
      id: r.id,
      name: r.name,
      description: r.description,
      type: r.type,
      isPublished: r.isPublished,
      schedule: r.schedule,
      lastRun: iso(r.lastRun),
      nextRun: iso(nextRunAt(r.schedule, r.isPublished, this.config.reportSchedulePatterns, now)),
      ...auditOut(r),
      filters: r.filters ?? {},
      columns: r.columns,
    };
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, REPORT_LIST_SPEC);
    const page = await this.reports.list(q);
    const now = new Date();
    return listEnvelope(
      q,
      'reports',
      page,
      page.items.map((r) => this.toRecord(r, now)),
    );
  }

  async findEntity(id: number): Promise<Report> {
    const r = await this.reports.findById(id);
    if (!r) throw notFound('Report', id);
    return r;
  }

  async get(id: number): Promise<ReportRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreateReportDto, who: Principal): Promise<ReportRecord> {
    const r = new Report();
    this.assign(r, dto, true);
    stampCreated(r, who);
    const id = await this.reports.insert(r);
    await this.syncSchedule({ id, schedule: r.schedule, isPublished: r.isPublished });
    return this.get(id);
  }

  async patch(id: number, dto: UpdateReportDto, who: Principal): Promise<ReportRecord> {
    return this.edit(id, dto, who, false);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new report. */
  async put(id: number, dto: CreateReportDto, who: Principal): Promise<{ created: boolean; report: ReportRecord }> {
    if (!(await this.reports.exists(id))) return { created: true, report: await this.create(dto, who) };
    return { created: false, report: await this.edit(id, dto, who, true) };
  }

  /**
   * An edit runs on the row locked (FOR UPDATE): concurrent edits apply one after the other, each
   * on the other's result, so no change is lost; the schedule follows while the lock is held, so
   * the scheduler ends up matching the last edit.
   */
  private async edit(id: number, dto: UpdateReportDto, who: Principal, replace: boolean): Promise<ReportRecord> {
    const saved = await this.transactions.run(async (tx: Tx) => {
      const r = await this.reports.findForUpdate(id, tx);
      if (!r) throw notFound('Report', id);
      const before = { schedule: r.schedule, isPublished: r.isPublished };
      this.assign(r, dto, replace);
      stampModified(r, who);
      await this.reports.update(id, r, tx);
      if (replace || before.schedule !== r.schedule || before.isPublished !== r.isPublished) await this.syncSchedule(r);
      return r;
    });
    return this.toRecord(saved);
  }

  /** Deletes the report, its stored results and its schedule (404 to all but one of concurrent deletes). */
  async remove(id: number): Promise<ReportRecord> {
    const r = await this.reports.remove(id);
    if (!r) throw notFound('Report', id);
    await this.removeScheduleQuietly(id);
    return this.toRecord(r);
  }

  /** Queues a run; 503 when the queue is unreachable (nothing is changed then). */
  async run(id: number): Promise<{ status: 'queued'; message: string; jobId: string }> {
    const r = await this.findEntity(id);
    if (!(await this.jobs.isAvailable())) throw unavailable('The job queue is unreachable; the report was not queued. Try again shortly.');
    const { id: jobId } = await this.jobs.enqueue('reports.run', { reportId: r.id, trigger: 'manual' });
    return {
      status: 'queued',
      message: `The report "${r.name}" is queued to run; its result will be at GET /api/reports/${r.id}/results and its owner gets a report_ready notification`,
      jobId,
    };
  }

  async latestResult(id: number) {
    await this.findEntity(id);
    const result = await this.reports.latestResult(id);
    if (!result) throw new AppError('not_found', `Report ${id} has no results yet: run it first (POST /api/reports/${id}/run)`);
    return { results: { generatedAt: iso(result.generatedAt), data: result.data, summary: result.summary } };
  }

  /**
   * Makes the report's job scheduler match its schedule: one scheduler per report while it has a
   * schedule and is published, none otherwise. A failure (queue unreachable) is logged, not
   * returned: the database is the truth, and the periodic schedule sync repairs the scheduler.
   */
  async syncSchedule(r: Pick<Report, 'id' | 'schedule' | 'isPublished'>): Promise<void> {
    try {
      if (r.schedule && r.isPublished) {
        await this.jobs.upsertSchedule(
          JOB_IDS.reportSchedule(r.id),
          'reports.run',
          { reportId: r.id, trigger: 'schedule' },
          { pattern: this.config.reportSchedulePatterns[r.schedule] },
        );
      } else {
        await this.jobs.removeSchedule(JOB_IDS.reportSchedule(r.id));
      }
    } catch (e) {
      this.logger.warn({ msg: 'report schedule not updated; the periodic sync will retry', reportId: r.id, err: (e as Error).message });
    }
  }

  async removeScheduleQuietly(reportId: number): Promise<void> {
    await this.jobs
      .removeSchedule(JOB_IDS.reportSchedule(reportId))
      .catch((e: unknown) =>
        this.logger.warn({ msg: 'report schedule not removed; its runs will find no report', reportId, err: e instanceof Error ? e.message : String(e) }),
      );
  }

  /** Copies DTO values onto the entity and validates the combined filters and columns for the type. */
  private assign(r: Report, dto: UpdateReportDto, replace: boolean) {
    for (const key of ['name', 'type'] as const) {
      if (dto[key] === null) throw new AppError('validation_failed', `${key}: must not be null`, [{ field: key, message: 'must not be null' }]);
    }
    if (dto.name !== undefined) {
      r.name = dto.name.trim();
      if (!r.name) throw new AppError('validation_failed', 'name: must not be empty', [{ field: 'name', message: 'must not be empty' }]);
    }
    if (dto.description !== undefined || replace) r.description = dto.description ?? null;
    if (dto.type !== undefined) r.type = dto.type;
    if (dto.schedule !== undefined || replace) r.schedule = dto.schedule ?? null;
    if (dto.isPublished !== undefined || replace) r.isPublished = dto.isPublished ?? true;
    if (dto.filters !== undefined || replace) r.filters = dto.filters ?? {};
    if (dto.columns !== undefined || replace) r.columns = dto.columns ?? [...REPORT_COLUMNS[r.type]];
    if (r.filters === null) r.filters = {};
    const errors = [...validateFilters(r.type, r.filters), ...validateColumns(r.type, r.columns)];
    if (errors.length) {
      throw new AppError('validation_failed', `Validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`, errors);
    }
    if (r.filters.salesTeam) r.filters.salesTeam = r.filters.salesTeam.trim();
  }
}
