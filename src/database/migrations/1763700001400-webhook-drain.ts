import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Webhook deliveries are sent by one drain job per webhook, which claims that webhook's due
 * deliveries in sequence order: an index on (webhook_id, id) over the open deliveries makes that
 * claim read only the webhook's open rows. The per-delivery in-flight count the old claim made is
 * gone; the index of live claims per webhook stays (claims are renewed by webhook and token).
 */
export class WebhookDrain1763700001400 implements MigrationInterface {
  name = 'WebhookDrain1763700001400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX webhook_deliveries_open_idx ON webhook_deliveries (webhook_id, id) WHERE status IN ('pending', 'failed')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_deliveries_open_idx`);
  }
}
