import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The log SMS provider's record of the Idempotency-Keys it has taken (src/sms/log.provider.ts): a
 * second hand-over with a key already here is refused as a duplicate (counted in `duplicates`) and
 * answered with the first one's result, in every worker process and across restarts.
 */
export class SmsLogSends1763700002600 implements MigrationInterface {
  name = 'SmsLogSends1763700002600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE sms_log_sends (
        idempotency_key text PRIMARY KEY,
        message_id integer NOT NULL,
        accepted_at timestamptz NOT NULL DEFAULT now(),
        duplicates integer NOT NULL DEFAULT 0,
        last_duplicate_at timestamptz
      )`);
    await q.query(`CREATE INDEX sms_log_sends_accepted_at ON sms_log_sends (accepted_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE sms_log_sends`);
  }
}
