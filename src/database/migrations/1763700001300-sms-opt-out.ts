import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * SMS opt-out (docs/decisions/sms-sending-and-opt-out.md): a per-contact do-not-contact entry for the `sms` channel (nullable
 * columns on contacts, so the contact's hot-path statements stay one statement), the inbound
 * messages the gateway forwards (STOP/START), and the new terminal text message status `canceled`
 * (a send that must not happen any more: the recipient opted out, or the broadcast was canceled).
 */
export class SmsOptOut1763700001300 implements MigrationInterface {
  name = 'SmsOptOut1763700001300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE contacts
        ADD COLUMN dnc_sms_reason text NULL CONSTRAINT contacts_dnc_sms_reason_check CHECK (dnc_sms_reason IN ('unsubscribed','bounced','manual')),
        ADD COLUMN dnc_sms_since timestamptz NULL,
        ADD COLUMN dnc_sms_comment text NULL CONSTRAINT contacts_dnc_sms_comment_check CHECK (char_length(dnc_sms_comment) <= 1000)`);
    // The opted-out contacts are few: a partial index serves the dncSms=true filter and the send checks.
    await q.query(`CREATE INDEX contacts_dnc_sms_idx ON contacts (phone) WHERE dnc_sms_reason IS NOT NULL`);

    await q.query(`ALTER TABLE text_messages DROP CONSTRAINT text_messages_status_check`);
    await q.query(
      `ALTER TABLE text_messages ADD CONSTRAINT text_messages_status_check CHECK (status IN ('draft','queued','sent','delivered','failed','canceled'))`,
    );
    await q.query(`ALTER TABLE text_messages DROP CONSTRAINT text_messages_failure_code_check`);
    await q.query(
      `ALTER TABLE text_messages ADD CONSTRAINT text_messages_failure_code_check
         CHECK (failure_code IN ('provider_rejected','retries_exhausted','outcome_unknown','delivery_failed','opted_out','canceled'))`,
    );
    await q.query(`ALTER TABLE text_messages ADD COLUMN canceled_at timestamptz NULL`);

    await q.query(`
      CREATE TABLE inbound_text_messages (
        id                  serial PRIMARY KEY,
        from_number         text NOT NULL,
        to_number           text NULL,
        body                text NOT NULL,
        provider_message_id text NULL,
        received_at         timestamptz NOT NULL,
        -- What the message did: opt_out (STOP...), opt_in (START/UNSTOP) or none.
        action              text NOT NULL CHECK (action IN ('opt_out','opt_in','none')),
        contacts_updated    integer NOT NULL DEFAULT 0,
        created_at          timestamptz NOT NULL DEFAULT now()
      )`);
    // A gateway that retries a callback sends the same message id: it is recorded (and acted on) once.
    await q.query(
      `CREATE UNIQUE INDEX inbound_text_messages_provider_id_uq ON inbound_text_messages (provider_message_id) WHERE provider_message_id IS NOT NULL`,
    );
    await q.query(`CREATE INDEX inbound_text_messages_from_idx ON inbound_text_messages (from_number, id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE inbound_text_messages`);
    await q.query(`UPDATE text_messages SET status = 'failed' WHERE status = 'canceled'`);
    await q.query(`UPDATE text_messages SET failure_code = NULL WHERE failure_code IN ('opted_out','canceled')`);
    await q.query(`ALTER TABLE text_messages DROP COLUMN canceled_at`);
    await q.query(`ALTER TABLE text_messages DROP CONSTRAINT text_messages_failure_code_check`);
    await q.query(
      `ALTER TABLE text_messages ADD CONSTRAINT text_messages_failure_code_check CHECK (failure_code IN ('provider_rejected','retries_exhausted','outcome_unknown','delivery_failed'))`,
    );
    await q.query(`ALTER TABLE text_messages DROP CONSTRAINT text_messages_status_check`);
    await q.query(`ALTER TABLE text_messages ADD CONSTRAINT text_messages_status_check CHECK (status IN ('draft','queued','sent','delivered','failed'))`);
    await q.query(`DROP INDEX contacts_dnc_sms_idx`);
    await q.query(`ALTER TABLE contacts DROP COLUMN dnc_sms_comment, DROP COLUMN dnc_sms_since, DROP COLUMN dnc_sms_reason`);
  }
}
