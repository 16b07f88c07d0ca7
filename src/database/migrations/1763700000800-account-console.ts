import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The signed-in account console (src/console/): a password per user (scrypt, see console/passwords.ts),
 * one-time invitations to set it, server-side sessions, and the sign-in failure counters that slow
 * password guessing per account and per client address.
 */
export class AccountConsole1763700000800 implements MigrationInterface {
  name = 'AccountConsole1763700000800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE user_passwords (
        user_id       integer PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
        password_hash text NOT NULL,
        updated_at    timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE account_invitations (
        id          serial PRIMARY KEY,
        user_id     integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        token_hash  text NOT NULL,
        expires_at  timestamptz NOT NULL,
        used_at     timestamptz NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT account_invitations_token_hash_uq UNIQUE (token_hash)
      )`);
    await q.query(`
      CREATE TABLE account_sessions (
        id            bigserial PRIMARY KEY,
        user_id       integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        token_hash    text NOT NULL,
        csrf_token    text NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        last_seen_at  timestamptz NOT NULL DEFAULT now(),
        expires_at    timestamptz NOT NULL,
        revoked_at    timestamptz NULL,
        ip            text NULL,
        user_agent    text NULL,
        CONSTRAINT account_sessions_token_hash_uq UNIQUE (token_hash)
      )`);
    await q.query(`CREATE INDEX account_sessions_user_active_ix ON account_sessions (user_id) WHERE revoked_at IS NULL`);
    await q.query(`
      CREATE TABLE account_sign_in_failures (
        key       text PRIMARY KEY,
        failures  integer NOT NULL,
        first_at  timestamptz NOT NULL,
        last_at   timestamptz NOT NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS account_sign_in_failures`);
    await q.query(`DROP TABLE IF EXISTS account_sessions`);
    await q.query(`DROP TABLE IF EXISTS account_invitations`);
    await q.query(`DROP TABLE IF EXISTS user_passwords`);
  }
}
