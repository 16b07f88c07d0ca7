import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError, Repository } from 'typeorm';
import { stampCreated, stampModified } from '../common/audit.js';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { AppError, conflict, fieldError, notFound, validationError } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { AppValidationPipe } from '../common/validation.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Asset } from './asset.entity.js';
import { CreateAssetDto, UpdateAssetDto } from './asset.dto.js';
import { formFieldsToBody, nextFreeAlias, slugify } from './asset-file.js';
import { AssetStorage } from './asset-storage.js';
import type { UploadedAssetFile } from './asset-upload.engine.js';

export const ASSET_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'a.id',
    title: 'a.title',
    alias: 'a.alias',
    language: 'a.language',
    isPublished: 'a.is_published',
    publishUp: 'a.publish_up',
    publishDown: 'a.publish_down',
    dateAdded: 'a.created_at',
    dateModified: 'a.modified_at',
    downloadCount: 'a.download_count',
    uniqueDownloadCount: 'a.unique_download_count',
    revision: 'a.revision',
    extension: 'a.extension',
    mime: 'a.mime',
    size: 'a.size',
  },
  searchExpression: 'sf_text(a.title, a.alias, a.description)',
  // `status` is read here and applied as is_published (see list()).
  filters: { status: { type: 'string', column: 'a.is_published', values: ['published', 'unpublished'] } },
};

/** What a create or edit request carries: the body (JSON, or multipart form fields) and the stored upload. */
export interface AssetInput {
  body: unknown;
  multipart: boolean;
  file?: UploadedAssetFile;
}

interface CategoryRow {
  id: number;
  title: string;
  alias: string;
  description: string | null;
  color: string | null;
  bundle: string;
  created_by_user: string | null;
  modified_by_user: string | null;
}

type PgError = QueryFailedError & { driverError?: { code?: string; constraint?: string } };
const pgError = (e: unknown) => (e instanceof QueryFailedError ? (e as PgError).driverError : undefined);

export type AssetRecord = ReturnType<AssetsService['toRecord']>;

@Injectable()
export class AssetsService {
  private readonly log = new Logger('AssetsService');
  private readonly validator = new AppValidationPipe();

  constructor(
    @InjectRepository(Asset) private readonly assets: Repository<Asset>,
    @InjectDataSource() private readonly db: DataSource,
    private readonly storage: AssetStorage,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  downloadUrl(a: Pick<Asset, 'id' | 'alias'>): string {
    return `${this.config.baseUrl}/api/assets/${a.id}:${a.alias}`;
  }

  toRecord(a: Asset, categories: Map<number, CategoryRow>) {
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
    const categories = new Map<number, CategoryRow>();
    if (ids.length) {
      const rows: CategoryRow[] = await this.db.query(
        `SELECT id, title, alias, description, color, bundle, created_by_user, modified_by_user FROM categories WHERE id = ANY($1)`,
        [ids],
      );
      for (const r of rows) categories.set(r.id, r);
    }
    return list.map((a) => this.toRecord(a, categories));
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, ASSET_LIST_SPEC);
    const qb = this.assets.createQueryBuilder('a');
    const status = q.filters.status;
    if (status !== undefined) {
      delete q.filters.status;
      qb.andWhere('a.is_published = :published', { published: status === 'published' });
    }
    const { total, items } = await paginate(qb, q, ASSET_LIST_SPEC);
    return { total, assets: await this.toRecords(items) };
  }

  async findEntity(id: number): Promise<Asset> {
    const a = await this.assets.findOne({ where: { id } });
    if (!a) throw notFound('Asset', id);
    return a;
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
      const saved = await this.withGeneratedAliasRetry(dto, async () => {
        const asset = this.assets.create();
        await this.assign(asset, dto, true, this.db.manager);
        this.setFile(asset, file);
        asset.revision = 1;
        stampCreated(asset, who);
        return this.assets.save(asset);
      });
      committed = true;
      return await this.get(saved.id);
    } catch (e) {
      if (file && !committed) await this.discard(file.storageKey);
      throw this.translate(e);
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
    const exists = await this.assets.exists({ where: { id } });
    if (!exists) return { created: true, asset: await this.create(input, who) };
    return { created: false, asset: await this.edit(id, input, who, true) };
  }

