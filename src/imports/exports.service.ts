import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { Response } from 'express';
import { iso } from '../common/dates.js';
import type { ListSpec } from '../lists/list-spec.js';
import { type CredentialWatch, jobCredentialOf, TokensService } from '../auth/tokens.service.js';
import { AppError, notFound } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { type SignedLinkParams, SignedLinks } from '../common/signed-links.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { COMPANY_LIST_SPEC } from '../companies/company.columns.js';
import { CompaniesService } from '../companies/companies.service.js';
import { CONTACT_LIST_SPEC } from '../contacts/contact.columns.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { DEAL_LIST_SPEC } from '../deals/deals.repository.js';
import { DealsService } from '../deals/deals.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import type { CreateExportDto } from './import.dto.js';
import {
  csvCell,
  csvLine,
  EXPORT_FORMATS,
  exportColumns,
  FIELD_OBJECT,
  IMPORT_OBJECTS,
  type ImportObject,
  MAX_JOB_RUNS,
  RUNS_EXHAUSTED,
} from './import.rules.js';
import { type ExportRow, ImportsRepository } from './imports.repository.js';
import { JobFiles } from './job-files.js';

/** The path of the download route, as Express names it (the signed-link verifier is registered under it). */
export const EXPORT_DOWNLOAD_ROUTE = '/api/exports/:id/download';

const READ_PERMISSION: Record<ImportObject, string> = { contacts: 'contacts:read', companies: 'companies:read', deals: 'deals:read' };

/**
 * The properties an export writes per object: the record's properties as its list publishes them,
 * without the nested objects, the custom values (a column each, `fields.<alias>`, after these) and the
 * audit users.
 */
const NOT_COLUMNS = new Set(['companyRef', 'owner', 'fields', 'doNotContact', 'createdBy', 'createdByUser', 'modifiedBy', 'modifiedByUser']);
const columnsOf = (spec: ListSpec): readonly string[] => (spec.properties ?? []).filter((p) => !NOT_COLUMNS.has(p));
const BASE_COLUMNS: Record<ImportObject, readonly string[]> = {
  contacts: columnsOf(CONTACT_LIST_SPEC),
  companies: columnsOf(COMPANY_LIST_SPEC),
  deals: columnsOf(DEAL_LIST_SPEC),
};

/** Contacts read per statement of the keyset walk. */
const CONTACT_PAGE = 2000;
/** Other objects walk their list with a cursor, at its largest page. */
const LIST_PAGE = '200';

type AnyRecord = Record<string, unknown>;

export type ExportRecord = ReturnType<ExportsService['toRecord']>;

/**
 * Export jobs (docs/decisions/imports-and-exports.md). The API checks the request (the object's read permission, the
 * filter in its list's language, the columns) and queues the job; the worker walks the matching
 * records in id order (a keyset walk, never OFFSET) and streams them as CSV or JSON Lines into
 * storage; it acts for the token that asked for it and stops (`failed`, with the reason) once that
 * token is revoked, deleted or expired. The result is downloaded through a signed, expiring link (credential `signed-link`,
 * checked by the global guard chain through the verifier registered here).
 */
@Injectable()
export class ExportsService implements OnModuleInit {
  private readonly logger = new Logger('Exports');

  constructor(
    private readonly repository: ImportsRepository,
    private readonly files: JobFiles,
    private readonly jobs: JobQueue,
    private readonly links: SignedLinks,
    private readonly contacts: ContactsService,
    private readonly companies: CompaniesService,
    private readonly deals: DealsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly tokens: TokensService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.links.register(EXPORT_DOWNLOAD_ROUTE, (link) => this.verifyLink(link));
  }

  /** What an export may be made of and in (the console's form offers these). */
  choices(): { objects: readonly string[]; formats: readonly string[] } {
    return { objects: IMPORT_OBJECTS, formats: EXPORT_FORMATS };
  }

  async create(dto: CreateExportDto, who: Principal): Promise<ExportRecord> {
    mayRead(who, dto.object);
    exportColumns(BASE_COLUMNS[dto.object], await this.customAliases(dto.object), dto.fields);
    // The filter is checked by the list it belongs to (the same 400s as its `filter` parameter).
    await this.page(dto.object, dto.filter, null, true);
    const row = await this.repository.insertExport(
      {
        object: dto.object,
        format: dto.format,
        options: { filter: dto.filter ?? null, fields: dto.fields ?? null, escapeFormulas: dto.escapeFormulas !== false },
        linkSecret: randomBytes(32).toString('hex'),
        apiTokenId: jobCredentialOf(who)?.apiTokenId ?? null,
        accessTokenId: jobCredentialOf(who)?.accessTokenId ?? null,
      },
      who,
    );
    await this.jobs.enqueue('exports.run', { exportId: row.id }, { jobId: JOB_IDS.exportRun(row.id) });
    return this.toRecord(row);
  }

