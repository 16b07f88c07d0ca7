import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Webhooks (docs/decisions/events-and-webhooks.md): subscriptions, one delivery row per (webhook, event) with its attempts,
 * and the dispatcher's cursor over the event feed (one row).
 */
export class Webhooks1763700000950 implements MigrationInterface {
  name = 'Webhooks1763700000950';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE webhooks (
        id serial PRIMARY KEY,
        url text NOT NULL,
        events text[] NOT NULL,
        description text NULL,
        is_active boolean NOT NULL DEFAULT true,
        secret text NOT NULL,
        previous_secret text NULL,
        previous_secret_expires_at timestamptz NULL,
        disabled_reason text NULL,
        last_success_at timestamptz NULL,
        failing_since timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user text NULL,
        modified_at timestamptz NULL,
        modified_by integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL
      )`);
    await q.query(`
      CREATE TABLE webhook_deliveries (
        id bigserial PRIMARY KEY,
        webhook_id integer NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
        event_id uuid NOT NULL,
        event_type text NOT NULL,
        sequence bigint NULL,
        body text NOT NULL,
        status text NOT NULL DEFAULT 'pending' CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'succeeded', 'failed', 'dead')),
        attempt_count integer NOT NULL DEFAULT 0,
        attempts jsonb NOT NULL DEFAULT '[]'::jsonb,
        next_attempt_at timestamptz NULL DEFAULT now(),
        window_started_at timestamptz NOT NULL DEFAULT now(),
        claim_token uuid NULL,
        claimed_at timestamptz NULL,
        last_error text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz NULL,
        CONSTRAINT webhook_deliveries_webhook_event_uq UNIQUE (webhook_id, event_id)
      )`);
    await q.query(`CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id DESC)`);
    await q.query(`CREATE INDEX webhook_deliveries_in_flight_idx ON webhook_deliveries (webhook_id) WHERE claim_token IS NOT NULL`);
    await q.query(`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'failed')`);
    await q.query(`CREATE TABLE webhook_dispatch_cursor (id integer PRIMARY KEY CHECK (id = 1), sequence bigint NOT NULL DEFAULT 0)`);
    // The cursor starts at the feed's start; events read while no webhook is active produce no delivery.
    await q.query(`INSERT INTO webhook_dispatch_cursor (id, sequence) VALUES (1, 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_dispatch_cursor`);
    await q.query(`DROP TABLE webhook_deliveries`);
    await q.query(`DROP TABLE webhooks`);
  }
}
