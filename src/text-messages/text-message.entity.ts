import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
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

  @Column({ name: 'scheduled_for', type: 'timestamptz', nullable: true })
  scheduledFor: Date | null;

  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true })
  sentAt: Date | null;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt: Date | null;

  @Column({ name: 'failed_at', type: 'timestamptz', nullable: true })
  failedAt: Date | null;

  @Column({ name: 'failure_code', type: 'text', nullable: true })
  failureCode: FailureCode | null;

  @Column({ name: 'failure_reason', type: 'text', nullable: true })
  failureReason: string | null;

  @Column({ name: 'queued_at', type: 'timestamptz', nullable: true })
  queuedAt: Date | null;

  @Column({ name: 'send_count', type: 'int', default: 0 })
  sendCount: number;

  @Column({ name: 'claim_token', type: 'uuid', nullable: true })
  claimToken: string | null;

  @Column({ name: 'claimed_at', type: 'timestamptz', nullable: true })
  claimedAt: Date | null;

  @Column({ type: 'text', nullable: true })
  provider: string | null;

  @Column({ name: 'provider_message_id', type: 'text', nullable: true })
  providerMessageId: string | null;
}
