import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { IMPORT_CHOICES, ImportsService, type StoredImportFile } from '../imports/imports.service.js';
import { requirePermission } from './console-http.js';
import type { ConsoleSession } from './console.service.js';
import { ConsoleRepository, type UploadRow } from './console.repository.js';

/** Columns the mapping form offers at most (wider files go through the API). */
export const MAX_MAPPED_COLUMNS = 200;
/** An upload whose columns were not mapped within a day is deleted with its file. */
const UPLOAD_TTL_MS = 24 * 3600_000;
/** Stale uploads removed per new upload (the sweep stays bounded). */
const SWEEP_BATCH = 20;

/** The mapping form as typed (shown again next to its errors). */
export interface MappingValues {
  mode: string;
  idProperty: string;
  emptyValues: string;
  /** The target of each column, in header order. */
  targets: string[];
}

/** What the mapping form shows: the upload, what its columns may map to, and the values (proposed or typed). */
export interface MappingForm {
  upload: UploadRow;
  properties: string[];
  fields: string[];
  idProperties: string[];
  values: MappingValues;
}

/** The value of a form field ('' when missing or repeated). */
function text(body: Record<string, unknown>, name: string): string {
  const v = body[name];
  return typeof v === 'string' ? v : '';
}

/**
 * The console's side of starting an import from a CSV upload, in two steps: the upload (kept in the
 * job files with its header, detected as the worker will read it), then the mapping form, whose
 * post starts the import through ImportsService exactly as POST /api/imports would (same option
 * checks, same worker). Between the two the upload is a row of console_import_uploads.
 */
@Injectable()
export class ConsoleImportsService {
  private readonly logger = new Logger('ConsoleImports');

  constructor(
    private readonly imports: ImportsService,
    private readonly repo: ConsoleRepository,
    private readonly clock: Clock,
  ) {}

  /** Keeps an uploaded CSV for its mapping form (400 naming `object` or `file`); the file is removed on any refusal. */
  async stage(session: ConsoleSession, body: unknown, file: StoredImportFile | undefined): Promise<number> {
    try {
      requirePermission(session.principal, 'imports:write');
      const form = (body ?? {}) as Record<string, unknown>;
      const object = text(form, 'object');
      if (!(IMPORT_CHOICES.objects as readonly string[]).includes(object)) {
        throw fieldError('object', `must be one of ${IMPORT_CHOICES.objects.join(', ')}`);
      }
      if (!file) throw fieldError('file', 'choose a CSV file to upload');
      if (file.size === 0) throw fieldError('file', 'is empty');
      const header = await this.imports.headerOf(file.storageKey);
      if (header.length > MAX_MAPPED_COLUMNS) {
        throw fieldError(
          'file',
          `has ${header.length} columns; this form maps at most ${MAX_MAPPED_COLUMNS} (use POST /api/imports with a mapping for wider files)`,
        );
      }
      const seen = new Set<string>();
      for (const column of header) {
        if (seen.has(column)) throw fieldError('file', `its header names the column "${column}" twice; give each column its own name`);
        seen.add(column);
      }
      const id = await this.repo.insertUpload({
        userId: session.user.id,
        object,
        storageKey: file.storageKey,
        fileName: (file.originalname || 'upload.csv').slice(0, 255),
        fileSize: file.size,
        header,
        createdAt: this.clock.now(),
      });
      await this.sweep();
      return id;
    } catch (e) {
      if (file) await this.imports.discardFile(file.storageKey);
      throw e;
    }
  }

