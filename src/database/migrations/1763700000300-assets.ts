import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Assets (uploaded files) and the clients that downloaded them. The file itself lives in the
 * asset storage (STORAGE_DIR) under `storage_key`; the row holds its metadata and counters.
 * Deleting a category leaves its assets uncategorised (ON DELETE SET NULL).
 */
export class Assets1763700000300 implements MigrationInterface {
  name = 'Assets1763700000300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE assets (
        id                    serial PRIMARY KEY,
        title                 text NOT NULL,
        description           text NULL,
        alias                 text NOT NULL,
        language              text NOT NULL DEFAULT 'en',
        is_published          boolean NOT NULL DEFAULT true,
        publish_up            timestamptz NULL,
        publish_down          timestamptz NULL,
        category_id           integer NULL REFERENCES categories(id) ON DELETE SET NULL,
        download_count        bigint NOT NULL DEFAULT 0,
        unique_download_count bigint NOT NULL DEFAULT 0,
        revision              integer NOT NULL DEFAULT 1,
        storage_key           text NOT NULL,
        original_filename     text NOT NULL,
        extension             text NOT NULL,
        mime                  text NOT NULL,
        size                  bigint NOT NULL CHECK (size >= 0),
        checksum              text NOT NULL,
        file_modified_at      timestamptz NOT NULL DEFAULT now(),
        created_at            timestamptz NOT NULL DEFAULT now(),
        modified_at           timestamptz NULL,
        created_by            integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user       text NULL,
        modified_by           integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user      text NULL
      )`);
    // The alias is part of the public download URL: unique across all assets.
    await q.query(`CREATE UNIQUE INDEX assets_alias_uq ON assets (alias)`);
    await q.query(`CREATE UNIQUE INDEX assets_storage_key_uq ON assets (storage_key)`);
    // List filter status (published/unpublished) and the category foreign key.
    await q.query(`CREATE INDEX assets_is_published_idx ON assets (is_published, id)`);
    await q.query(`CREATE INDEX assets_category_idx ON assets (category_id)`);
    await q.query(`CREATE INDEX assets_search_trgm ON assets USING gin (sf_text(title, alias, description) gin_trgm_ops)`);
    for (const col of ['title', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX assets_${col}_idx ON assets (${col}, id)`);
    }

    // One row per (asset, client) that downloaded it: the unique download counter counts inserts
    // into this table. client_hash = SHA-256 of client address + user agent (no raw addresses kept).
    await q.query(`
      CREATE TABLE asset_download_clients (
        asset_id       integer NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
        client_hash    bytea NOT NULL,
        first_seen_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (asset_id, client_hash)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS asset_download_clients`);
    await q.query(`DROP TABLE IF EXISTS assets`);
  }
}