  /**
   * An export as its reader may see it. The answer holds a download link to every exported record,
   * so reading it needs what creating it needed (the object's read permission, else 403); and an
   * export made by another user is a 404, unless the token holds `*` (which reads every export).
   */
  async get(id: number, who: Principal): Promise<ExportRecord> {
    const row = await this.repository.findExport(id);
    if (!row || (row.createdBy !== who.userId && !who.permissions.has('*'))) throw notFound('Export', id);
    mayRead(who, row.object);
    return this.toRecord(row);
  }

  toRecord(r: ExportRow, now = Date.now()) {
    let download: { url: string; expiresAt: string } | null = null;
    if (r.status === 'completed') {
      const expires = Math.floor(now / 1000) + this.config.exportLinkTtlSeconds;
      const signature = sign(r.linkSecret, r.id, expires);
      download = {
        url: `${this.config.baseUrl}${EXPORT_DOWNLOAD_ROUTE.replace(':id', String(r.id))}?expires=${expires}&signature=${signature}`,
        expiresAt: new Date(expires * 1000).toISOString(),
      };
    }
    return {
      id: r.id,
      object: r.object,
      format: r.format,
      status: r.status,
      filter: r.options.filter,
      fields: r.options.fields,
      escapeFormulas: r.options.escapeFormulas !== false,
      rows: r.rowCount,
      size: r.byteSize === null ? null : Number(r.byteSize),
      error: r.error,
      download,
      createdAt: iso(r.createdAt) ?? '',
      startedAt: iso(r.startedAt),
      finishedAt: iso(r.finishedAt),
      createdBy: r.createdBy,
      createdByUser: r.createdByUser,
    };
  }

