import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Companies: the companies table (domain unique, search by trigram), contacts'
 * primary company (contacts.company_id) and deals' company (deals.company_id), both detached
 * (SET NULL) when the company is deleted, and the backfill runs that create companies from the
 * contacts' company strings.
 */
export class Companies1763700001000 implements MigrationInterface {
  name = 'Companies1763700001000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE companies (
        id               serial PRIMARY KEY,
        name             text NOT NULL,
        domain           text NULL,
        phone            text NULL,
        website          text NULL,
        industry         text NULL,
        size             integer NULL CONSTRAINT companies_size_check CHECK (size >= 0),
        address1         text NULL,
        address2         text NULL,
        city             text NULL,
        state            text NULL,
        zipcode          text NULL,
        country          text NULL,
        description      text NULL,
        owner_id         integer NULL CONSTRAINT companies_owner_id_fkey REFERENCES users(id) ON DELETE SET NULL,
        fields           jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL DEFAULT now(),
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    // Domains are stored normalised (lower case, no scheme, no www.), so a plain unique index dedupes them.
    await q.query(`CREATE UNIQUE INDEX companies_domain_uq ON companies (domain)`);
    // Name search and the backfill's case-insensitive match; the list's search expression has its own index.
    await q.query(`CREATE INDEX companies_name_trgm ON companies USING gin (lower(name) gin_trgm_ops)`);
    await q.query(`CREATE INDEX companies_name_lower_idx ON companies (lower(name), id)`);
    await q.query(`CREATE INDEX companies_search_trgm ON companies USING gin (sf_text(name, domain, industry) gin_trgm_ops)`);
    for (const col of ['name', 'industry', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX companies_${col}_idx ON companies (${col}, id)`);
    }
    await q.query(`CREATE INDEX companies_owner_idx ON companies (owner_id)`);
    await q.query(`CREATE INDEX companies_changed_at_idx ON companies ((COALESCE(modified_at, created_at)))`);
    // Exact totals of the unfiltered list (see the row-counts migration).
    await q.query(`INSERT INTO row_counts (table_name, shard, n) VALUES ('companies', 0, 0)`);
    await q.query(
      `CREATE TRIGGER companies_count_ins AFTER INSERT ON companies REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counts_track()`,
    );
    await q.query(
      `CREATE TRIGGER companies_count_del AFTER DELETE ON companies REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION row_counts_track()`,
    );

    // A nullable column without a default: no table rewrite, instant at a million contacts.
    await q.query(`ALTER TABLE contacts ADD COLUMN company_id integer NULL CONSTRAINT contacts_company_id_fkey REFERENCES companies(id) ON DELETE SET NULL`);
    await q.query(`CREATE INDEX contacts_company_id_idx ON contacts (company_id, id)`);
    await q.query(`ALTER TABLE deals ADD COLUMN company_id integer NULL CONSTRAINT deals_company_id_fkey REFERENCES companies(id) ON DELETE SET NULL`);
    await q.query(`CREATE INDEX deals_company_id_idx ON deals (company_id)`);

    await q.query(`
      CREATE TABLE company_backfills (
        id                serial PRIMARY KEY,
        status            text NOT NULL DEFAULT 'queued' CONSTRAINT company_backfills_status_check CHECK (status IN ('queued', 'running', 'completed', 'failed')),
        trigger           text NOT NULL,
        companies_created integer NULL,
        contacts_linked   integer NULL,
        error             text NULL,
        created_at        timestamptz NOT NULL DEFAULT now(),
        started_at        timestamptz NULL,
        finished_at       timestamptz NULL,
        created_by        integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user   text NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE company_backfills`);
    await q.query(`ALTER TABLE deals DROP COLUMN company_id`);
    await q.query(`ALTER TABLE contacts DROP COLUMN company_id`);
    await q.query(`DELETE FROM row_counts WHERE table_name = 'companies'`);
    await q.query(`DROP TABLE companies`);
  }
}
