import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * An import's committed chunks: a chunk's row is inserted in the transaction that writes the
 * chunk, so a chunk is written at most once (a second writer of it finds the row and skips it) and
 * a resumed run skips exactly the committed chunks, also when chunks were written in parallel.
 */
export class ImportChunks1763700001710 implements MigrationInterface {
  name = 'ImportChunks1763700001710';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE import_chunks (
        import_id integer NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
        chunk     integer NOT NULL,
        PRIMARY KEY (import_id, chunk)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE import_chunks`);
  }
}
