import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Incremental sync (docs/decisions/lists-and-cursors.md): lists take `modifiedSince`, compared with a record's last change
 * time COALESCE(modified_at, created_at) (see changedExpression in lists/list-spec.ts). The two
 * largest tables get an index on exactly that expression, so a sync poll reads only what changed.
 */
export class ModifiedSince1763700000910 implements MigrationInterface {
  name = 'ModifiedSince1763700000910';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX contacts_changed_at_idx ON contacts ((COALESCE(modified_at, created_at)))`);
    await q.query(`CREATE INDEX deals_changed_at_idx ON deals ((COALESCE(modified_at, created_at)))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX deals_changed_at_idx`);
    await q.query(`DROP INDEX contacts_changed_at_idx`);
  }
}
