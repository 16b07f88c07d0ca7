import { Inject, Injectable } from '@nestjs/common';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { Response } from 'express';
import type { StorageEngine } from 'multer';
import { jobCredentialOf } from '../auth/tokens.service.js';
import { missingReferenceMessage } from '../common/documented-rules.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { AppValidationPipe } from '../server/validation.pipe.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions } from '../database/transactions.js';
import { assertFormFields } from '../server/request-text.middleware.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { SegmentsService } from '../segments/segments.service.js';
import { CreateImportDto, ImportOptionsDto } from './import.dto.js';
import { type ImportRecord, publishedCustomFields, toErrorRecord, toImportRecord } from './import-record.js';
import { ImportUploadEngine, type StoredImportFile } from './import-upload.engine.js';
import { openSource } from './import-source.js';
import {
  defaultIdProperty,
  ID_PROPERTIES,
  IMPORT_MODES,
  IMPORT_OBJECTS,
  type ImportObject,
  neutraliseFormula,
  targetProblem,
  WRITABLE,
} from './import.rules.js';
import { type ImportErrorRow, type ImportOptions, type ImportRow, ImportsRepository, type StoredPrincipal } from './imports.repository.js';
import { JobFiles } from './job-files.js';

export type { StoredImportFile };
/** What an import writes (contacts, companies, deals) and how (create, update, upsert), for forms that offer them. */
export const IMPORT_CHOICES = { objects: IMPORT_OBJECTS, modes: IMPORT_MODES };

/** The permission importing into an object needs (besides imports:write). */
const WRITE_PERMISSION: Record<ImportObject, string> = { contacts: 'contacts:write', companies: 'companies:write', deals: 'deals:write' };
/** Errors a page of GET /api/imports/{id}/errors holds at most. */
const ERRORS_MAX_LIMIT = 1000;

/**
 * Import jobs, the API's side. The API checks the options, stores the upload (streamed to disk) and
 * queues the job; the worker (imports.processor.ts with ImportRunner) reads the file in chunks and
 * writes each chunk through the object's batch write path (the single-record routes' validation,
 * custom fields, events, constraint errors) in one transaction with the import's checkpoint, so a
 * worker killed mid-import resumes after the last committed chunk and writes no row twice.
 */
@Injectable()
export class ImportsService {
  private readonly pipe = new AppValidationPipe();

  constructor(
    private readonly repository: ImportsRepository,
    private readonly files: JobFiles,
    private readonly jobs: JobQueue,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
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
      return await this.createFromStoredFile(body, file, who);
    } catch (e) {
      await this.files.delete(file?.storageKey ?? null).catch(() => undefined);
      throw e;
    }
  }

  /**
   * An import of a CSV already in the job files (an upload, or one the console kept while its user
   * mapped the columns), with the options as form fields (`mapping` as JSON text). On a refusal the
   * file is left where it is: the caller decides whether to keep it (the console shows the form again).
   */
  async createFromStoredFile(body: unknown, file: StoredImportFile, who: Principal): Promise<ImportRecord> {
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
  }

  /**
   * The header line of a stored CSV (the delimiter detected, cells trimmed), read as the worker will
   * read it; a file that is not UTF-8 CSV, or has no header, is a 400 naming the field `file`.
   */
  async headerOf(storageKey: string): Promise<string[]> {
    const source = await openSource(this.files, storageKey, 'csv', null);
    // Started, then ended: only a started generator runs its cleanup (closing the parser and the file).
    await source.rows.next().catch(() => undefined);
    await source.rows.return(undefined);
    return source.header;
  }

  /** Removes a stored upload that will not be imported (nothing when it is already gone). */
  async discardFile(storageKey: string): Promise<void> {
    await this.files.delete(storageKey).catch(() => undefined);
  }

  /** What a column may be mapped to in an import of `object`: its writable properties, `id`, its published custom fields (`fields.<alias>`). */
  async mappingTargets(object: ImportObject): Promise<{ properties: string[]; fields: string[]; idProperties: string[] }> {
    const fields = await publishedCustomFields(this.fieldValues, object);
    return {
      properties: ['id', ...Object.keys(WRITABLE[object])],
      fields: fields.map((f) => `fields.${f.alias}`),
      idProperties: [...ID_PROPERTIES[object]],
    };
  }

  /** A multer storage engine for CSV uploads (size limit, UTF-8 check, streamed to the job files), for the console's upload form. */
  uploadStorage(): StorageEngine {
    return new ImportUploadEngine(this.files, this.config.importMaxBytes);
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
    const fields = await publishedCustomFields(this.fieldValues, dto.object);
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
}

function intParam(raw: unknown, name: string, min: number, max: number, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (typeof raw !== 'string' || !/^\d{1,16}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw fieldError(name, `must be an integer from ${min} to ${max}`);
  }
  return Number(raw);
}
