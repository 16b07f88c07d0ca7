import { Injectable } from '@nestjs/common';
import { storableText } from '../common/storable-text.js';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import type { ExportFormat, ImportObject, ImportStatus } from './import.rules.js';

/** The options an import was created with (stored as they were checked). */
export interface ImportOptions {
  mapping: Record<string, string>;
  mode: 'create' | 'update' | 'upsert';
  idProperty: string;
  emptyValues: 'ignore' | 'clear';
  campaignId: number | null;
  /** Contacts only: the static segment every imported contact joins (absent in imports made before segments existed). */
  segmentId?: number | null;
  dryRun: boolean;
  /** JSON rows: the keys of the rows, in first-seen order (the "header"). */
  columns: string[] | null;
  /** Rows per chunk, fixed when the import is created (chunk n holds rows n*chunkRows+1 ...). */
  chunkRows: number;
}

/** Who created an import: the batch writes run as this principal. */
export interface StoredPrincipal {
  userId: number;
  userName: string;
  plan: string;
  team: string | null;
  apiTokenId: number;
  /** The OAuth access token that started the import (absent for an API token, and in imports stored before it was recorded). */
  accessTokenId?: number | null;
  permissions: string[];
}

export interface ImportRow {
  id: number;
  object: ImportObject;
  status: ImportStatus;
  sourceFormat: 'csv' | 'jsonl';
  storageKey: string | null;
  fileName: string | null;
  fileSize: string;
  options: ImportOptions;
  principal: StoredPrincipal;
  totalRows: number | null;
  processedRows: number;
  createdCount: number;
  updatedCount: number;
  skippedCount: number;
  failedCount: number;
  error: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export interface ImportErrorRow {
  id: string;
  row: number;
  column: string | null;
  code: string;
  message: string;
}

export interface ExportOptions {
  filter: unknown;
  fields: string[] | null;
  /** CSV: neutralise cells a spreadsheet would run as formulas (absent in exports made before the option: true). */
  escapeFormulas?: boolean;
}

export interface ExportRow {
  id: number;
  object: ImportObject;
  format: ExportFormat;
  status: 'queued' | 'running' | 'completed' | 'failed';
  options: ExportOptions;
  rowCount: number;
  storageKey: string | null;
  byteSize: string | null;
  linkSecret: string;
  error: string | null;
  /** The token that asked for the export (the job stops when it is revoked); null in exports made before it was recorded. */
  apiTokenId: number | null;
  accessTokenId: number | null;
  createdBy: number | null;
  createdByUser: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const IMPORT_COLUMNS = `id, object, status, source_format AS "sourceFormat", storage_key AS "storageKey", file_name AS "fileName",
  file_size AS "fileSize", options, principal, total_rows AS "totalRows", processed_rows AS "processedRows",
  created_count AS "createdCount", updated_count AS "updatedCount", skipped_count AS "skippedCount", failed_count AS "failedCount",
  error, created_by AS "createdBy", created_by_user AS "createdByUser", created_at AS "createdAt", started_at AS "startedAt",
  finished_at AS "finishedAt"`;

const EXPORT_COLUMNS = `id, object, format, status, options, row_count AS "rowCount", storage_key AS "storageKey", byte_size AS "byteSize",
  link_secret AS "linkSecret", error, api_token_id AS "apiTokenId", access_token_id AS "accessTokenId", created_by AS "createdBy", created_by_user AS "createdByUser", created_at AS "createdAt",
  started_at AS "startedAt", finished_at AS "finishedAt"`;

const OPEN = `('queued', 'validating', 'running')`;

/** Counts one chunk adds to an import. */
export interface ChunkCounts {
  rows: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
}

/** Every query of the `imports`, `import_errors` and `exports` tables. */
@Injectable()
export class ImportsRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  async insertImport(
    v: Pick<ImportRow, 'object' | 'sourceFormat' | 'storageKey' | 'fileName' | 'options' | 'principal'> & { fileSize: number },
    who: { userId: number; userName: string },
    tx?: Tx,
  ): Promise<ImportRow> {
    const rows = await this.db(tx).query<ImportRow[]>(
      `INSERT INTO imports (object, source_format, storage_key, file_name, file_size, options, principal, created_by, created_by_user)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${IMPORT_COLUMNS}`,
      [v.object, v.sourceFormat, v.storageKey, v.fileName, v.fileSize, JSON.stringify(v.options), JSON.stringify(v.principal), who.userId, who.userName],
    );
    return rows[0];
  }

