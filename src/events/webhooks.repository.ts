import { Injectable } from '@nestjs/common';
import { returning, Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList } from '../lists/list-spec.js';
import { RecordStore } from '../lists/record-store.js';
import { Webhook } from './webhook.entity.js';

export const WEBHOOK_LIST_SPEC = defineList({
  name: 'webhooks',
  sortable: ['id', 'url', 'createdAt', 'modifiedAt'],
  searchExpression: "lower(w.url || ' ' || coalesce(w.description, ''))",
  filters: { isActive: { type: 'boolean', column: 'w.is_active' } },
  fields: {
    id: { type: 'id', sql: 'w.id' },
    url: { type: 'string', sql: 'w.url' },
    description: { type: 'string', sql: 'w.description' },
    isActive: { type: 'boolean', sql: 'w.is_active' },
    lastSuccessAt: { type: 'datetime', sql: 'w.last_success_at' },
    failingSince: { type: 'datetime', sql: 'w.failing_since' },
    ...auditFields('w'),
  },
  properties: [
    'id',
    'url',
    'events',
    'description',
    'isActive',
    'disabledReason',
    'lastSuccessAt',
    'failingSince',
    'previousSecretExpiresAt',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

/** Active webhooks as the dispatcher matches them against events. */
export interface WebhookSubscription {
  id: number;
  events: string[];
  /** When the webhook was created (ms since the epoch): it receives only events that occurred since. */
  createdMs: number;
}

/** Every query of the webhooks table (the shared CRUD of RecordStore, and its own) and of the dispatcher's cursor. */
@Injectable()
export class WebhooksRepository extends RecordStore<Webhook> {
  constructor(transactions: Transactions) {
    super(transactions, Webhook, 'w', WEBHOOK_LIST_SPEC);
  }

  /**
   * Locks the row for a change that also writes its deliveries, before any delivery is locked: the
   * one lock order is the webhook row, then its deliveries in id order (recording attempts, deleting
   * the webhook, re-queueing its dead deliveries). FOR NO KEY UPDATE: the dispatcher's inserts
   * (which take FOR KEY SHARE) go on. False when the webhook is gone.
   */
  async lockForDeliveries(id: number, tx: Tx): Promise<boolean> {
    const rows: unknown[] = await tx.query(`SELECT id FROM webhooks WHERE id = $1 FOR NO KEY UPDATE`, [id]);
    return rows.length > 0;
  }

  /**
   * Locks the row for its deletion (FOR UPDATE, which also holds off new deliveries' foreign-key
   * checks); the caller then deletes its deliveries and the row. False when it is gone.
   */
  async lockForDelete(id: number, tx: Tx): Promise<boolean> {
    const rows: unknown[] = await tx.query(`SELECT id FROM webhooks WHERE id = $1 FOR UPDATE`, [id]);
    return rows.length > 0;
  }

  /** Deletes the row (its deliveries first: WebhooksService.remove); null when another caller deleted it first. */
  async remove(id: number, tx?: Tx): Promise<Webhook | null> {
    const rows: { id: number }[] = await returning(this.transactions.handle(tx), `DELETE FROM webhooks WHERE id = $1 RETURNING id`, [id]);
    return rows.length ? ({ id } as Webhook) : null;
  }

  activeSubscriptions(tx?: Tx): Promise<WebhookSubscription[]> {
    return this.transactions
      .handle(tx)
      .query(`SELECT id, events, floor(extract(epoch FROM created_at) * 1000)::float8 AS "createdMs" FROM webhooks WHERE is_active ORDER BY id`);
  }

  /** A success: clears the failure clock. */
  async markSuccess(id: number, tx?: Tx): Promise<void> {
    await this.transactions.handle(tx).query(`UPDATE webhooks SET last_success_at = now(), failing_since = NULL WHERE id = $1`, [id]);
  }

  /**
   * A failed attempt: starts the failure clock if it is not running; answers the webhook when it has
   * now been failing for `disableAfterMs` without a success and is still active (the caller disables it).
   */
  async markFailure(id: number, disableAfterMs: number, tx?: Tx): Promise<{ failingSince: Date; due: boolean; createdBy: number | null; url: string } | null> {
    const rows: { failing_since: Date; due: boolean; created_by: number | null; url: string }[] = await returning(
      this.transactions.handle(tx),
      `UPDATE webhooks SET failing_since = coalesce(failing_since, now()) WHERE id = $1
       RETURNING failing_since, is_active AND failing_since <= now() - $2 * interval '1 millisecond' AS due, created_by, url`,
      [id, disableAfterMs],
    );
    return rows.length ? { failingSince: rows[0].failing_since, due: rows[0].due, createdBy: rows[0].created_by, url: rows[0].url } : null;
  }

  /** Disables an active webhook for a reason; false when it was not active (another run got there first). */
  async disable(id: number, reason: string, tx?: Tx): Promise<boolean> {
    const rows = await returning(
      this.transactions.handle(tx),
      `UPDATE webhooks SET is_active = false, disabled_reason = $2, modified_at = now() WHERE id = $1 AND is_active RETURNING id`,
      [id, reason],
    );
    return rows.length > 0;
  }

  /** The dispatcher's cursor, locked until `tx` ends; null when another dispatcher holds it. */
  async lockCursor(tx: Tx): Promise<number | null> {
    const rows: { sequence: string }[] = await tx.query(`SELECT sequence FROM webhook_dispatch_cursor WHERE id = 1 FOR UPDATE SKIP LOCKED`);
    return rows.length ? Number(rows[0].sequence) : null;
  }

  async advanceCursor(sequence: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE webhook_dispatch_cursor SET sequence = $1 WHERE id = 1`, [sequence]);
  }
}
