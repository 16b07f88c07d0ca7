import { Inject, Injectable, Logger } from '@nestjs/common';
import { withGeneratedAlias } from '../common/alias.js';
import { stampCreated, stampModified } from '../common/audit.js';
import { isUniqueViolation } from '../database/constraints.js';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { fieldError, notFound, validationError } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { assertFormFields } from '../server/request-text.middleware.js';
import { AppValidationPipe } from '../server/validation.pipe.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { Asset } from './asset.entity.js';
import { CreateAssetDto, UpdateAssetDto } from './asset.dto.js';
import { formFieldsToBody, slugify } from './asset-file.js';
import { AssetStorage } from './asset-storage.js';
import type { UploadedAssetFile } from './asset-upload.engine.js';
import { ASSET_LIST_SPEC, type AssetCategoryRow, AssetsRepository } from './assets.repository.js';

/** What a create or edit request carries: the body (JSON, or multipart form fields) and the stored upload. */
export interface AssetInput {
  body: unknown;
  multipart: boolean;
  file?: UploadedAssetFile;
}

const ALIAS_CONSTRAINT = 'assets_alias_uq';

export type AssetRecord = ReturnType<AssetsService['toRecord']>;

@Injectable()
export class AssetsService {
  private readonly log = new Logger('AssetsService');
  private readonly validator = new AppValidationPipe();

  constructor(
    private readonly assets: AssetsRepository,
    private readonly transactions: Transactions,
    private readonly storage: AssetStorage,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly events: EventsService,
  ) {}

  downloadUrl(a: Pick<Asset, 'id' | 'alias'>): string {
    return `${this.config.baseUrl}/api/assets/${a.id}:${a.alias}`;
  }

  /** The one mapper from a stored asset (and its category) to the API record. */
  toRecord(a: Asset, categories: Map<number, AssetCategoryRow>) {
    const c = a.categoryId !== null ? categories.get(a.categoryId) : undefined;
    return {
      id: a.id,
      title: a.title,
      description: a.description,
      alias: a.alias,
      language: a.language,
      isPublished: a.isPublished,
      publishUp: iso(a.publishUp),
      publishDown: iso(a.publishDown),
      dateAdded: isoRequired(a.createdAt),
      createdBy: a.createdBy,
      createdByUser: a.createdByUser,
      dateModified: iso(a.modifiedAt),
      modifiedBy: a.modifiedBy,
      modifiedByUser: a.modifiedByUser,
      downloadCount: a.downloadCount,
      uniqueDownloadCount: a.uniqueDownloadCount,
      revision: a.revision,
      category: c
        ? {
            createdByUser: c.created_by_user,
            modifiedByUser: c.modified_by_user,
            id: c.id,
            title: c.title,
            alias: c.alias,
            description: c.description,
            color: c.color,
            bundle: c.bundle,
          }
        : null,
      extension: a.extension,
      mime: a.mime,
      size: a.size,
      originalFilename: a.originalFilename,
      downloadUrl: this.downloadUrl(a),
    };
  }

