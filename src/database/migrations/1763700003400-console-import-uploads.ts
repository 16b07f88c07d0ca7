import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * CSV files uploaded in the account console and waiting for their columns to be mapped: the
 * console keeps the file (in the job files, by its storage key) and its header between the upload
 * and the mapping form. `import_id` is set once the import is started (a repeated post of the form
 * then opens that import instead of starting another); `starting` marks the one request starting
 * it. Rows are deleted a day after their upload (files not imported with them).
 */
export class ConsoleImportUploads1763700003400 implements MigrationInterface {
  name = 'ConsoleImportUploads1763700003400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE console_import_uploads (
        id bigserial PRIMARY KEY,
        user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        object text NOT NULL,
        storage_key text NOT NULL,
        file_name text NOT NULL,
        file_size bigint NOT NULL,
        header jsonb NOT NULL,
        starting boolean NOT NULL DEFAULT false,
        import_id integer NULL,
        created_at timestamptz NOT NULL
      )`);
    await q.query(`CREATE INDEX console_import_uploads_created_idx ON console_import_uploads (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE console_import_uploads`);
  }
}
