import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * An Idempotency-Key's answer is replayed only to the credential that made the original request
 * (`credential`: the kind of token and its API token's id), so a replay never answers a request
 * that another token, with other permissions, would have been refused. Keys recorded before have
 * no credential and are answered to nobody (a retry with them is a 422; they expire within a day).
 * Answers that carried a secret (a new token's, a webhook's `whsec_`) were kept in plaintext: they
 * are deleted, since from now on such answers are kept without their secret.
 */
export class IdempotencyCredential1763700002620 implements MigrationInterface {
  name = 'IdempotencyCredential1763700002620';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys ADD COLUMN credential varchar(40)`);
    await q.query(`DELETE FROM idempotency_keys WHERE position('"secret":"'::bytea in response_body) > 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys DROP COLUMN credential`);
  }
}
