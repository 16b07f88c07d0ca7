import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * text_messages.idempotent_handover: a message whose send relies on the gateway's Idempotency-Key
 * after a worker death (a workflow's send_sms step, exactly once as broadcasts are): a claim left by
 * a dead worker is taken over and the message handed over again with the same key, which the
 * gateway deduplicates. A user's single send keeps false: at most once, its unknown outcome ends
 * `failed` (`outcome_unknown`). A constant default: no table rewrite.
 */
export class TextMessageIdempotentHandover1763700004000 implements MigrationInterface {
  name = 'TextMessageIdempotentHandover1763700004000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE text_messages ADD COLUMN idempotent_handover boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE text_messages DROP COLUMN idempotent_handover`);
  }
}
