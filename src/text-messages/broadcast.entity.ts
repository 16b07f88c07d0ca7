import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';

export const BROADCAST_STATUSES = ['draft', 'scheduled', 'sending', 'completed', 'canceled'] as const;
export type BroadcastStatus = (typeof BROADCAST_STATUSES)[number];

/** Who a broadcast goes to: a campaign's members, a segment's members, or listed contacts (resolved at send time). */
export type Audience = { campaignId: number } | { segmentId: number } | { contactIds: number[] };

@Entity('broadcasts')
export class Broadcast extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text', nullable: true })
  name: string | null;

  @Column({ type: 'text' })
  content: string;

  @Column({ type: 'jsonb' })
  audience: Audience;

  @Column({ type: 'text', default: 'draft' })
  status: BroadcastStatus;

  @Column({ name: 'scheduled_for', type: 'timestamptz', nullable: true })
  scheduledFor: Date | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt: Date | null;

  @Column({ name: 'canceled_at', type: 'timestamptz', nullable: true })
  canceledAt: Date | null;

  @Column({ type: 'int', nullable: true })
  recipients: number | null;

  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  skipped: Record<string, number>;

  /**
   * The token the sending acts for: the one that sent it, or that scheduled it. Its sending stops
   * (the broadcast is canceled) once that token is revoked, deleted or expired. Not published.
   */
  @Column({ name: 'api_token_id', type: 'int', nullable: true })
  apiTokenId: number | null;

  @Column({ name: 'access_token_id', type: 'int', nullable: true })
  accessTokenId: number | null;
}

registerConstraints({
  broadcasts_content_check: { kind: 'check', field: 'content', message: 'must be 1 to 1600 characters' },
  broadcasts_name_check: { kind: 'check', field: 'name', message: 'must be at most 255 characters' },
  broadcasts_status_check: { kind: 'check', field: 'status', message: 'must be draft, scheduled, sending, completed or canceled' },
});
