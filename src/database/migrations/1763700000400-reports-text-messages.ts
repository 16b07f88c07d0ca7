import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Reports with their stored results, and text messages (SMS) with the columns that make a send
 * happen at most once (send_count, claim_token, claimed_at; see text-messages.processor.ts).
 */
export class ReportsTextMessages1763700000400 implements MigrationInterface {
  name = 'ReportsTextMessages1763700000400';

  async up(q: QueryRunner): Promise<void> {
    const audit = `
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL,
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL`;

    await q.query(`
      CREATE TABLE reports (
        id            serial PRIMARY KEY,
        name          text NOT NULL,
        description   text NULL,
        type          text NOT NULL CHECK (type IN ('sales','marketing')),
        is_published  boolean NOT NULL DEFAULT true,
        schedule      text NULL CHECK (schedule IN ('daily','weekly','monthly')),
        filters       jsonb NOT NULL DEFAULT '{}'::jsonb,
        columns       text[] NOT NULL,
        last_run      timestamptz NULL,
        ${audit}
      )`);
    await q.query(`CREATE INDEX reports_type_idx ON reports (type, id)`);
    await q.query(`CREATE INDEX reports_published_idx ON reports (is_published, id)`);
    await q.query(`CREATE INDEX reports_search_trgm ON reports USING gin (sf_text(name, description) gin_trgm_ops)`);
    for (const col of ['name', 'schedule', 'last_run', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX reports_${col}_idx ON reports (${col}, id)`);
    }

    // Results of finished runs; the latest is served. Older ones are pruned on each run.
    await q.query(`
      CREATE TABLE report_results (
        id            bigserial PRIMARY KEY,
        report_id     integer NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
        generated_at  timestamptz NOT NULL,
        trigger       text NOT NULL CHECK (trigger IN ('manual','schedule')),
        job_id        text NULL,
        data          jsonb NOT NULL,
        summary       jsonb NOT NULL
      )`);
    await q.query(`CREATE INDEX report_results_report_idx ON report_results (report_id, generated_at DESC, id DESC)`);

    await q.query(`
      CREATE TABLE text_messages (
        id                  serial PRIMARY KEY,
        content             text NOT NULL CHECK (char_length(content) BETWEEN 1 AND 1600),
        recipient           text NOT NULL,
        status              text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft','queued','sent','delivered','failed')),
        campaign_id         integer NULL REFERENCES campaigns(id) ON DELETE SET NULL,
        scheduled_for       timestamptz NULL,
        sent_at             timestamptz NULL,
        delivered_at        timestamptz NULL,
        failed_at           timestamptz NULL,
        failure_code        text NULL CHECK (failure_code IN ('provider_rejected','retries_exhausted','outcome_unknown','delivery_failed')),
        failure_reason      text NULL,
        queued_at           timestamptz NULL,
        -- Incremented by every send; part of the job id and of the provider's idempotency key.
        send_count          integer NOT NULL DEFAULT 0,
        -- Set (conditionally) by the worker right before it calls the provider; see the processor.
        claim_token         uuid NULL,
        claimed_at          timestamptz NULL,
        provider            text NULL,
        provider_message_id text NULL,
        ${audit}
      )`);
    await q.query(`CREATE INDEX text_messages_status_idx ON text_messages (status, id)`);
    await q.query(`CREATE INDEX text_messages_campaign_idx ON text_messages (campaign_id, id)`);
    await q.query(`CREATE INDEX text_messages_campaign_status_idx ON text_messages (campaign_id, status) WHERE campaign_id IS NOT NULL`);
    await q.query(`CREATE INDEX text_messages_queued_idx ON text_messages (queued_at, id) WHERE status = 'queued'`);
    await q.query(`CREATE INDEX text_messages_provider_id_idx ON text_messages (provider, provider_message_id) WHERE provider_message_id IS NOT NULL`);
    await q.query(`CREATE INDEX text_messages_search_trgm ON text_messages USING gin (sf_text(content, recipient) gin_trgm_ops)`);
    for (const col of ['recipient', 'scheduled_for', 'sent_at', 'delivered_at', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX text_messages_${col}_idx ON text_messages (${col}, id)`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['text_messages', 'report_results', 'reports']) await q.query(`DROP TABLE IF EXISTS ${t} CASCADE`);
  }
}
