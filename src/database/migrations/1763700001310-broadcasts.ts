import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Text message broadcasts: one content (with merge fields) to an audience, sent as one
 * text message per recipient. Each message names its broadcast and contact; (broadcast_id,
 * contact_id) is unique, so no recipient gets two messages of one broadcast whatever races.
 */
export class Broadcasts1763700001310 implements MigrationInterface {
  name = 'Broadcasts1763700001310';

  async up(q: QueryRunner): Promise<void> {
    const audit = `created_at timestamptz NOT NULL DEFAULT now(), created_by integer NULL REFERENCES users(id) ON DELETE SET NULL, created_by_user text NULL,
        modified_at timestamptz NULL, modified_by integer NULL REFERENCES users(id) ON DELETE SET NULL, modified_by_user text NULL`;
    await q.query(`
      CREATE TABLE broadcasts (
        id              serial PRIMARY KEY,
        name            text NULL CHECK (char_length(name) <= 255),
        content         text NOT NULL CHECK (char_length(content) BETWEEN 1 AND 1600),
        -- { "campaignId": n } or { "contactIds": [...] }
        audience        jsonb NOT NULL,
        status          text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft','scheduled','sending','completed','canceled')),
        scheduled_for   timestamptz NULL,
        started_at      timestamptz NULL,
        completed_at    timestamptz NULL,
        canceled_at     timestamptz NULL,
        -- Messages created by the send, and contacts skipped by reason ({ "no_phone": n, ... }).
        recipients      integer NULL,
        skipped         jsonb NOT NULL DEFAULT '{}'::jsonb,
        ${audit}
      )`);
    await q.query(`CREATE INDEX broadcasts_status_idx ON broadcasts (status, id)`);
    for (const col of ['name', 'scheduled_for', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX broadcasts_${col}_idx ON broadcasts (${col}, id)`);
    }
    await q.query(`ALTER TABLE text_messages ADD COLUMN broadcast_id integer NULL REFERENCES broadcasts(id) ON DELETE SET NULL,
                     ADD COLUMN contact_id integer NULL`);
    await q.query(`CREATE UNIQUE INDEX text_messages_broadcast_contact_uq ON text_messages (broadcast_id, contact_id) WHERE broadcast_id IS NOT NULL`);
    // The batch claim: the next queued, unclaimed messages of a broadcast.
    await q.query(`CREATE INDEX text_messages_broadcast_queued_idx ON text_messages (broadcast_id, id) WHERE status = 'queued' AND claim_token IS NULL`);
    await q.query(`CREATE INDEX text_messages_broadcast_status_idx ON text_messages (broadcast_id, status) WHERE broadcast_id IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE text_messages DROP COLUMN contact_id, DROP COLUMN broadcast_id`);
    await q.query(`DROP TABLE broadcasts`);
  }
}