  /** Deletes the row, then its file; answers the record as it was. */
  async remove(id: number): Promise<AssetRecord> {
    const asset = await this.findEntity(id);
    const record = (await this.toRecords([asset]))[0];
    const [rows] = (await this.db.query(`DELETE FROM assets WHERE id = $1 RETURNING storage_key`, [id])) as [{ storage_key: string }[], number];
    if (!rows.length) throw notFound('Asset', id);
    await this.discard(rows[0].storage_key);
    return record;
  }

  private async edit(id: number, input: AssetInput, who: Principal, replace: boolean): Promise<AssetRecord> {
    const file = input.file;
    let committed = false;
    try {
      const dto = await this.readBody(input, replace ? CreateAssetDto : UpdateAssetDto);
      let replacedKey: string | null = null;
      const saved = await this.withGeneratedAliasRetry(dto, () =>
        this.db.transaction(async (m) => {
          const repo = m.getRepository(Asset);
          // Row lock: concurrent edits of one asset apply one after the other, so a replaced file is always known.
          const asset = await repo.findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
          if (!asset) throw notFound('Asset', id);
          await this.assign(asset, dto, replace, m);
          replacedKey = null;
          if (file) {
            replacedKey = asset.storageKey;
            this.setFile(asset, file);
            asset.revision += 1;
          }
          stampModified(asset, who);
          return repo.save(asset);
        }),
      );
      committed = true;
      if (replacedKey) await this.discard(replacedKey);
      return await this.get(saved.id);
    } catch (e) {
      if (file && !committed) await this.discard(file.storageKey);
      throw this.translate(e);
    }
  }

  /** The body as the DTO: multipart form fields are read into typed values first; then the global validation rules. */
  private async readBody<T extends object>(input: AssetInput, dto: new () => T): Promise<T> {
    let raw: unknown = input.body ?? {};
    if (input.multipart) {
      const { body, errors } = formFieldsToBody((raw ?? {}) as Record<string, unknown>);
      if (errors.length) throw validationError(`Validation failed: ${errors.map((d) => `${d.field}: ${d.message}`).join('; ')}`, errors);
      raw = body;
    }
    return (await this.validator.transform(raw, { type: 'body', metatype: dto, data: '' })) as T;
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to defaults. */
  private async assign(a: Asset, dto: UpdateAssetDto, replace: boolean, m: EntityManager): Promise<void> {
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
    if (dto.category !== undefined || replace || isNew) {
      const category = dto.category ?? null;
      if (category !== null) {
        const found: unknown[] = await m.query(`SELECT 1 FROM categories WHERE id = $1`, [category]);
        if (!found.length) throw fieldError('category', `category ${category} does not exist`);
      }
      a.categoryId = category;
    }
    if (dto.alias !== undefined) a.alias = dto.alias;
    else if (isNew || replace) a.alias = await this.generatedAlias(a, m);
  }

  /** An alias from the title, free among the other assets; an existing alias derived from the same title is kept. */
  private async generatedAlias(a: Asset, m: EntityManager): Promise<string> {
    const base = slugify(a.title);
    if (a.alias && (a.alias === base || new RegExp(`^${base}-\\d+$`).test(a.alias))) return a.alias;
    const rows: { alias: string }[] = await m.query(`SELECT alias FROM assets WHERE (alias = $1 OR alias LIKE $2) AND id <> $3`, [
      base,
      `${base}-%`,
      a.id ?? 0,
    ]);
    return nextFreeAlias(
      base,
      rows.map((r) => r.alias),
    );
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

  /**
   * Runs a write; when the alias was generated (not given) and a concurrent request took it
   * between the check and the insert, runs it again with the next free alias.
   */
  private async withGeneratedAliasRetry<T>(dto: UpdateAssetDto, write: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (e) {
        const pg = pgError(e);
        if (dto.alias === undefined && pg?.code === '23505' && pg.constraint === 'assets_alias_uq' && attempt < 5) continue;
        throw e;
      }
    }
  }

  private translate(e: unknown): unknown {
    const pg = pgError(e);
    if (pg?.code === '23505' && pg.constraint === 'assets_alias_uq') {
      return conflict('Another asset already has this alias', [{ field: 'alias', message: 'is already taken' }]);
    }
    if (pg?.code === '23503' && pg.constraint === 'assets_category_id_fkey') {
      return fieldError('category', 'the category does not exist');
    }
    if (e instanceof AppError) return e;
    return e;
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
