import { type BeforeApplicationShutdown, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { type CredentialWatch, TokensService } from '../auth/tokens.service.js';
import { AppError } from '../common/errors.js';
import { JOB_IDS, RECOVERY_EVERY_MS } from '../jobs/job-names.js';
import { type JobContext, JobQueue } from '../jobs/job-queue.js';
import { ExportsService } from './exports.service.js';
import { openSource } from './import-source.js';
import type { ImportRow } from './imports.repository.js';
import { type ChunkRow, ImportRunner } from './import-runner.service.js';
import { JobFiles } from './job-files.js';

/**
 * The import and export jobs, under BullMQ workers and the in-process runner alike.
 *
 * `imports.run` takes up an import: a validation pass reads the file once (header against the
 * mapping, row count: the total), then the file is read again from the start, the rows before the
 * checkpoint skipped, and the rest written chunk by chunk (ImportRunner.writeChunk: the chunk's
 * writes and the checkpoint commit together). A run killed anywhere resumes from the last committed
 * chunk; a second runner of the same import (a stalled job run again) finds the checkpoint moved
 * and stops. The import acts for the token that created it: before each chunk that token is checked
 * (TokensService.watch), and once it is revoked, deleted or expired the import ends `failed` with
 * that reason (the chunks in flight are rolled back: the import is no longer running). On shutdown a run stops between chunks and the import stays `running`, for the
 * recovery to queue again. The recovery runs at worker start and every RECOVERY_EVERY_MS: a job that
 * BullMQ gave up on (its worker died twice, more than maxStalledCount) is queued again within seconds.
 * Every run counts (ImportRunner.start; one stopped by a shutdown is given back): past MAX_JOB_RUNS
 * the import ends `failed`, so a file whose processing kills its worker is not run again forever.
 */
@Injectable()
export class ImportsProcessor implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Imports');
  private stopping = false;

  constructor(
    private readonly imports: ImportRunner,
    private readonly exports: ExportsService,
    private readonly files: JobFiles,
    private readonly jobs: JobQueue,
    private readonly tokens: TokensService,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('imports.run', (p, ctx) => this.run(p.importId, ctx));
    this.jobs.handle('exports.run', (p, ctx) => this.exports.run(p.exportId, ctx.attempt >= ctx.maxAttempts));
    this.jobs.handle('imports.recover', () => this.recover());
    this.jobs.onWorkerStart('imports: queue unfinished imports and exports', async () => {
      await this.recover();
      await this.jobs.upsertSchedule(JOB_IDS.importsRecoverSchedule, 'imports.recover', {}, { everyMs: RECOVERY_EVERY_MS });
    });
  }

  beforeApplicationShutdown(): void {
    this.stopping = true;
  }

  /** Queues again every unfinished import and export (a job already queued or running is not duplicated). */
  async recover(): Promise<void> {
    for (const id of await this.imports.openImportIds()) await this.jobs.enqueue('imports.run', { importId: id }, { jobId: JOB_IDS.importRun(id) });
    for (const id of await this.exports.openExportIds()) await this.jobs.enqueue('exports.run', { exportId: id }, { jobId: JOB_IDS.exportRun(id) });
  }

  async run(importId: number, ctx: JobContext): Promise<void> {
    const started = await this.imports.start(importId);
    if (!started) return;
    let imp: ImportRow | null = started;
    try {
      if (imp.totalRows === null) {
        const total = await this.validate(imp);
        imp = await this.imports.setTotal(importId, total);
        if (!imp) return;
      }
      const finished = await this.write(imp, this.credentialOf(imp));
      if (!finished) {
        if (this.stopping) await this.imports.giveBackRun(importId);
        return;
      }
      if (await this.imports.finish(importId, 'completed', null)) await this.imports.dropFile(imp);
    } catch (e) {
      // A problem of the file or its mapping (a 4xx) ends the import; anything else is retried from the checkpoint.
      const final = ctx.attempt >= ctx.maxAttempts;
      if ((e instanceof AppError && e.status < 500) || final) {
        const message = e instanceof Error ? e.message : String(e);
        this.logger.warn({ msg: 'import failed', importId, err: message });
        if (await this.imports.finish(importId, 'failed', message)) await this.imports.dropFile(started);
        return;
      }
      throw e;
    }
  }

  /** The validation pass: the header fits the mapping, and the number of data rows. */
  private async validate(imp: ImportRow): Promise<number> {
    const source = await openSource(this.files, this.keyOf(imp), imp.sourceFormat, imp.options.columns);
    await this.imports.planFor(imp, source.header);
    let total = 0;
    for await (const _ of source.rows) total++;
    return total;
  }

  /**
   * Writes the chunks not committed yet, up to IMPORT_PARALLEL_CHUNKS at once (each its own
   * transaction); false when the run stopped before the end (canceled, shutting down).
   */
  private async write(imp: ImportRow, credential: CredentialWatch): Promise<boolean> {
    const source = await openSource(this.files, this.keyOf(imp), imp.sourceFormat, imp.options.columns);
    const plans = await this.imports.planFor(imp, source.header);
    const done = await this.imports.committedChunks(imp.id);
    const size = imp.options.chunkRows;
    const inflight = new Set<Promise<void>>();
    let failure: { error: unknown } | null = null;
    let stopped = false;
    let ended: string | null = null;
    const submit = async (chunk: number, rows: ChunkRow[]) => {
      const p: Promise<void> = this.imports
        .writeChunk(imp, chunk, rows, plans)
        .then(
          (outcome) => {
            if (outcome === 'stopped') stopped = true;
          },
          (error: unknown) => {
            failure ??= { error };
          },
        )
        .finally(() => inflight.delete(p));
      inflight.add(p);
      if (inflight.size >= this.imports.parallelChunks) await Promise.race(inflight);
    };
    let row = 0;
    let rows: ChunkRow[] = [];
    for await (const cells of source.rows) {
      const chunk = Math.floor(row / size);
      row++;
      if (done.has(chunk)) continue;
      rows.push({ row, record: this.imports.recordOf(cells, plans, imp) });
      if (rows.length < size && row % size !== 0) continue;
      if (failure || stopped || this.stopping) break;
      // The creator's token, checked before every chunk (read at most once a second): revoked, the import stops.
      if ((ended = await credential.ended())) break;
      await submit(chunk, rows);
      rows = [];
    }
    if (rows.length && !failure && !stopped && !this.stopping && !ended && !(ended = await credential.ended())) {
      await submit(Math.floor((row - 1) / size), rows);
    }
    await Promise.all(inflight);
    const failed = failure as { error: unknown } | null;
    if (failed) throw failed.error;
    if (ended) throw new AppError('forbidden', `Import ${imp.id} ${ended}`);
    return !stopped && !this.stopping;
  }

  /** The token the import acts for (its creator's), watched for revocation. */
  private credentialOf(imp: ImportRow): CredentialWatch {
    const p = imp.principal;
    return this.tokens.watch(p.apiTokenId ? { apiTokenId: p.apiTokenId, accessTokenId: p.accessTokenId ?? null } : null);
  }

  private keyOf(imp: ImportRow): string {
    if (!imp.storageKey) throw new AppError('validation_failed', `Import ${imp.id} has no stored file`);
    return imp.storageKey;
  }
}
