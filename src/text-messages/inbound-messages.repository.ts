import { Injectable } from '@nestjs/common';
import type { Tx } from '../database/transactions.js';

export type InboundAction = 'opt_out' | 'opt_in' | 'none';

export interface InboundValues {
  from: string;
  to: string | null;
  body: string;
  providerMessageId: string | null;
  receivedAt: Date;
  action: InboundAction;
}

/** Every query of the `inbound_text_messages` table (the replies the SMS gateway forwards). */
@Injectable()
export class InboundMessagesRepository {
  /** Records the message; null when the gateway already sent one with this message id (a retried callback). */
  async insert(v: InboundValues, tx: Tx): Promise<number | null> {
    const rows: { id: number }[] = await tx.query(
      `INSERT INTO inbound_text_messages (from_number, to_number, body, provider_message_id, received_at, action)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (provider_message_id) WHERE provider_message_id IS NOT NULL DO NOTHING
       RETURNING id`,
      [v.from, v.to, v.body, v.providerMessageId, v.receivedAt, v.action],
    );
    return rows[0]?.id ?? null;
  }

  async setContactsUpdated(id: number, n: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE inbound_text_messages SET contacts_updated = $2 WHERE id = $1`, [id, n]);
  }
}
