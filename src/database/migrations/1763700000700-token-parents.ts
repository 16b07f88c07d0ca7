import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Which token created an API token (docs/decisions/api-tokens-and-oauth.md): a token's children never outlive it, and
 * revoking a token revokes every token it created, transitively. Tokens created by the CLI have
 * no parent. Deleting a token row (only ever through its user) deletes its children too.
 */
export class TokenParents1763700000700 implements MigrationInterface {
  name = 'TokenParents1763700000700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_tokens ADD COLUMN parent_token_id integer NULL REFERENCES api_tokens(id) ON DELETE CASCADE`);
    await q.query(`CREATE INDEX api_tokens_parent_idx ON api_tokens (parent_token_id) WHERE parent_token_id IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_tokens DROP COLUMN parent_token_id`);
  }
}