  async findImport(id: number, tx?: Tx): Promise<ImportRow | null> {
    const rows = await this.db(tx).query<ImportRow[]>(`SELECT ${IMPORT_COLUMNS} FROM imports WHERE id = $1`, [id]);
    return rows[0] ?? null;
  }

  async deleteImport(id: number): Promise<void> {
    await this.db().query(`DELETE FROM imports WHERE id = $1`, [id]);
  }

  /** A worker takes up an open import: queued becomes validating (a running one stays running). Null when it is finished. */
  async start(id: number): Promise<(ImportRow & { runs: number }) | null> {
    const rows = await returning<ImportRow & { runs: number }>(
      this.db(),
      `UPDATE imports SET status = CASE WHEN status = 'queued' THEN 'validating' ELSE status END,
              started_at = coalesce(started_at, now()), modified_at = now(), runs = runs + 1
        WHERE id = $1 AND status IN ${OPEN} RETURNING ${IMPORT_COLUMNS}, runs`,
      [id],
    );
    return rows[0] ?? null;
  }

  /** A run that stopped for a shutdown (not a death) does not count towards the bound on runs. */
  async giveBackRun(id: number): Promise<void> {
    await this.db().query(`UPDATE imports SET runs = greatest(runs - 1, 0) WHERE id = $1`, [id]);
  }

  /** The validation pass counted the rows: the import runs. Null when it was canceled meanwhile. */
  async setTotal(id: number, total: number): Promise<ImportRow | null> {
    const rows = await returning<ImportRow>(
      this.db(),
      `UPDATE imports SET total_rows = $2, status = 'running', modified_at = now() WHERE id = $1 AND status IN ${OPEN} RETURNING ${IMPORT_COLUMNS}`,
      [id, total],
    );
    return rows[0] ?? null;
  }

  /**
   * Claims a chunk for the transaction writing it: false when it is committed already (a second
   * writer of the same chunk waits here for the first, and skips it once that one commits).
   */
  async claimChunk(importId: number, chunk: number, tx: Tx): Promise<boolean> {
    const rows = await tx.query<unknown[]>(`INSERT INTO import_chunks (import_id, chunk) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING chunk`, [
      importId,
      chunk,
    ]);
    return rows.length > 0;
  }

  /** The chunks whose writes are committed (a resumed run skips them). */
  async committedChunks(importId: number): Promise<Set<number>> {
    const rows = await this.db().query<{ chunk: number }[]>(`SELECT chunk FROM import_chunks WHERE import_id = $1`, [importId]);
    return new Set(rows.map((r) => r.chunk));
  }

  /**
   * Adds a chunk's counts, the last statement of its transaction, only while the import is running:
   * false when it was canceled meanwhile (the UPDATE waits for the cancel and sees its status), so
   * the chunk is rolled back.
   */
  async commitChunk(id: number, c: ChunkCounts, tx: Tx): Promise<boolean> {
    const rows = await returning<{ id: number }>(
      tx,
      `UPDATE imports SET processed_rows = processed_rows + $2, created_count = created_count + $3, updated_count = updated_count + $4,
              skipped_count = skipped_count + $5, failed_count = failed_count + $6, modified_at = now()
        WHERE id = $1 AND status = 'running' RETURNING id`,
      [id, c.rows, c.created, c.updated, c.skipped, c.failed],
    );
    return rows.length > 0;
  }

  /** One statement for a chunk's row errors. */
  async insertErrors(importId: number, errors: { row: number; column: string | null; code: string; message: string }[], tx: Tx): Promise<void> {
    if (!errors.length) return;
    await tx.query(
      `INSERT INTO import_errors (import_id, row_number, column_name, code, message)
       SELECT $1, r, c, k, m FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) AS t(r, c, k, m)`,
      // Column names and messages may quote the file: stored as text PostgreSQL can hold.
      [
        importId,
        errors.map((e) => e.row),
        errors.map((e) => (e.column === null ? null : storableText(e.column))),
        errors.map((e) => e.code),
        errors.map((e) => storableText(e.message)),
      ],
    );
  }

