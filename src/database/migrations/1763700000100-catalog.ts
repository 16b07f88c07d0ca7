import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Catalog resources: custom fields (with the contact-value indexes they need), point groups, and
 * the list indexes of categories and notifications (their tables come from the platform migration).
 */
export class Catalog1763700000100 implements MigrationInterface {
  name = 'Catalog1763700000100';

  async up(q: QueryRunner): Promise<void> {
    const audit = `
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL,
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL`;

    // Custom fields of contacts and companies. The API names created_at/modified_at dateAdded/dateModified.
    await q.query(`
      CREATE TABLE fields (
        id                     serial PRIMARY KEY,
        object                 text NOT NULL CHECK (object IN ('contact','company')),
        label                  text NOT NULL,
        alias                  text NOT NULL CHECK (alias ~ '^[a-z][a-z0-9_]*$'),
        description            text NULL,
        type                   text NOT NULL,
        field_group            text NULL,
        field_order            integer NOT NULL DEFAULT 0,
        default_value          text NULL,
        is_required            boolean NOT NULL DEFAULT false,
        is_publicly_updatable  boolean NOT NULL DEFAULT false,
        is_unique_identifier   boolean NOT NULL DEFAULT false,
        properties             jsonb NOT NULL DEFAULT '[]'::jsonb,
        is_published           boolean NOT NULL DEFAULT true,
        publish_up             timestamptz NULL,
        publish_down           timestamptz NULL,
        ${audit}
      )`);
    await q.query(`CREATE UNIQUE INDEX fields_object_alias_uq ON fields (object, alias)`);
    await q.query(`CREATE INDEX fields_object_idx ON fields (object, id)`);
    await q.query(`CREATE INDEX fields_published_idx ON fields (is_published, id)`);
    await q.query(`CREATE INDEX fields_type_idx ON fields (type, id)`);
    await q.query(`CREATE INDEX fields_order_idx ON fields (object, field_order, id)`);
    await q.query(`CREATE INDEX fields_search_trgm ON fields USING gin (sf_text(label, alias, description) gin_trgm_ops)`);

    // Contacts' custom values: containment (uniqueness checks of unique-identifier fields) and key
    // existence (removing or renaming a field's values) both use this index.
    await q.query(`CREATE INDEX contacts_fields_gin ON contacts USING gin (fields)`);

    await q.query(`
      CREATE TABLE point_groups (
        id              serial PRIMARY KEY,
        name            text NOT NULL,
        description     text NULL,
        is_published    boolean NOT NULL DEFAULT true,
        minimum_points  integer NOT NULL CHECK (minimum_points >= 0),
        maximum_points  integer NOT NULL CHECK (maximum_points >= 0),
        color           text NULL CHECK (color ~ '^#[0-9a-f]{6}$'),
        ${audit},
        CONSTRAINT point_groups_range_ck CHECK (minimum_points <= maximum_points)
      )`);
    await q.query(`CREATE INDEX point_groups_published_idx ON point_groups (is_published, id)`);
    await q.query(`CREATE INDEX point_groups_name_idx ON point_groups (name, id)`);
    await q.query(`CREATE INDEX point_groups_search_trgm ON point_groups USING gin (sf_text(name, description) gin_trgm_ops)`);

    await q.query(`CREATE INDEX categories_title_idx ON categories (title, id)`);
    await q.query(`CREATE INDEX notifications_search_trgm ON notifications USING gin (sf_text(message) gin_trgm_ops)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS notifications_search_trgm`);
    await q.query(`DROP INDEX IF EXISTS categories_title_idx`);
    await q.query(`DROP TABLE IF EXISTS point_groups`);
    await q.query(`DROP INDEX IF EXISTS contacts_fields_gin`);
    await q.query(`DROP TABLE IF EXISTS fields`);
  }
}
