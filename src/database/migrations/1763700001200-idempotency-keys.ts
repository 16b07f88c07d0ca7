import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Idempotency-Key (docs/decisions/idempotency-keys.md): one row per account, method + path (as `scope`, a SHA-256 so any
 * path length fits the index) and key. A request claims its key by inserting a `running` row (INSERT
 * ... ON CONFLICT DO NOTHING, so exactly one of several instances wins), then completes it with the
 * answer it sent; `lease_until` frees the key of a request that crashed, `expires_at` ends the replay.
 */
export class IdempotencyKeys1763700001200 implements MigrationInterface {
  name = 'IdempotencyKeys1763700001200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE idempotency_keys (
        user_id integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        scope char(64) NOT NULL,
        key varchar(255) NOT NULL,
        method varchar(10) NOT NULL,
        path text NOT NULL,
        fingerprint char(64) NOT NULL,
        claim uuid NOT NULL,
        state varchar(10) NOT NULL CONSTRAINT idempotency_keys_state_ck CHECK (state IN ('running', 'done')),
        lease_until timestamptz NOT NULL,
        response_status smallint,
        response_headers jsonb,
        response_body bytea,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, scope, key)
      )`);
    await q.query(`CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE idempotency_keys`);
  }
}