  /** Ends an import (completed, failed or canceled) when it is still open; answers the row, or null when it was already finished. */
  async finish(id: number, status: ImportStatus, error: string | null, tx: Tx): Promise<ImportRow | null> {
    const rows = await returning<ImportRow>(
      tx,
      `UPDATE imports SET status = $2, error = $3, finished_at = now(), modified_at = now()
        WHERE id = $1 AND status IN ${OPEN} RETURNING ${IMPORT_COLUMNS}`,
      [id, status, error === null ? null : storableText(error)],
    );
    return rows[0] ?? null;
  }

  /** An import's errors after the error `afterId`, in the order they were recorded. */
  async errors(importId: number, afterId: number, limit: number): Promise<ImportErrorRow[]> {
    return this.db().query<ImportErrorRow[]>(
      `SELECT id::text AS id, row_number AS row, column_name AS column, code, message FROM import_errors
        WHERE import_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [importId, afterId, limit],
    );
  }

  async errorCount(importId: number): Promise<number> {
    const rows = await this.db().query<{ n: string }[]>(`SELECT count(*) AS n FROM import_errors WHERE import_id = $1`, [importId]);
    return Number(rows[0].n);
  }

  /** Imports a worker should be running (worker start). */
  async openImportIds(): Promise<number[]> {
    const rows = await this.db().query<{ id: number }[]>(`SELECT id FROM imports WHERE status IN ${OPEN} ORDER BY id`);
    return rows.map((r) => r.id);
  }

  async insertExport(
    v: Pick<ExportRow, 'object' | 'format' | 'options' | 'linkSecret' | 'apiTokenId' | 'accessTokenId'>,
    who: { userId: number; userName: string },
    tx?: Tx,
  ): Promise<ExportRow> {
    const rows = await this.db(tx).query<ExportRow[]>(
      `INSERT INTO exports (object, format, options, link_secret, api_token_id, access_token_id, created_by, created_by_user)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${EXPORT_COLUMNS}`,
      [v.object, v.format, JSON.stringify(v.options), v.linkSecret, v.apiTokenId, v.accessTokenId, who.userId, who.userName],
    );
    return rows[0];
  }

  async findExport(id: number, tx?: Tx): Promise<ExportRow | null> {
    const rows = await this.db(tx).query<ExportRow[]>(`SELECT ${EXPORT_COLUMNS} FROM exports WHERE id = $1`, [id]);
    return rows[0] ?? null;
  }

  /** A worker takes up an export (queued or left running by a stopped worker: it starts over). */
  async startExport(id: number): Promise<(ExportRow & { runs: number }) | null> {
    const rows = await returning<ExportRow & { runs: number }>(
      this.db(),
      `UPDATE exports SET status = 'running', started_at = now(), runs = runs + 1 WHERE id = $1 AND status IN ('queued', 'running') RETURNING ${EXPORT_COLUMNS}, runs`,
      [id],
    );
    return rows[0] ?? null;
  }

  /** Stores the result; answers the previous result's key (to delete), or undefined when the export was not running. */
  async completeExport(id: number, v: { storageKey: string; byteSize: number; rowCount: number }): Promise<{ previous: string | null } | undefined> {
    const rows = await returning<{ previous: string | null }>(
      this.db(),
      `UPDATE exports e SET status = 'completed', storage_key = $2, byte_size = $3, row_count = $4, finished_at = now()
         FROM (SELECT id, storage_key AS previous FROM exports WHERE id = $1 FOR UPDATE) old
        WHERE e.id = old.id AND e.status = 'running' RETURNING old.previous`,
      [id, v.storageKey, v.byteSize, v.rowCount],
    );
    return rows[0];
  }

  async failExport(id: number, error: string): Promise<void> {
    await this.db().query(`UPDATE exports SET status = 'failed', error = $2, finished_at = now() WHERE id = $1 AND status IN ('queued', 'running')`, [
      id,
      error,
    ]);
  }

  async openExportIds(): Promise<number[]> {
    const rows = await this.db().query<{ id: number }[]>(`SELECT id FROM exports WHERE status IN ('queued', 'running') ORDER BY id`);
    return rows.map((r) => r.id);
  }
}