  /** Whether a download link is one this service signed for a completed export, and unexpired. */
  async verifyLink(link: SignedLinkParams): Promise<boolean> {
    const id = link.params.id;
    if (!/^\d{1,10}$/.test(id) || !/^\d{1,12}$/.test(link.expires ?? '') || !/^[0-9a-f]{64}$/.test(link.signature ?? '')) return false;
    const expires = Number(link.expires);
    if (expires * 1000 <= Date.now()) return false;
    const row = await this.repository.findExport(Number(id));
    if (row?.status !== 'completed') return false;
    const expected = Buffer.from(sign(row.linkSecret, row.id, expires), 'hex');
    const given = Buffer.from(link.signature ?? '', 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /** Streams a completed export's result (the link was verified by the guard chain). */
  async download(id: number, res: Response): Promise<void> {
    const row = await this.repository.findExport(id);
    if (row?.status !== 'completed' || !row.storageKey) throw notFound('Export', id);
    const size = await this.files.size(row.storageKey);
    if (size === null) throw notFound('Export result', id);
    res.status(200);
    res.setHeader('Content-Type', row.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
    res.setHeader('Content-Length', String(size));
    res.setHeader('Content-Disposition', `attachment; filename="${row.object}-export-${row.id}.${row.format}"`);
    res.setHeader('Cache-Control', 'private, no-store');
    await pipeline(this.files.open(row.storageKey), res);
  }

  // ---- the worker's side (imports.processor.ts) ----

  /** Runs an export from the start (a run that stopped midway starts over; its partial file was never kept). */
  async run(exportId: number, final: boolean): Promise<void> {
    const row = await this.repository.startExport(exportId);
    if (!row) return;
    // Each run counts; past MAX_JOB_RUNS the earlier runs all died without finishing the export.
    if (row.runs > MAX_JOB_RUNS) {
      this.logger.warn({ msg: 'export failed', exportId, err: RUNS_EXHAUSTED });
      await this.repository.failExport(exportId, RUNS_EXHAUSTED);
      return;
    }
    const started = Date.now();
    const counter = { rows: 0 };
    try {
      const credential = this.tokens.watch(row.apiTokenId ? { apiTokenId: row.apiTokenId, accessTokenId: row.accessTokenId } : null);
      const { key, size } = await this.files.write('exports', Readable.from(this.lines(row, counter, credential)));
      const done = await this.repository.completeExport(exportId, { storageKey: key, byteSize: size, rowCount: counter.rows });
      if (!done) await this.files.delete(key);
      else if (done.previous && done.previous !== key) await this.files.delete(done.previous);
      const ms = Date.now() - started;
      this.logger.log({
        msg: 'export done',
        exportId,
        rows: counter.rows,
        bytes: size,
        ms,
        rowsPerSecond: Math.round((counter.rows * 1000) / Math.max(1, ms)),
      });
    } catch (e) {
      if ((e instanceof AppError && e.status < 500) || final) {
        await this.repository.failExport(exportId, e instanceof Error ? e.message : String(e));
        return;
      }
      throw e;
    }
  }

  /** The export's content: a header line (CSV), then the records page by page. */
  private async *lines(row: ExportRow, counter: { rows: number }, credential: CredentialWatch): AsyncGenerator<string> {
    const columns = exportColumns(BASE_COLUMNS[row.object], await this.customAliases(row.object), row.options.fields ?? undefined);
    const csv = row.format === 'csv';
    const escapeFormulas = row.options.escapeFormulas !== false;
    if (csv) yield stringify([columns]);
    let cursor: string | number | null = null;
    for (;;) {
      // The token that asked for the export, checked before every page (read at most once a second).
      const ended = await credential.ended();
      if (ended) throw new AppError('forbidden', `Export ${row.id} ${ended}`);
      const { records, next } = await this.page(row.object, row.options.filter, cursor, false);
      if (records.length) {
        counter.rows += records.length;
        yield csv
          ? records.map((r) => csvLine(columns.map((c) => csvCell(r, c, escapeFormulas)))).join('')
          : records.map((r) => `${JSON.stringify(pick(r, columns))}\n`).join('');
      }
      if (next === null) return;
      cursor = next;
    }
  }

  /**
   * One page of the walk: contacts by their own keyset statement (id after the cursor), the other
   * objects through their list with a cursor. `probe`: one record, to check the filter.
   */
  private async page(
    object: ImportObject,
    filter: unknown,
    cursor: string | number | null,
    probe: boolean,
  ): Promise<{ records: AnyRecord[]; next: string | number | null }> {
    if (object === 'contacts') {
      const limit = probe ? 1 : CONTACT_PAGE;
      const rows = await this.contacts.exportPage(filter, typeof cursor === 'number' ? cursor : 0, limit);
      const records = rows as unknown as AnyRecord[];
      return { records, next: rows.length === limit ? rows[rows.length - 1].id : null };
    }
    const query: Record<string, unknown> = { after: typeof cursor === 'string' ? cursor : '', limit: probe ? '1' : LIST_PAGE, count: 'false', orderBy: 'id' };
    if (filter !== null && filter !== undefined) query.filter = filter;
    const answer = object === 'deals' ? await this.deals.list(query) : await this.companies.list(query);
    const records = ('deals' in answer ? answer.deals : answer.companies) as unknown as AnyRecord[];
    return { records, next: answer.next ?? null };
  }

  private async customAliases(object: ImportObject): Promise<string[]> {
    const fieldObject = FIELD_OBJECT[object];
    if (!fieldObject) return [];
    return (await this.fieldValues.publishedRules(undefined, fieldObject)).map((r) => r.alias);
  }

  async openExportIds(): Promise<number[]> {
    return this.repository.openExportIds();
  }
}

/** Exporting, or reading an export of, `object` needs its read permission: 403 naming it otherwise. */
function mayRead(who: Principal, object: ImportObject): void {
  const needed = READ_PERMISSION[object];
  if (!who.permissions.has('*') && !who.permissions.has(needed)) {
    throw new AppError('forbidden', `The token lacks the permission "${needed}" (an export of ${object} holds ${object} records)`);
  }
}

function sign(secret: string, id: number, expires: number): string {
  return createHmac('sha256', secret).update(`${id}.${expires}`).digest('hex');
}

/** A record with only the chosen columns (custom fields nested under `fields`, as the API answers them). */
function pick(record: AnyRecord, columns: readonly string[]): AnyRecord {
  const out: AnyRecord = {};
  for (const c of columns) {
    if (c.startsWith('fields.')) {
      const alias = c.slice(7);
      const fields = (out.fields ??= {}) as AnyRecord;
      fields[alias] = (record.fields as AnyRecord | undefined)?.[alias] ?? null;
    } else out[c] = record[c] ?? null;
  }
  return out;
}
