import { Column, Entity, PrimaryGeneratedColumn, type ValueTransformer } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';

/** bigint columns come back from pg as strings; the values here stay far below 2^53. */
const bigintNumber: ValueTransformer = {
  to: (v: number | null | undefined) => v,
  from: (v: string | number | null) => (v === null ? null : Number(v)),
};

@Entity('assets')
export class Asset extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  title: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text' })
  alias: string;

  @Column({ type: 'text' })
  language: string;

  @Column({ name: 'is_published', type: 'boolean' })
  isPublished: boolean;

  @Column({ name: 'publish_up', type: 'timestamptz', nullable: true })
  publishUp: Date | null;

  @Column({ name: 'publish_down', type: 'timestamptz', nullable: true })
  publishDown: Date | null;

  @Column({ name: 'category_id', type: 'int', nullable: true })
  categoryId: number | null;

  /** Counters are only ever changed by one atomic UPDATE (AssetDownloadsService), never by save(). */
  @Column({ name: 'download_count', type: 'bigint', insert: false, update: false, transformer: bigintNumber })
  downloadCount: number;

  @Column({ name: 'unique_download_count', type: 'bigint', insert: false, update: false, transformer: bigintNumber })
  uniqueDownloadCount: number;

  @Column({ type: 'int' })
  revision: number;

  /** Server-generated key in AssetStorage; never the client's file name. */
  @Column({ name: 'storage_key', type: 'text' })
  storageKey: string;

  /** The client's file name (sanitised), for Content-Disposition only. */
  @Column({ name: 'original_filename', type: 'text' })
  originalFilename: string;

  @Column({ type: 'text' })
  extension: string;

  @Column({ type: 'text' })
  mime: string;

  @Column({ type: 'bigint', transformer: bigintNumber })
  size: number;

  /** SHA-256 of the content (hex); the download ETag. */
  @Column({ type: 'text' })
  checksum: string;

  /** When the current file was uploaded (the download Last-Modified). */
  @Column({ name: 'file_modified_at', type: 'timestamptz' })
  fileModifiedAt: Date;
}

// Constraints of the assets tables, translated by the global exception filter (common/constraints.ts).
registerConstraints({
  assets_alias_uq: { kind: 'unique', field: 'alias', resource: 'asset', existing: { table: 'assets', where: 'alias = $1' } },
  assets_category_id_fkey: { kind: 'reference', field: 'category', target: 'category' },
  // A download counted while the asset was being deleted: the asset is gone.
  asset_download_clients_asset_id_fkey: { kind: 'reference', field: 'id', target: 'asset', status: 404 },
});
