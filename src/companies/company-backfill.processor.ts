import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type { JobPayloads } from '../jobs/job-names.js';
import { type JobContext, JobQueue } from '../jobs/job-queue.js';
import { CompaniesService } from './companies.service.js';

/**
 * The `companies.backfill` job: runs one backfill run (CompaniesService.runBackfill, safe to run
 * twice). A run whose job fails on its last attempt is marked failed, so GET
 * /api/companies/backfill/{id} never shows it running for ever.
 */
@Injectable()
export class CompanyBackfillProcessor implements OnModuleInit {
  private readonly logger = new Logger('CompanyBackfill');

  constructor(
    private readonly jobs: JobQueue,
    private readonly companies: CompaniesService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('companies.backfill', (p, ctx) => this.run(p, ctx));
  }

  async run({ runId }: JobPayloads['companies.backfill'], ctx: JobContext): Promise<void> {
    try {
      await this.companies.runBackfill(runId);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.logger.error({ msg: 'companies backfill failed', runId, attempt: ctx.attempt, err: message });
      if (ctx.attempt >= ctx.maxAttempts) await this.companies.failBackfill(runId, message);
      throw e;
    }
  }
}
