import { iso } from '../common/dates.js';
import type { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { type CustomFieldType, FIELD_OBJECT, type ImportObject } from './import.rules.js';
import type { ImportErrorRow, ImportRow } from './imports.repository.js';

/** An import as the API answers it: GET /api/imports/{id}, the import.completed event. */
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

/** A row error as GET /api/imports/{id}/errors lists it. */
export function toErrorRecord(e: ImportErrorRow) {
  return { row: e.row, column: e.column, code: e.code, message: e.message };
}

/** The published custom fields of the object, as the options check and the column plan read them. */
export async function publishedCustomFields(fieldValues: ContactFieldValuesService, object: ImportObject): Promise<CustomFieldType[]> {
  const fieldObject = FIELD_OBJECT[object];
  if (!fieldObject) return [];
  return (await fieldValues.publishedRules(undefined, fieldObject)).map((r) => ({ alias: r.alias, type: r.type }));
}
