import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Indexes behind the companies list's filter language and cursors (docs/decisions/lists-and-cursors.md). The companies
 * migration indexed name, industry, created_at, modified_at (each with id), owner_id, the unique
 * domain and the search expression. Added here:
 * - (column, id) on size, city and country: the other sortable columns, so a cursor page and an
 *   `eq` or range filter on them read an index range;
 * - a trigram index on lower(domain): `domain[contains]` and `[endsWith]` (compiled to
 *   lower(domain) LIKE '%…%');
 * - a jsonb_path_ops GIN index on `fields`: company custom-field `eq`/`in` (compiled to jsonb
 *   containment, `fields @> '{"tier":"pro"}'`), as contacts have.
 */
export class CompanyFilterIndexes1763700001500 implements MigrationInterface {
  name = 'CompanyFilterIndexes1763700001500';

  async up(q: QueryRunner): Promise<void> {
    for (const col of ['size', 'city', 'country']) {
      await q.query(`CREATE INDEX companies_${col}_idx ON companies (${col}, id)`);
    }
    await q.query(`CREATE INDEX companies_domain_lower_trgm ON companies USING gin (lower(domain) gin_trgm_ops)`);
    await q.query(`CREATE INDEX companies_fields_path_gin ON companies USING gin (fields jsonb_path_ops)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX companies_fields_path_gin`);
    await q.query(`DROP INDEX companies_domain_lower_trgm`);
    for (const col of ['size', 'city', 'country']) await q.query(`DROP INDEX companies_${col}_idx`);
  }
}
