import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The platform: users, API tokens, OAuth access tokens, contacts (with their search column kept
 * by a trigger), notifications and categories. Other resources add their own migrations.
 */
export class Platform1763700000000 implements MigrationInterface {
  name = 'Platform1763700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);
    // sf_text(a, b, ...): the lower-cased, space-joined text that a list's `search` matches. Every
    // resource uses it both in its search expression and in its trigram index, so they agree.
    await q.query(`
      CREATE FUNCTION sf_text(VARIADIC parts text[]) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT lower(array_to_string(parts, ' ')) $$`);

    await q.query(`
      CREATE TABLE users (
        id            serial PRIMARY KEY,
        name          text NOT NULL,
        email         text NOT NULL,
        plan          text NOT NULL DEFAULT 'basic' CHECK (plan IN ('basic','professional','enterprise')),
        team          text NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        modified_at   timestamptz NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX users_email_lower_uq ON users (lower(email))`);

    await q.query(`
      CREATE TABLE api_tokens (
        id            serial PRIMARY KEY,
        user_id       integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        name          text NOT NULL,
        token_hash    char(64) NOT NULL,
        token_prefix  text NOT NULL,
        permissions   text[] NOT NULL,
        expires_at    timestamptz NULL,
        last_used_at  timestamptz NULL,
        revoked_at    timestamptz NULL,
        created_at    timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE UNIQUE INDEX api_tokens_hash_uq ON api_tokens (token_hash)`);
    await q.query(`CREATE INDEX api_tokens_user_idx ON api_tokens (user_id)`);

    await q.query(`
      CREATE TABLE oauth_access_tokens (
        id            serial PRIMARY KEY,
        api_token_id  integer NOT NULL REFERENCES api_tokens(id) ON DELETE CASCADE,
        token_hash    char(64) NOT NULL,
        expires_at    timestamptz NOT NULL,
        revoked_at    timestamptz NULL,
        created_at    timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE UNIQUE INDEX oauth_access_tokens_hash_uq ON oauth_access_tokens (token_hash)`);
    await q.query(`CREATE INDEX oauth_access_tokens_parent_idx ON oauth_access_tokens (api_token_id)`);

    await q.query(`
      CREATE TABLE contacts (
        id               serial PRIMARY KEY,
        name             text NOT NULL,
        email            text NOT NULL,
        phone            text NULL,
        company          text NULL,
        title            text NULL,
        owner_id         integer NULL REFERENCES users(id) ON DELETE SET NULL,
        fields           jsonb NOT NULL DEFAULT '{}'::jsonb,
        search_text      text NOT NULL DEFAULT '',
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL,
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX contacts_email_lower_uq ON contacts (lower(email))`);
    await q.query(`CREATE INDEX contacts_owner_idx ON contacts (owner_id)`);
    await q.query(`CREATE INDEX contacts_search_trgm ON contacts USING gin (search_text gin_trgm_ops)`);
    // Ordering indexes for the sortable columns; every order is broken by id.
    for (const col of ['name', 'email', 'phone', 'company', 'title', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX contacts_${col}_idx ON contacts (${col}, id)`);
    }
    // search_text: the lower-cased text a `search` matches (standard columns plus the text values
    // of custom fields), kept by a trigger so bulk loads and every write path agree.
    await q.query(`
      CREATE FUNCTION contacts_search_text() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        NEW.search_text := lower(concat_ws(' ', NEW.name, NEW.email, NEW.phone, NEW.company, NEW.title,
          (SELECT string_agg(CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'array' THEN
             (SELECT string_agg(e #>> '{}', ' ') FROM jsonb_array_elements(v) e) ELSE NULL END, ' ')
           FROM jsonb_each(NEW.fields) AS f(k, v))));
        RETURN NEW;
      END $$`);
    await q.query(`
      CREATE TRIGGER contacts_search_text_trg BEFORE INSERT OR UPDATE OF name, email, phone, company, title, fields
      ON contacts FOR EACH ROW EXECUTE FUNCTION contacts_search_text()`);

    await q.query(`
      CREATE TABLE notifications (
        id           serial PRIMARY KEY,
        user_id      integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        type         text NOT NULL,
        message      text NOT NULL,
        details      jsonb NOT NULL DEFAULT '{}'::jsonb,
        is_read      boolean NOT NULL DEFAULT false,
        created_at   timestamptz NOT NULL DEFAULT now(),
        modified_at  timestamptz NULL
      )`);
    await q.query(`CREATE INDEX notifications_user_idx ON notifications (user_id, id)`);
    await q.query(`CREATE INDEX notifications_user_read_idx ON notifications (user_id, is_read)`);
    await q.query(`CREATE INDEX notifications_user_type_idx ON notifications (user_id, type)`);

    await q.query(`
      CREATE TABLE categories (
        id               serial PRIMARY KEY,
        title            text NOT NULL,
        alias            text NOT NULL,
        description      text NULL,
        color            text NULL,
        bundle           text NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL,
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    await q.query(`CREATE UNIQUE INDEX categories_bundle_alias_uq ON categories (bundle, alias)`);
    await q.query(`CREATE INDEX categories_bundle_idx ON categories (bundle, id)`);
    await q.query(`CREATE INDEX categories_search_trgm ON categories USING gin (sf_text(title, alias, description) gin_trgm_ops)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['categories', 'notifications', 'contacts', 'oauth_access_tokens', 'api_tokens', 'users']) {
      await q.query(`DROP TABLE IF EXISTS ${t} CASCADE`);
    }
    await q.query(`DROP FUNCTION IF EXISTS contacts_search_text()`);
    await q.query(`DROP FUNCTION IF EXISTS sf_text(text[])`);
  }
}
