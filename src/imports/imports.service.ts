import { Inject, Injectable, Logger } from '@nestjs/common';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { Response } from 'express';
import type { BatchAnswer } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import { iso } from '../common/dates.js';
import { inspectBody } from '../server/request-text.middleware.js';
import { jobCredentialOf } from '../auth/tokens.service.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { assertFormFields } from '../server/request-text.middleware.js';
import { AppValidationPipe } from '../server/validation.pipe.js';
import { APP_CONFIG, type AppConfig, type Plan } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { SegmentsService } from '../segments/segments.service.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { CompaniesService } from '../companies/companies.service.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { DealsService } from '../deals/deals.service.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { CreateImportDto, ImportOptionsDto } from './import.dto.js';
import type { StoredImportFile } from './import-upload.engine.js';
import {
  type ColumnPlan,
  columnOf,
  type CustomFieldType,
  defaultIdProperty,
  FIELD_OBJECT,
  ID_PROPERTIES,
  type ImportObject,
  neutraliseFormula,
  planColumns,
  rowRecord,
  targetProblem,
  MAX_JOB_RUNS,
  RUNS_EXHAUSTED,
} from './import.rules.js';
import { type ChunkCounts, type ImportErrorRow, type ImportOptions, type ImportRow, ImportsRepository, type StoredPrincipal } from './imports.repository.js';
import { JobFiles } from './job-files.js';
import { missingReferenceMessage } from '../common/documented-rules.js';

/** The permission importing into an object needs (besides imports:write). */
const WRITE_PERMISSION: Record<ImportObject, string> = { contacts: 'contacts:write', companies: 'companies:write', deals: 'deals:write' };
/** Errors a page of GET /api/imports/{id}/errors holds at most. */
const ERRORS_MAX_LIMIT = 1000;

/** Rolls a chunk back: the import stopped running while it was written. */
class ChunkAbandoned extends Error {
  constructor() {
    super('the import is no longer running');
  }
}

/** Thrown inside a dry run's savepoint to roll its writes back while keeping the answer. */
class DryRunRollback extends Error {
  constructor(readonly answer: BatchAnswer) {
    super('dry run');
  }
}

export type ImportRecord = ReturnType<typeof toImportRecord>;

export function toImportRecord(r: ImportRow, now = Date.now()) {
  const total = r.totalRows;
  const progress = r.status === 'completed' ? 1 : total ? Math.min(1, r.processedRows / total) : 0;
  const started = r.startedAt ? new Date(r.startedAt).getTime() : null;
  const finished = r.finishedAt ? new Date(r.finishedAt).getTime() : null;
  return {
    id: r.id,
    object: r.object,
    status: r.status,
    mode: r.options.mode,
    idProperty: r.options.idProperty,
    emptyValues: r.options.emptyValues,
    dryRun: r.options.dryRun,
    campaignId: r.options.campaignId,
    segmentId: r.options.segmentId ?? null,
    source: r.sourceFormat === 'csv' ? 'csv' : 'json',
    fileName: r.fileName,
    fileSize: Number(r.fileSize),
    mapping: r.options.mapping,
    counts: {
      total,
      processed: r.processedRows,
      created: r.createdCount,
      updated: r.updatedCount,
      skipped: r.skippedCount,
      failed: r.failedCount,
    },
    progress: Math.round(progress * 10000) / 10000,
    error: r.error,
    createdAt: iso(r.createdAt) ?? '',
    startedAt: iso(r.startedAt),
    finishedAt: iso(r.finishedAt),
    durationMs: started === null ? null : (finished ?? now) - started,
    createdBy: r.createdBy,
    createdByUser: r.createdByUser,
  };
}

/** A row of a chunk: its number (1-based data row) and its record (null: every mapped cell empty, skipped). */
export interface ChunkRow {
  row: number;
  record: Record<string, unknown> | null;
}