  /** Records for a batch of assets, with their categories in one query. */
  async toRecords(list: Asset[]): Promise<AssetRecord[]> {
    const ids = [...new Set(list.map((a) => a.categoryId).filter((id): id is number => id !== null))];
    const categories = await this.assets.categoriesByIds(ids);
    return list.map((a) => this.toRecord(a, categories));
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, ASSET_LIST_SPEC);
    const status = q.filters.status;
    if (status !== undefined) delete q.filters.status;
    const page = await this.assets.list(q, status === undefined ? undefined : status === 'published');
    return listEnvelope(q, 'assets', page, await this.toRecords(page.items));
  }

  async findEntity(id: number): Promise<Asset> {
    const a = await this.assets.findById(id);
    if (!a) throw notFound('Asset', id);
    return a;
  }

  /** The record of an asset written in `tx`. */
  private async recordOf(id: number, tx: Tx): Promise<AssetRecord> {
    const a = await this.assets.findById(id, tx);
    if (!a) throw notFound('Asset', id);
    return (await this.toRecords([a]))[0];
  }

  async get(id: number): Promise<AssetRecord> {
    return (await this.toRecords([await this.findEntity(id)]))[0];
  }

  /**
   * Create from an upload. The file is already in storage (streamed there by AssetUploadEngine);
   * if anything fails before the row is committed, the file is removed again.
   */
  async create(input: AssetInput, who: Principal): Promise<AssetRecord> {
    const file = input.file;
    let committed = false;
    try {
      if (!file) throw fieldError('file', 'is required: send the file as multipart/form-data in the form field "file"');
      const dto = await this.readBody(input, CreateAssetDto);
      const asset = new Asset();
      this.assign(asset, dto, true);
      this.setFile(asset, file);
      asset.revision = 1;
      stampCreated(asset, who);
      const record = await this.transactions.run(async (tx) => {
        const id =
          dto.alias !== undefined
            ? await this.assets.insert(asset, tx)
            : await withGeneratedAlias(
                slugify(asset.title),
                await this.assets.aliasesLike(slugify(asset.title), undefined, tx),
                // A savepoint, so a taken alias does not abort the transaction.
                (alias) => {
                  asset.alias = alias;
                  return this.transactions.run((sp) => this.assets.insert(asset, sp), tx);
                },
                (e) => isUniqueViolation(e, ALIAS_CONSTRAINT),
                '-',
              );
        const created = await this.recordOf(id, tx);
        await this.events.record(tx, 'asset.created', created);
        return created;
      });
      committed = true;
      return record;
    } catch (e) {
      if (file && !committed) await this.discard(file.storageKey);
      throw e;
    }
  }

  /** PATCH: changes only the supplied properties; a new file replaces the old one and increments revision. */
  async patch(id: number, input: AssetInput, who: Principal): Promise<AssetRecord> {
    return this.edit(id, input, who, false);
  }

  /**
   * PUT: full replace of the metadata when the id exists (omitted properties reset to their
   * defaults; the file is kept unless a new one is sent), else a new asset with a new id, which
   * needs a file.
   */
  async put(id: number, input: AssetInput, who: Principal): Promise<{ created: boolean; asset: AssetRecord }> {
    if (!(await this.assets.exists(id))) return { created: true, asset: await this.create(input, who) };
    return { created: false, asset: await this.edit(id, input, who, true) };
  }

  /** Deletes the row, then its file; answers the record as it was (404 to all but one of concurrent deletes). */
  async remove(id: number): Promise<AssetRecord> {
    const record = await this.transactions.run(async (tx) => {
      const asset = await this.assets.remove(id, tx);
      if (!asset) throw notFound('Asset', id);
      const removed = { storageKey: asset.storageKey, record: (await this.toRecords([asset]))[0] };
      await this.events.record(tx, 'asset.deleted', removed.record);
      return removed;
    });
    await this.discard(record.storageKey);
    return record.record;
  }

  /**
   * An edit runs on the row locked (FOR UPDATE): concurrent edits of one asset apply one after the
   * other, each on the other's result, so no change is lost and a replaced file is always known.
   */
  private async edit(id: number, input: AssetInput, who: Principal, replace: boolean): Promise<AssetRecord> {
    const file = input.file;
    let committed = false;
    try {
      const dto = await this.readBody(input, replace ? CreateAssetDto : UpdateAssetDto);
      const edited = await this.transactions.run(async (tx) => {
        const asset = await this.assets.findForUpdate(id, tx);
        if (!asset) throw notFound('Asset', id);
        const before = (await this.toRecords([asset]))[0];
        this.assign(asset, dto, replace);
        let replaced: string | null = null;
        if (file) {
          replaced = asset.storageKey;
          this.setFile(asset, file);
          asset.revision += 1;
        }
        stampModified(asset, who);
        await this.writeEdit(asset, dto.alias === undefined && replace, tx);
        const after = await this.recordOf(id, tx);
        await this.events.recordUpdate(tx, 'asset.updated', before, after);
        return { replaced, after };
      });
      committed = true;
      if (edited.replaced) await this.discard(edited.replaced);
      return edited.after;
    } catch (e) {
      if (file && !committed) await this.discard(file.storageKey);
      throw e;
    }
  }

  /**
   * Writes an edited asset. Without an alias on a replace, the alias is generated from the title
   * again (an existing alias derived from the same title is kept); a candidate taken meanwhile by
   * another request moves on to the next one (each try in a savepoint).
   */
  private async writeEdit(asset: Asset, generateAlias: boolean, tx: Tx): Promise<void> {
    const base = slugify(asset.title);
    if (!generateAlias || asset.alias === base || new RegExp(`^${base}-\\d+$`).test(asset.alias)) {
      await this.assets.update(asset.id, asset, tx);
      return;
    }
    await withGeneratedAlias(
      base,
      await this.assets.aliasesLike(base, asset.id, tx),
      (alias) => {
        asset.alias = alias;
        return this.transactions.run((sp) => this.assets.update(asset.id, asset, sp), tx);
      },
      (e) => isUniqueViolation(e, ALIAS_CONSTRAINT),
      '-',
    );
  }

  /** The body as the DTO: multipart form fields are read into typed values first; then the global validation rules. */
  private async readBody<T extends object>(input: AssetInput, dto: new () => T): Promise<T> {
    let raw: unknown = input.body ?? {};
    if (input.multipart) {
      // Reserved names (`__proto__`, `toString`, ...) and text that is not valid UTF-8: a 400, as in a JSON body.
      assertFormFields(raw);
      const { body, errors } = formFieldsToBody((raw ?? {}) as Record<string, unknown>);
      if (errors.length) throw validationError(`Validation failed: ${errors.map((d) => `${d.field}: ${d.message}`).join('; ')}`, errors);
      raw = body;
    }
    return (await this.validator.transform(raw, { type: 'body', metatype: dto, data: '' })) as T;
  }

  /**
   * Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to
   * defaults. A category that does not exist is refused by its foreign key (assets_category_id_fkey → 400).
   */
  private assign(a: Asset, dto: UpdateAssetDto, replace: boolean): void {
    const isNew = a.id === undefined;
    if (dto.title !== undefined) {
      a.title = dto.title.trim();
      if (!a.title) throw fieldError('title', 'must not be empty');
    }
    if (dto.description !== undefined || replace) a.description = dto.description ?? null;
    if (dto.language !== undefined || replace || isNew) a.language = dto.language ?? 'en';
    if (dto.isPublished !== undefined || replace || isNew) a.isPublished = dto.isPublished ?? true;
    if (dto.publishUp !== undefined || replace) a.publishUp = dto.publishUp ? parseIsoWithOffset(dto.publishUp) : null;
    if (dto.publishDown !== undefined || replace) a.publishDown = dto.publishDown ? parseIsoWithOffset(dto.publishDown) : null;
    if (a.publishUp && a.publishDown && a.publishDown <= a.publishUp) throw fieldError('publishDown', 'must be later than publishUp');
    if (dto.category !== undefined || replace || isNew) a.categoryId = dto.category ?? null;
    if (dto.alias !== undefined) a.alias = dto.alias;
  }

  private setFile(a: Asset, file: UploadedAssetFile): void {
    a.storageKey = file.storageKey;
    a.originalFilename = file.originalFilename;
    a.extension = file.extension;
    a.mime = file.mime;
    a.size = file.size;
    a.checksum = file.checksum;
    a.fileModifiedAt = new Date();
  }

  /** Removes a stored file; a failure is logged (an orphan file, never a broken row). */
  private async discard(key: string): Promise<void> {
    try {
      await this.storage.delete(key);
    } catch (e) {
      this.log.warn({ msg: 'could not remove a stored asset file', key, err: (e as Error).message });
    }
  }
}
