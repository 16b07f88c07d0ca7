import { Inject, Injectable, Logger } from '@nestjs/common';
import type { BatchAnswer } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import type { Principal } from '../common/request.js';
import { APP_CONFIG, type AppConfig, type Plan } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { inspectBody } from '../server/request-text.middleware.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { CompaniesService } from '../companies/companies.service.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { DealsService } from '../deals/deals.service.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { type PointChangeContext, pointsProblem, ScoringService } from '../scoring/scoring.service.js';
import { SegmentsService } from '../segments/segments.service.js';
import { type ImportRecord, publishedCustomFields, toImportRecord } from './import-record.js';
import { type ColumnPlan, columnOf, type ImportObject, MAX_JOB_RUNS, planColumns, rowRecord, RUNS_EXHAUSTED } from './import.rules.js';
import { type ChunkCounts, type ImportRow, ImportsRepository, type StoredPrincipal } from './imports.repository.js';
import { JobFiles } from './job-files.js';

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

/** A row of a chunk: its number (1-based data row) and its record (null: every mapped cell empty, skipped). */
export interface ChunkRow {
  row: number;
  record: Record<string, unknown> | null;
}

/**
 * The worker's side of an import (imports.processor.ts): taking it up, planning its columns, writing
 * each chunk through the object's batch write path in one transaction with its checkpoint, and
 * ending it with its event and notification.
 */
@Injectable()
export class ImportRunner {
  private readonly logger = new Logger('Imports');

  constructor(
    private readonly repository: ImportsRepository,
    private readonly files: JobFiles,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly notifications: NotificationsService,
    private readonly contacts: ContactsService,
    private readonly companies: CompaniesService,
    private readonly deals: DealsService,
    private readonly campaigns: CampaignsService,
    private readonly segments: SegmentsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly scoring: ScoringService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

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

  async planFor(row: ImportRow, header: string[]): Promise<ColumnPlan[]> {
    return planColumns(header, row.options.mapping, row.object, await publishedCustomFields(this.fieldValues, row.object), row.options.idProperty);
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
        const live: LiveRow[] = [];
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
          // Points (contacts): set through the ledger after the row is written, not by the batch write (whose routes refuse them).
          const { record, points, problem } = takePoints(imp.object, r.record);
          if (problem) {
            counts.failed++;
            errors.push({ row: r.row, column: columnOf(POINTS, plans), code: 'validation_failed', message: `${POINTS}: ${problem}` });
            continue;
          }
          live.push({ row: r.row, record, points });
        }
        if (live.length) {
          const dto: BatchWriteDto = { mode: imp.options.mode, idProperty: imp.options.idProperty, items: live.map((r) => r.record) };
          const write = async (t: Tx) => {
            const written = await this.batch(imp.object, dto, who, t);
            await this.setPoints(imp, written, live, t);
            return written;
          };
          const answer = imp.options.dryRun
            ? await this.transactions
                .run(async (sp) => {
                  throw new DryRunRollback(await write(sp));
                }, tx)
                .catch((e: unknown) => {
                  if (e instanceof DryRunRollback) return e.answer;
                  throw e;
                })
            : await write(tx);
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

  /**
   * The `points` cells of the rows written (created or updated), set as the contacts' points: a ledger
   * row `source: import` with the difference, by the import's creator, in the chunk's transaction.
   */
  private async setPoints(imp: ImportRow, answer: BatchAnswer, live: readonly LiveRow[], tx: Tx): Promise<void> {
    const targets = answer.results.flatMap((r) => {
      const points = live[r.index]?.points;
      if (r.error || r.id === undefined || points === undefined) return [];
      const context: PointChangeContext = {
        source: 'import',
        reason: `import ${imp.id}, row ${live[r.index].row}: points set to ${points}`,
        details: { importId: imp.id, row: live[r.index].row },
        by: { userId: imp.principal.userId, userName: imp.principal.userName },
      };
      return [{ contactId: r.id, points, context }];
    });
    await this.scoring.setPoints(targets, tx);
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

/** A row to write: its record without `points`, and the points its `points` cell sets (contacts), if any. */
interface LiveRow {
  row: number;
  record: Record<string, unknown>;
  points?: number;
}

/** The property an import sets a contact's points with (SET_BY_IMPORT). */
const POINTS = 'points';

/**
 * A row's record split into what the batch write takes and the points it sets: a contact's `points`
 * cell is a whole number within ±2^31 (the row fails otherwise, naming the column); an empty cell
 * with emptyValues `clear` sets 0; with `ignore` (no cell) the points stay as they are.
 */
function takePoints(object: ImportObject, record: Record<string, unknown>): { record: Record<string, unknown>; points?: number; problem?: string } {
  if (object !== 'contacts' || !Object.hasOwn(record, POINTS)) return { record };
  const { [POINTS]: value, ...rest } = record;
  const points = value === null ? 0 : value;
  const problem = pointsProblem(points);
  return problem ? { record: rest, problem } : { record: rest, points: points as number };
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
