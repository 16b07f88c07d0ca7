import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Tables that several resources read: campaigns and their members (campaigns, text messages,
 * marketing reports), deals (deals, sales reports) and activities.
 */
export class CrmTables1763700000050 implements MigrationInterface {
  name = 'CrmTables1763700000050';

  async up(q: QueryRunner): Promise<void> {
    const audit = `
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL,
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL`;

    await q.query(`
      CREATE TABLE campaigns (
        id           serial PRIMARY KEY,
        name         text NOT NULL,
        description  text NULL,
        type         text NULL,
        status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active','inactive','completed')),
        start_date   timestamptz NULL,
        end_date     timestamptz NULL,
        ${audit}
      )`);
    await q.query(`CREATE INDEX campaigns_status_idx ON campaigns (status, id)`);
    await q.query(`CREATE INDEX campaigns_end_date_idx ON campaigns (end_date) WHERE status <> 'completed'`);
    await q.query(`CREATE INDEX campaigns_search_trgm ON campaigns USING gin (sf_text(name, description, type) gin_trgm_ops)`);

    await q.query(`
      CREATE TABLE campaign_members (
        campaign_id  integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        contact_id   integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        added_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (campaign_id, contact_id)
      )`);
    await q.query(`CREATE INDEX campaign_members_contact_idx ON campaign_members (contact_id)`);

    await q.query(`
      CREATE TABLE deals (
        id                  serial PRIMARY KEY,
        title               text NOT NULL,
        value               numeric(14,2) NOT NULL CHECK (value >= 0),
        contact_id          integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        expected_close_date date NULL,
        stage               text NULL,
        probability         integer NULL CHECK (probability BETWEEN 0 AND 100),
        status              text NOT NULL DEFAULT 'open' CHECK (status IN ('open','won','lost')),
        product             text NULL,
        quantity            integer NOT NULL DEFAULT 1 CHECK (quantity >= 0),
        closed_at           timestamptz NULL,
        owner_id            integer NULL REFERENCES users(id) ON DELETE SET NULL,
        ${audit}
      )`);
    await q.query(`CREATE INDEX deals_status_idx ON deals (status, id)`);
    await q.query(`CREATE INDEX deals_contact_idx ON deals (contact_id)`);
    await q.query(`CREATE INDEX deals_owner_idx ON deals (owner_id)`);
    // Sales reports: won deals by close date.
    await q.query(`CREATE INDEX deals_won_closed_idx ON deals (closed_at) INCLUDE (value, quantity, product, owner_id) WHERE status = 'won'`);
    await q.query(`CREATE INDEX deals_search_trgm ON deals USING gin (sf_text(title, stage, product) gin_trgm_ops)`);

    await q.query(`
      CREATE TABLE activities (
        id          serial PRIMARY KEY,
        type        text NOT NULL CHECK (type IN ('call','email','meeting')),
        subject     text NOT NULL,
        contact_id  integer NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
        due_date    timestamptz NULL,
        notes       text NULL,
        outcome     text NULL,
        ${audit}
      )`);
    await q.query(`CREATE INDEX activities_type_idx ON activities (type, id)`);
    await q.query(`CREATE INDEX activities_contact_idx ON activities (contact_id)`);
    await q.query(`CREATE INDEX activities_search_trgm ON activities USING gin (sf_text(subject, notes, outcome) gin_trgm_ops)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['activities', 'deals', 'campaign_members', 'campaigns']) await q.query(`DROP TABLE IF EXISTS ${t} CASCADE`);
  }
}
