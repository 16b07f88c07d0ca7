import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * One trigram index for contacts' text instead of four. `search_text` (the lower-cased name, email,
 * phone, company, title and custom text values, trigram-indexed since the platform migration) holds
 * each of those columns' lower-cased text, so a `contains`, `startsWith` or `endsWith` filter on one
 * of them also tests `search_text LIKE '%term%'`, which its own match implies (contacts.repository.ts,
 * `textIndex`), and that index serves it. The per-column trigram indexes on lower(name),
 * lower(email) and lower(company) (FilterIndexes1763700001100) go: each insert or text change paid
 * for all four (bench/imports.mjs: the email index alone 15-20 µs of database CPU per imported row).
 */
export class ContactTextIndex1763700001910 implements MigrationInterface {
  name = 'ContactTextIndex1763700001910';

  async up(q: QueryRunner): Promise<void> {
    for (const col of ['name', 'email', 'company']) await q.query(`DROP INDEX IF EXISTS contacts_${col}_lower_trgm`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const col of ['name', 'email', 'company']) {
      await q.query(`CREATE INDEX contacts_${col}_lower_trgm ON contacts USING gin (lower(${col}) gin_trgm_ops)`);
    }
  }
}
