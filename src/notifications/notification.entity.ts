import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';

export const NOTIFICATION_TYPES = ['lead_assigned', 'report_ready', 'sms_failed', 'webhook_disabled', 'import_completed', 'workflow'] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

@Entity('notifications')
export class Notification {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'user_id', type: 'int' })
  userId: number;

  @Column({ type: 'text' })
  type: NotificationType;

  @Column({ type: 'text' })
  message: string;

  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  details: Record<string, unknown>;

  @Column({ name: 'is_read', type: 'boolean', default: false })
  isRead: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'modified_at', type: 'timestamptz', nullable: true })
  modifiedAt: Date | null;
}

registerConstraints({
  notifications_user_id_fkey: { kind: 'reference', field: 'userId', target: 'user' },
});
