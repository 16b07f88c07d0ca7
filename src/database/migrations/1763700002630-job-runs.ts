import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * How many runs took up each import and export (`runs`): a file whose processing kills its worker
 * every time would otherwise be queued again by the recovery sweep forever. A run past the bound
 * (MAX_JOB_RUNS) ends it `failed` instead of starting.
 */
export class JobRuns1763700002630 implements MigrationInterface {
  name = 'JobRuns1763700002630';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE imports ADD COLUMN runs integer NOT NULL DEFAULT 0`);
    await q.query(`ALTER TABLE exports ADD COLUMN runs integer NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE imports DROP COLUMN runs`);
    await q.query(`ALTER TABLE exports DROP COLUMN runs`);
  }
}
