import { Injectable } from '@nestjs/common';
import { defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import { Asset } from './asset.entity.js';

export const ASSET_LIST_SPEC = defineList({
  name: 'assets',
  sortable: [
    'id',
    'title',
    'alias',
    'language',
    'isPublished',
    'publishUp',
    'publishDown',
    'dateAdded',
    'dateModified',
    'downloadCount',
    'uniqueDownloadCount',
    'revision',
    'extension',
    'mime',
    'size',
  ],
  searchExpression: 'sf_text(a.title, a.alias, a.description)',
  // `status` is read here and applied as is_published (see list()).
  filters: { status: { type: 'string', column: 'a.is_published', values: ['published', 'unpublished'] } },
  fields: {
    id: { type: 'id', sql: 'a.id' },
    title: { type: 'string', sql: 'a.title' },
    alias: { type: 'string', sql: 'a.alias' },
    description: { type: 'string', sql: 'a.description' },
    language: { type: 'string', sql: 'a.language' },
    isPublished: { type: 'boolean', sql: 'a.is_published' },
    publishUp: { type: 'datetime', sql: 'a.publish_up' },
    publishDown: { type: 'datetime', sql: 'a.publish_down' },
    'category.id': { type: 'id', sql: 'a.category_id' },
    dateAdded: { type: 'datetime', sql: 'a.created_at' },
    dateModified: { type: 'datetime', sql: 'a.modified_at' },
    downloadCount: { type: 'int', sql: 'a.download_count' },
    uniqueDownloadCount: { type: 'int', sql: 'a.unique_download_count' },
    revision: { type: 'int', sql: 'a.revision' },
    extension: { type: 'string', sql: 'a.extension' },
    mime: { type: 'string', sql: 'a.mime' },
    size: { type: 'int', sql: 'a.size' },
  },
  properties: [
    'id',
    'title',
    'description',
    'alias',
    'language',
    'isPublished',
    'publishUp',
    'publishDown',
    'dateAdded',
    'createdBy',
    'createdByUser',
    'dateModified',
    'modifiedBy',
    'modifiedByUser',
    'downloadCount',
    'uniqueDownloadCount',
    'revision',
    'category',
    'extension',
    'mime',
    'size',
    'originalFilename',
    'downloadUrl',
  ],
});

/** The category embedded in an asset record, as read for it. */
export interface AssetCategoryRow {
  id: number;
  title: string;
  alias: string;
  description: string | null;
  color: string | null;
  bundle: string;
  created_by_user: string | null;
  modified_by_user: string | null;
}

/** What the public download needs of a published asset. */
export interface DownloadRow {
  id: number;
  storage_key: string;
  original_filename: string;
  mime: string;
  size: string;
  checksum: string;
  file_modified_at: Date;
}

/** The columns a service may write; counters are only ever changed by countDownload. */
export type AssetChanges = Omit<Partial<Asset>, 'id' | 'createdAt' | 'downloadCount' | 'uniqueDownloadCount'>;

/**
 * Every query of the `assets` and `asset_download_clients` tables. Writes take an optional
 * transaction handle (the pool by default).
 */
@Injectable()
export class AssetsRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Asset);
  }

  /** A page of assets; `published` narrows to the isPublished flag (the list's `status` filter). */
  list(q: ListQuery, published?: boolean): Promise<ListPage<Asset>> {
    const qb = this.repo().createQueryBuilder('a');
    if (published !== undefined) qb.andWhere('a.is_published = :published', { published });
    return paginate(qb, q, ASSET_LIST_SPEC);
  }

  findById(id: number, tx?: Tx): Promise<Asset | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until the transaction ends: concurrent edits of one asset apply one after the other. */
  findForUpdate(id: number, tx: Tx): Promise<Asset | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  exists(id: number): Promise<boolean> {
    return this.repo().exists({ where: { id } });
  }

  /** Aliases of other assets that a generated alias from `base` could collide with (`base`, `base-<n>`). */
  async aliasesLike(base: string, exceptId: number | undefined, tx?: Tx): Promise<Set<string>> {
    const rows: { alias: string }[] = await this.db(tx).query(`SELECT alias FROM assets WHERE (alias = $1 OR alias LIKE $2) AND id <> $3`, [
      base,
      `${base.replace(/[\\%_]/g, '\\$&')}-%`,
      exceptId ?? 0,
    ]);
    return new Set(rows.map((r) => r.alias));
  }

  async insert(values: AssetChanges, tx?: Tx): Promise<number> {
    const saved = await this.repo(tx).save(this.repo(tx).create(values));
    return saved.id;
  }

  async update(id: number, changes: AssetChanges, tx?: Tx): Promise<void> {
    const { id: _id, createdAt: _createdAt, downloadCount: _d, uniqueDownloadCount: _u, ...columns } = changes as Partial<Asset>;
    await this.repo(tx).update({ id }, columns);
  }

  /**
   * Deletes the asset and answers it as it was, or null when there was none. The row is locked
   * first, so of concurrent deletes exactly one finds it.
   */
  remove(id: number, tx?: Tx): Promise<Asset | null> {
    return this.transactions.run(async (t) => {
      const asset = await this.findForUpdate(id, t);
      if (!asset) return null;
      await this.repo(t).delete({ id });
      return asset;
    }, tx);
  }

  /**
   * The categories embedded in asset records, by id. A read of the categories feature's table for
   * the asset list (one query per page instead of one call per category); categories own the writes.
   */
  async categoriesByIds(ids: number[]): Promise<Map<number, AssetCategoryRow>> {
    const map = new Map<number, AssetCategoryRow>();
    if (!ids.length) return map;
    const rows: AssetCategoryRow[] = await this.db().query(
      `SELECT id, title, alias, description, color, bundle, created_by_user, modified_by_user FROM categories WHERE id = ANY($1)`,
      [ids],
    );
    for (const r of rows) map.set(r.id, r);
    return map;
  }

  /** The published asset at `<id>:<alias>` inside its publishUp/publishDown window, if any. */
  async findPublished(id: number, alias: string): Promise<DownloadRow | null> {
    const rows: DownloadRow[] = await this.db().query(
      `SELECT id, storage_key, original_filename, mime, size, checksum, file_modified_at
         FROM assets
        WHERE id = $1 AND alias = $2 AND is_published
          AND (publish_up IS NULL OR publish_up <= now())
          AND (publish_down IS NULL OR publish_down > now())`,
      [id, alias],
    );
    return rows[0] ?? null;
  }

  /**
   * Counts a download in one statement: the total always, the unique count only when this client
   * (its hash) is new for the asset. No read-modify-write, so concurrent downloads never lose a
   * count. An asset deleted meanwhile fails the foreign key (asset_download_clients_asset_id_fkey → 404).
   */
  async countDownload(assetId: number, clientHash: Buffer): Promise<void> {
    await this.db().query(
      `WITH seen AS (
         INSERT INTO asset_download_clients (asset_id, client_hash) VALUES ($1, $2)
         ON CONFLICT DO NOTHING RETURNING 1)
       UPDATE assets
          SET download_count = download_count + 1,
              unique_download_count = unique_download_count + (SELECT count(*) FROM seen)
        WHERE id = $1`,
      [assetId, clientHash],
    );
  }
}
