import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';
import type { FailureCode, TextMessageStatus } from './text-message-state.js';

@Entity('text_messages')
export class TextMessage extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  content: string;

  @Column({ type: 'text' })
  recipient: string;

  @Column({ type: 'text', default: 'draft' })
  status: TextMessageStatus;

  @Column({ name: 'campaign_id', type: 'int', nullable: true })
  campaignId: number | null;

  /** The broadcast that created the message (null for a single message, or after the broadcast was deleted). */
  @Column({ name: 'broadcast_id', type: 'int', nullable: true })
  broadcastId: number | null;

  /** The contact a broadcast message was created for. */
  @Column({ name: 'contact_id', type: 'int', nullable: true })
  contactId: number | null;

  @Column({ name: 'scheduled_for', type: 'timestamptz', nullable: true })
  scheduledFor: Date | null;

  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true })
  sentAt: Date | null;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt: Date | null;

  @Column({ name: 'failed_at', type: 'timestamptz', nullable: true })
  failedAt: Date | null;

  @Column({ name: 'canceled_at', type: 'timestamptz', nullable: true })
  canceledAt: Date | null;

  @Column({ name: 'failure_code', type: 'text', nullable: true })
  failureCode: FailureCode | null;

  @Column({ name: 'failure_reason', type: 'text', nullable: true })
  failureReason: string | null;

  @Column({ name: 'queued_at', type: 'timestamptz', nullable: true })
  queuedAt: Date | null;

  @Column({ name: 'send_count', type: 'int', default: 0 })
  sendCount: number;

  /**
   * Handed over again with the same Idempotency-Key when its claim was left by a dead worker (a
   * workflow step's message, exactly once as broadcasts are); false: at most once (`outcome_unknown`).
   */
  @Column({ name: 'idempotent_handover', type: 'boolean', default: false })
  idempotentHandover: boolean;

  @Column({ name: 'claim_token', type: 'uuid', nullable: true })
  claimToken: string | null;

  @Column({ name: 'claimed_at', type: 'timestamptz', nullable: true })
  claimedAt: Date | null;

  @Column({ type: 'text', nullable: true })
  provider: string | null;

  @Column({ name: 'provider_message_id', type: 'text', nullable: true })
  providerMessageId: string | null;
}

// Constraints of the text_messages table, translated by the global exception filter (common/constraints.ts).
registerConstraints({
  text_messages_campaign_id_fkey: { kind: 'reference', field: 'campaignId', target: 'campaign' },
  text_messages_content_check: { kind: 'check', field: 'content', message: 'must be 1 to 1600 characters' },
  text_messages_status_check: { kind: 'check', field: 'status', message: 'must be draft, queued, sent, delivered, failed or canceled' },
  text_messages_failure_code_check: {
    kind: 'check',
    field: 'failureCode',
    message: 'must be provider_rejected, retries_exhausted, outcome_unknown, delivery_failed, opted_out or canceled',
  },
});
