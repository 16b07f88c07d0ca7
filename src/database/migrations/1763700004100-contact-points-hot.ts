import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Points written as heap-only (HOT) updates (docs/decisions/scoring-application.md): with no index on
 * `contacts.points`, a change of points changes no indexed column, so PostgreSQL writes the new row
 * version on the same page without an entry in any of the table's indexes (three of them GIN). The
 * fill factor leaves a tenth of each page free for those versions; it applies to pages written from
 * now on (existing pages fill it as rows are updated and pages pruned). `filter=points...` and
 * `orderBy=points` read the table instead of an index.
 */
export class ContactPointsHot1763700004100 implements MigrationInterface {
  name = 'ContactPointsHot1763700004100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS contacts_points_idx`);
    await q.query(`ALTER TABLE contacts SET (fillfactor = 90)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE contacts RESET (fillfactor)`);
    await q.query(`CREATE INDEX IF NOT EXISTS contacts_points_idx ON contacts (points, id)`);
  }
}
