import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Import and export jobs (docs/decisions/imports-and-exports.md). An import's `processed_rows` is its checkpoint:
 * the number of data rows whose writes are committed, moved forward in the same transaction as
 * those writes, so a worker that stops mid-import resumes after the last committed chunk. Row errors
 * are kept per import (`import_errors`, one row per problem). An export keeps its result's storage
 * key and the secret its download links are signed with.
 */
export class ImportsExports1763700001700 implements MigrationInterface {
  name = 'ImportsExports1763700001700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE imports (
        id              serial PRIMARY KEY,
        object          text NOT NULL CHECK (object IN ('contacts', 'companies', 'deals')),
        status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'validating', 'running', 'completed', 'failed', 'canceled')),
        source_format   text NOT NULL CHECK (source_format IN ('csv', 'jsonl')),
        storage_key     text,
        file_name       text,
        file_size       bigint NOT NULL DEFAULT 0,
        options         jsonb NOT NULL,
        principal       jsonb NOT NULL,
        total_rows      integer,
        processed_rows  integer NOT NULL DEFAULT 0,
        created_count   integer NOT NULL DEFAULT 0,
        updated_count   integer NOT NULL DEFAULT 0,
        skipped_count   integer NOT NULL DEFAULT 0,
        failed_count    integer NOT NULL DEFAULT 0,
        error           text,
        created_by      integer,
        created_by_user text,
        created_at      timestamptz NOT NULL DEFAULT now(),
        started_at      timestamptz,
        finished_at     timestamptz,
        modified_at     timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX imports_open_idx ON imports (id) WHERE status IN ('queued', 'validating', 'running')`);
    await q.query(`
      CREATE TABLE import_errors (
        id          bigserial PRIMARY KEY,
        import_id   integer NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
        row_number  integer NOT NULL,
        column_name text,
        code        text NOT NULL,
        message     text NOT NULL
      )`);
    await q.query(`CREATE INDEX import_errors_import_idx ON import_errors (import_id, id)`);
    await q.query(`
      CREATE TABLE exports (
        id              serial PRIMARY KEY,
        object          text NOT NULL CHECK (object IN ('contacts', 'companies', 'deals')),
        format          text NOT NULL CHECK (format IN ('csv', 'jsonl')),
        status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed', 'failed')),
        options         jsonb NOT NULL,
        row_count       integer NOT NULL DEFAULT 0,
        storage_key     text,
        byte_size       bigint,
        link_secret     text NOT NULL,
        error           text,
        created_by      integer,
        created_by_user text,
        created_at      timestamptz NOT NULL DEFAULT now(),
        started_at      timestamptz,
        finished_at     timestamptz
      )`);
    await q.query(`CREATE INDEX exports_open_idx ON exports (id) WHERE status IN ('queued', 'running')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE exports`);
    await q.query(`DROP TABLE import_errors`);
    await q.query(`DROP TABLE imports`);
  }
}