/**
 * Import jobs (issue 15 part 3). The API stores the upload (streamed to disk) and queues the job;
 * the worker (imports.processor.ts) reads the file in chunks and writes each chunk through the
 * object's batch write path (the single-record routes' validation, custom fields, events,
 * constraint errors) in one transaction with the import's checkpoint, so a worker killed mid-import
 * resumes after the last committed chunk and writes no row twice.
 */
@Injectable()
export class ImportsService {
  private readonly logger = new Logger('Imports');
  private readonly pipe = new AppValidationPipe();

  constructor(
    private readonly repository: ImportsRepository,
    private readonly files: JobFiles,
    private readonly jobs: JobQueue,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly notifications: NotificationsService,
    private readonly contacts: ContactsService,
    private readonly companies: CompaniesService,
    private readonly deals: DealsService,
    private readonly campaigns: CampaignsService,
    private readonly segments: SegmentsService,
    private readonly fieldValues: ContactFieldValuesService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** `POST /api/imports` with a JSON body: the rows are stored as JSON Lines and imported like a file. */
  async createFromRows(dto: CreateImportDto, who: Principal): Promise<ImportRecord> {
    const options = await this.checkOptions(dto, who);
    const columns: string[] = [];
    const seen = new Set<string>();
    for (const [i, row] of dto.rows.entries()) {
      if (row === null || typeof row !== 'object' || Array.isArray(row)) throw fieldError(`rows.${i}`, 'must be a JSON object');
      for (const k of Object.keys(row)) {
        if (!seen.has(k)) {
          seen.add(k);
          columns.push(k);
        }
      }
    }
    options.columns = columns;
    const stored = await this.files.write('imports', Readable.from(dto.rows.map((r) => `${JSON.stringify(r)}\n`)));
    return this.insertAndQueue(dto.object, 'jsonl', { storageKey: stored.key, size: stored.size, originalname: '' }, options, who);
  }

  /** `POST /api/imports` as multipart/form-data: the CSV already streamed to disk, the options as form fields. */
  async createFromUpload(body: unknown, file: StoredImportFile | undefined, who: Principal): Promise<ImportRecord> {
    try {
      if (!file) throw fieldError('file', 'is required: upload the CSV file in the form field "file"');
      // Reserved names (`__proto__`, `toString`, ...) and text that is not valid UTF-8: a 400, as in a JSON body.
      assertFormFields(body);
      const form = (body ?? {}) as Record<string, unknown>;
      const typedForm: Record<string, unknown> = { ...form };
      if (typeof form.mapping === 'string') {
        try {
          typedForm.mapping = JSON.parse(form.mapping) as unknown;
        } catch {
          throw fieldError('mapping', 'must be a JSON object of column → property');
        }
      }
      for (const k of ['campaignId', 'segmentId']) {
        if (typeof form[k] === 'string' && /^\d{1,10}$/.test(form[k])) typedForm[k] = Number(form[k]);
      }
      if (form.dryRun === 'true' || form.dryRun === 'false') typedForm.dryRun = form.dryRun === 'true';
      const dto = (await this.pipe.transform(typedForm, { type: 'body', metatype: ImportOptionsDto, data: '' })) as ImportOptionsDto;
      const options = await this.checkOptions(dto, who);
      return await this.insertAndQueue(dto.object, 'csv', file, options, who);
    } catch (e) {
      await this.files.delete(file?.storageKey ?? null).catch(() => undefined);
      throw e;
    }
  }

  private async insertAndQueue(object: ImportObject, format: 'csv' | 'jsonl', file: StoredImportFile, options: ImportOptions, who: Principal) {
    const principal: StoredPrincipal = {
      userId: who.userId,
      userName: who.userName,
      plan: who.plan,
      team: who.team,
      apiTokenId: who.apiTokenId,
      accessTokenId: jobCredentialOf(who)?.accessTokenId ?? null,
      permissions: [...who.permissions],
    };
    const row = await this.repository.insertImport(
      { object, sourceFormat: format, storageKey: file.storageKey, fileName: file.originalname || null, fileSize: file.size, options, principal },
      who,
    );
    try {
      await this.jobs.enqueue('imports.run', { importId: row.id }, { jobId: JOB_IDS.importRun(row.id) });
    } catch (e) {
      // Not queued (the broker is unreachable): nothing is left behind, the client retries.
      await this.repository.deleteImport(row.id);
      await this.files.delete(file.storageKey);
      throw e;
    }
    return toImportRecord(row);
  }

  /** The options as the worker will use them; 400 for what cannot work, 403 without the object's write permission. */
  private async checkOptions(dto: ImportOptionsDto, who: Principal): Promise<ImportOptions> {
    const needed = WRITE_PERMISSION[dto.object];
    if (!who.permissions.has('*') && !who.permissions.has(needed)) {
      throw new AppError('forbidden', `The token lacks the permission "${needed}" (importing ${dto.object})`);
    }
    const { segmentId, campaignId } = dto;
    if (segmentId !== undefined) {
      if (dto.object !== 'contacts') throw fieldError('segmentId', 'applies to contact imports only');
      const segment = await this.segments.get(segmentId).catch((e: unknown) => {
        if (e instanceof AppError && e.code === 'not_found') throw fieldError('segmentId', missingReferenceMessage('segment', segmentId));
        throw e;
      });
      if (segment.type !== 'static') throw fieldError('segmentId', "must be a static segment (a dynamic segment's members follow its filter)");
    }
    if (campaignId !== undefined) {
      if (dto.object !== 'contacts') throw fieldError('campaignId', 'applies to contact imports only');
      await this.campaigns.get(campaignId).catch((e: unknown) => {
        if (e instanceof AppError && e.code === 'not_found') throw fieldError('campaignId', missingReferenceMessage('campaign', campaignId));
        throw e;
      });
    }
    const idProperty = dto.idProperty ?? defaultIdProperty(dto.object, dto.mode);
    if (!ID_PROPERTIES[dto.object].includes(idProperty) && !(dto.object === 'contacts' && (await this.fieldValues.isUniqueIdentifier(idProperty)))) {
      throw fieldError(
        'idProperty',
        dto.object === 'contacts' ? 'must be id, email or the alias of a published unique-identifier contact field' : `must be id for ${dto.object}`,
      );
    }
    const mapping = dto.mapping ?? {};
    const fields = await this.customFields(dto.object);
    for (const [column, target] of Object.entries(mapping)) {
      if (typeof target !== 'string') throw fieldError(`mapping.${column}`, 'must be a property name, fields.<alias> or ignore');
      const problem = targetProblem(target, dto.object, fields);
      if (problem) throw fieldError(`mapping.${column}`, problem);
    }
    return {
      mapping,
      mode: dto.mode,
      idProperty,
      emptyValues: dto.emptyValues ?? 'ignore',
      campaignId: dto.campaignId ?? null,
      segmentId: dto.segmentId ?? null,
      dryRun: dto.dryRun === true,
      columns: null,
      chunkRows: this.config.importChunkRows,
    };
  }

  async get(id: number, who: Principal): Promise<ImportRecord> {
    return toImportRecord(await this.visible(id, who));
  }

  /**
   * An import as its reader may see it: its row errors quote the file's cells, so an import made by
   * another user is a 404, unless the token holds `*` (which reads every import), as for exports.
   */
  private async visible(id: number, who: Principal): Promise<ImportRow> {
    const row = await this.repository.findImport(id);
    if (!row || (row.createdBy !== who.userId && !who.permissions.has('*'))) throw notFound('Import', id);
    return row;
  }

  /** The JSON body of POST /api/imports, checked as the validation pipe checks every body. */
  async validateJson(body: unknown): Promise<CreateImportDto> {
    return (await this.pipe.transform(body, { type: 'body', metatype: CreateImportDto, data: '' })) as CreateImportDto;
  }

  /** The parameters of GET /api/imports/{id}/errors (400 naming each bad one). */
  errorsQuery(query: Record<string, unknown>): { limit: number; after: number; format: 'json' | 'csv' } {
    for (const k of Object.keys(query)) {
      if (!['limit', 'after', 'format'].includes(k)) throw fieldError(k, 'is not a known parameter; allowed: limit, after, format');
    }
    const format = query.format === undefined || query.format === '' ? 'json' : query.format;
    if (format !== 'json' && format !== 'csv') throw fieldError('format', 'must be json or csv');
    const limit = intParam(query.limit, 'limit', 1, ERRORS_MAX_LIMIT, 100);
    const after = intParam(query.after, 'after', 0, Number.MAX_SAFE_INTEGER, 0);
    return { limit, after, format };
  }

  /** A page of an import's row errors (`after`: the `next` of the previous page). */
  async errors(id: number, { limit, after }: { limit: number; after: number }, who: Principal) {
    await this.visible(id, who);
    const rows = await this.repository.errors(id, after, limit);
    const total = await this.repository.errorCount(id);
    return {
      total,
      errors: rows.map(toErrorRecord),
      next: rows.length === limit ? rows[rows.length - 1].id : null,
    };
  }

  /** Every row error of an import as CSV (row, column, code, message), streamed page by page. */
  async errorsCsv(id: number, res: Response, who: Principal): Promise<void> {
    await this.visible(id, who);
    res.status(200);
    res.setHeader('Content-Type', 'text/csv; charset=utf-8');
    res.setHeader('Content-Disposition', `attachment; filename="import-${id}-errors.csv"`);
    const repository = this.repository;
    async function* lines() {
      yield stringify([['row', 'column', 'code', 'message']]);
      let after = 0;
      for (;;) {
        const page: ImportErrorRow[] = await repository.errors(id, after, ERRORS_MAX_LIMIT);
        if (!page.length) return;
        // The column is the file's header text and the message may quote a cell: neither may run as a formula.
        yield stringify(page.map((e) => [e.row, neutraliseFormula(e.column ?? ''), e.code, neutraliseFormula(e.message)]));
        after = Number(page[page.length - 1].id);
      }
    }
    // A client that closes early ends the pipeline with ERR_STREAM_PREMATURE_CLOSE (logged as an abort by the
    // exception filter) and stops the paging; with pipe() the promise never settled and the pages kept coming.
    await pipeline(Readable.from(lines()), res);
  }

  /** Cancels an open import: the worker stops before its next chunk; what was committed stays. 409 when it has already ended. */
  async cancel(id: number, who: Principal): Promise<ImportRecord> {
    await this.visible(id, who);
    const record = await this.transactions.run(async (tx) => {
      // One conditional UPDATE, no SELECT … FOR UPDATE first: the chunks being written hold the import's
      // row FOR KEY SHARE (their foreign keys) for their whole transaction, which FOR UPDATE waits for
      // and an UPDATE does not; the chunk's own final UPDATE then finds the import canceled and rolls back.
      const done = await this.repository.finish(id, 'canceled', null, tx);
      if (!done) {
        const current = await this.repository.findImport(id, tx);
        if (!current) throw notFound('Import', id);
        throw new AppError('conflict', `Import ${id} has already ended (${current.status})`, [{ field: 'status', message: `is ${current.status}` }]);
      }
      const r = toImportRecord(done);
      await this.events.record(tx, 'import.completed', r);
      return { r, key: done.storageKey };
    });
    // The running worker finds the import canceled at its next chunk; the file is not needed any more.
    await this.files.delete(record.key).catch(() => undefined);
    return record.r;
  }

  // ---- the worker's side (imports.processor.ts) ----

  /**
   * Takes up an import (null when it has ended). Each call is one more run; past MAX_JOB_RUNS the
   * earlier runs all died without finishing it, and it ends `failed` (RUNS_EXHAUSTED) instead.
   */
  async start(id: number): Promise<ImportRow | null> {
    const row = await this.repository.start(id);
    if (!row || row.runs <= MAX_JOB_RUNS) return row;
    this.logger.warn({ msg: 'import failed', importId: id, err: RUNS_EXHAUSTED });
    if (await this.finish(id, 'failed', RUNS_EXHAUSTED)) await this.dropFile(row);
    return null;
  }

  /** The run stopped between chunks for a shutdown: it does not count as one that died. */
  giveBackRun(id: number): Promise<void> {
    return this.repository.giveBackRun(id);
  }

  /** The published custom fields of the object, as the column plan reads them. */
  async customFields(object: ImportObject): Promise<CustomFieldType[]> {
    const fieldObject = FIELD_OBJECT[object];
    if (!fieldObject) return [];
    return (await this.fieldValues.publishedRules(undefined, fieldObject)).map((r) => ({ alias: r.alias, type: r.type }));
  }

  async planFor(row: ImportRow, header: string[]): Promise<ColumnPlan[]> {
    return planColumns(header, row.options.mapping, row.object, await this.customFields(row.object), row.options.idProperty);
  }

  recordOf(cells: unknown[], plans: ColumnPlan[], row: ImportRow): Record<string, unknown> | null {
    return rowRecord(cells, plans, row.options.emptyValues, row.sourceFormat === 'csv');
  }

  setTotal(id: number, total: number): Promise<ImportRow | null> {
    return this.repository.setTotal(id, total);
  }

  /**
   * Writes one chunk (`chunk`: its number in the file) in one transaction with its checkpoint row
   * (import_chunks) and its counts. Answers `written`; `skipped` when that chunk is committed
   * already (another runner wrote it); `stopped` when the import is not running (canceled before or
   * while the chunk was written: then nothing of it is kept).
   */
  async writeChunk(imp: ImportRow, chunk: number, rows: ChunkRow[], plans: ColumnPlan[]): Promise<'written' | 'skipped' | 'stopped'> {
    const who = principalOf(imp.principal);
    return this.transactions
      .run(async (tx) => {
        const current = await this.repository.findImport(imp.id, tx);
        if (current?.status !== 'running') return 'stopped' as const;
        if (!(await this.repository.claimChunk(imp.id, chunk, tx))) return 'skipped' as const;
        const counts: ChunkCounts = { rows: rows.length, created: 0, updated: 0, skipped: 0, failed: 0 };
        const errors: { row: number; column: string | null; code: string; message: string }[] = [];
        const live: ChunkRow[] = [];
        for (const r of rows) {
          if (r.record === null) {
            counts.skipped++;
            continue;
          }
          // A cell the database cannot store (NUL, an unpaired surrogate in JSON Lines) is the row's error,
          // as the same value in a request body is a 400, rather than a database error failing the chunk.
          const bad = inspectBody(r.record);
          if (bad.length) {
            counts.failed++;
            for (const d of bad) errors.push({ row: r.row, column: columnOf(d.field, plans), code: 'validation_failed', message: `${d.field}: ${d.message}` });
            continue;
          }
          live.push(r);
        }
        if (live.length) {
          const dto: BatchWriteDto = { mode: imp.options.mode, idProperty: imp.options.idProperty, items: live.map((r) => r.record) };
          const answer = imp.options.dryRun
            ? await this.transactions
                .run(async (sp) => {
                  throw new DryRunRollback(await this.batch(imp.object, dto, who, sp));
                }, tx)
                .catch((e: unknown) => {
                  if (e instanceof DryRunRollback) return e.answer;
                  throw e;
                })
            : await this.batch(imp.object, dto, who, tx);
          counts.created = answer.summary.created;
          counts.updated = answer.summary.updated;
          counts.failed += answer.summary.failed;
          const ids: number[] = [];
          for (const r of answer.results) {
            const rowNumber = live[r.index].row;
            if (!r.error) {
              if (r.id !== undefined) ids.push(r.id);
              continue;
            }
            const details = r.error.details?.length ? r.error.details : [undefined];
            for (const d of details) {
              const field = typeof d?.field === 'string' ? d.field : undefined;
              let message = d ? `${field ? `${field}: ` : ''}${d.message}` : r.error.message;
              if (typeof d?.index === 'number' && r.error.code === 'conflict' && live[d.index] !== undefined) {
                message = `names the same ${field ?? 'record'} as row ${live[d.index].row}; a file may name a record once per chunk`;
              }
              errors.push({ row: rowNumber, column: columnOf(field, plans), code: r.error.code, message });
            }
          }
          if (imp.options.campaignId !== null && !imp.options.dryRun) await this.campaigns.addContacts(imp.options.campaignId, ids, tx);
          const segmentId = imp.options.segmentId ?? null;
          if (segmentId !== null && !imp.options.dryRun) await this.segments.addContacts(segmentId, ids, tx);
        }
        await this.repository.insertErrors(imp.id, errors, tx);
        // Last: waits for a cancel in progress, and rolls the chunk back when the import is no longer running.
        if (!(await this.repository.commitChunk(imp.id, counts, tx))) throw new ChunkAbandoned();
        return 'written' as const;
      })
      .catch((e: unknown) => {
        if (e instanceof ChunkAbandoned) return 'stopped' as const;
        throw e;
      });
  }

  /** The chunks of an import already committed. */
  committedChunks(id: number): Promise<Set<number>> {
    return this.repository.committedChunks(id);
  }

  private batch(object: ImportObject, dto: BatchWriteDto, who: Principal, tx: Tx): Promise<BatchAnswer> {
    switch (object) {
      case 'contacts':
        return this.contacts.batch(dto, who, tx);
      case 'companies':
        return this.companies.batch(dto, who, tx);
      case 'deals':
        return this.deals.batch(dto, who, tx);
    }
  }

  /**
   * Ends an import (completed or failed) with its import.completed event and a notification to its
   * creator, in one transaction; nothing when it had already ended (canceled meanwhile).
   */
  async finish(id: number, status: 'completed' | 'failed', error: string | null): Promise<ImportRecord | null> {
    const record = await this.transactions.run(async (tx) => {
      const row = await this.repository.finish(id, status, error, tx);
      if (!row) return null;
      const r = toImportRecord(row);
      await this.events.record(tx, 'import.completed', r);
      if (row.createdBy !== null) {
        const c = r.counts;
        const message =
          status === 'completed'
            ? `The ${row.object} import ${id}${row.options.dryRun ? ' (dry run)' : ''} is done: ${c.created} created, ${c.updated} updated, ${c.skipped} skipped, ${c.failed} failed`
            : `The ${row.object} import ${id} failed: ${error ?? 'unknown error'}`;
        await this.notifications.notify(row.createdBy, 'import_completed', message, { importId: id, status, counts: c }, tx);
      }
      return r;
    });
    if (record) this.logger.log({ msg: 'import ended', importId: id, status, counts: record.counts, ms: record.durationMs });
    return record;
  }

  /** The stored file of an ended import is no longer needed. */
  async dropFile(row: ImportRow): Promise<void> {
    await this.files.delete(row.storageKey).catch(() => undefined);
  }

  openImportIds(): Promise<number[]> {
    return this.repository.openImportIds();
  }

  findRow(id: number): Promise<ImportRow | null> {
    return this.repository.findImport(id);
  }

  /** Chunks one import writes at once (IMPORT_PARALLEL_CHUNKS). */
  get parallelChunks(): number {
    return this.config.importParallelChunks;
  }
}

function toErrorRecord(e: ImportErrorRow) {
  return { row: e.row, column: e.column, code: e.code, message: e.message };
}

/** The import's creator as the batch writes see them. */
function principalOf(p: StoredPrincipal): Principal {
  return {
    userId: p.userId,
    userName: p.userName,
    plan: p.plan as Plan,
    team: p.team,
    apiTokenId: p.apiTokenId,
    permissions: new Set(p.permissions),
    kind: 'api_token',
    expiresAt: null,
  };
}

function intParam(raw: unknown, name: string, min: number, max: number, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (typeof raw !== 'string' || !/^\d{1,16}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw fieldError(name, `must be an integer from ${min} to ${max}`);
  }
  return Number(raw);
}