  /** The mapping form of an upload of this user; `started` when its import has begun. */
  async mappingForm(session: ConsoleSession, id: number, typed?: MappingValues): Promise<MappingForm | { started: number }> {
    requirePermission(session.principal, 'imports:write');
    const upload = await this.repo.findUpload(id, session.user.id);
    if (!upload) throw notFound('Upload', id);
    if (upload.importId !== null) return { started: upload.importId };
    const targets = await this.imports.mappingTargets(upload.object as (typeof IMPORT_CHOICES.objects)[number]);
    const all = new Map([...targets.properties, ...targets.fields].map((t) => [normalise(t), t]));
    const values = typed ?? {
      mode: 'upsert',
      idProperty: '',
      emptyValues: 'ignore',
      // A column named as a target (any case, spaces and dashes aside) is proposed for it; `fields.x` also as `x`.
      targets: upload.header.map((c) => all.get(normalise(c)) ?? all.get(normalise(`fields.${c}`)) ?? 'ignore'),
    };
    return { upload, ...targets, values };
  }

  /** The values of a posted mapping form, in header order. */
  valuesOf(body: unknown, header: readonly string[]): MappingValues {
    const form = (body ?? {}) as Record<string, unknown>;
    return {
      mode: text(form, 'mode'),
      idProperty: text(form, 'idProperty'),
      emptyValues: text(form, 'emptyValues'),
      targets: header.map((_, i) => text(form, `col${i}`) || 'ignore'),
    };
  }

  /**
   * Starts the import of an upload with the posted mapping: 303 to its page. Parallel posts of one
   * form start one import (the upload is claimed in one statement; a later post opens the import
   * the first one started, one that meets it being started gets 409). A refused mapping (400, 403)
   * leaves the upload waiting, errors named by the form's fields (`col<i>` for a column).
   */
  async start(session: ConsoleSession, id: number, values: MappingValues): Promise<number> {
    requirePermission(session.principal, 'imports:write');
    const upload = await this.repo.claimUpload(id, session.user.id);
    if (!upload) {
      const current = await this.repo.findUpload(id, session.user.id);
      if (!current) throw notFound('Upload', id);
      if (current.importId !== null) return current.importId;
      throw new AppError('conflict', 'This import is being started by another request; open it from the imports page in a moment');
    }
    const mapping: Record<string, string> = {};
    upload.header.forEach((column, i) => (mapping[column] = values.targets[i] ?? 'ignore'));
    const form: Record<string, string> = { object: upload.object, mode: values.mode, mapping: JSON.stringify(mapping) };
    if (values.idProperty) form.idProperty = values.idProperty;
    if (values.emptyValues) form.emptyValues = values.emptyValues;
    try {
      const record = await this.imports.createFromStoredFile(
        form,
        { storageKey: upload.storageKey, size: upload.fileSize, originalname: upload.fileName },
        session.principal,
      );
      await this.repo.markUploadStarted(id, record.id);
      return record.id;
    } catch (e) {
      await this.repo.releaseUpload(id);
      throw e instanceof AppError ? formFieldsOf(e, upload.header) : e;
    }
  }

  /** Removes a few uploads older than a day, and the files of those never imported. */
  private async sweep(): Promise<void> {
    try {
      const stale = await this.repo.deleteStaleUploads(new Date(this.clock.nowMs() - UPLOAD_TTL_MS), SWEEP_BATCH);
      for (const s of stale) if (s.importId === null) await this.imports.discardFile(s.storageKey);
    } catch (e) {
      this.logger.warn({ msg: 'could not remove stale console uploads', err: e instanceof Error ? e.message : String(e) });
    }
  }
}

const normalise = (name: string): string => name.toLowerCase().replace(/[\s_-]+/g, '');

/** The API's error with its `mapping.<column>` details renamed to the form's `col<i>` fields. */
function formFieldsOf(e: AppError, header: readonly string[]): AppError {
  if (!e.details?.length) return e;
  const details = e.details.map((d) => {
    if (typeof d.field === 'string' && d.field.startsWith('mapping.')) {
      const i = header.indexOf(d.field.slice('mapping.'.length));
      if (i !== -1) return { ...d, field: `col${i}` };
    }
    return d;
  });
  return new AppError(e.code, e.message, details, e.headers);
}
