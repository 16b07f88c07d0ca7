import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * modifiedAt is set on creation, as on every change (docs/decisions/wire-format.md): every table
 * with audit columns gets `modified_at DEFAULT now()`, the same instant as `created_at` in the
 * inserting transaction, and the records created before this migration get their creation time
 * (and creator) as their last change.
 */
export class ModifiedAtOnCreation1763700000960 implements MigrationInterface {
  name = 'ModifiedAtOnCreation1763700000960';

  private async tables(q: QueryRunner): Promise<{ table: string; by: boolean }[]> {
    return (await q.query(
      `SELECT c.table_name AS "table",
              EXISTS (SELECT 1 FROM information_schema.columns b
                       WHERE b.table_schema = c.table_schema AND b.table_name = c.table_name AND b.column_name = 'modified_by') AS by
         FROM information_schema.columns c
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
        WHERE c.table_schema = current_schema() AND c.column_name = 'modified_at'
          AND EXISTS (SELECT 1 FROM information_schema.columns a
                       WHERE a.table_schema = c.table_schema AND a.table_name = c.table_name AND a.column_name = 'created_at')
        ORDER BY 1`,
    )) as { table: string; by: boolean }[];
  }

  async up(q: QueryRunner): Promise<void> {
    for (const { table, by } of await this.tables(q)) {
      await q.query(`ALTER TABLE "${table}" ALTER COLUMN modified_at SET DEFAULT now()`);
      await q.query(
        `UPDATE "${table}" SET modified_at = created_at${by ? ', modified_by = created_by, modified_by_user = created_by_user' : ''} WHERE modified_at IS NULL`,
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const { table } of await this.tables(q)) await q.query(`ALTER TABLE "${table}" ALTER COLUMN modified_at DROP DEFAULT`);
  }
}
