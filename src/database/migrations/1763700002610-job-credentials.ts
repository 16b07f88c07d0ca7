import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The token an export or a broadcast acts for (imports keep it in their stored principal): the job
 * stops once that token is revoked, deleted or expired. No foreign key: a deleted token is exactly
 * what the job must notice. Null for rows made before (and for work started without a token).
 */
export class JobCredentials1763700002610 implements MigrationInterface {
  name = 'JobCredentials1763700002610';

  async up(q: QueryRunner): Promise<void> {
    for (const table of ['exports', 'broadcasts']) {
      await q.query(`ALTER TABLE ${table} ADD COLUMN api_token_id integer, ADD COLUMN access_token_id integer`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['exports', 'broadcasts']) await q.query(`ALTER TABLE ${table} DROP COLUMN api_token_id, DROP COLUMN access_token_id`);
  }
}
