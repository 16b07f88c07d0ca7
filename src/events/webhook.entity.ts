import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';

/** A webhook subscription (table `webhooks`). */
@Entity('webhooks')
export class Webhook extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  url: string;

  /** Event types, or ['*'] for every type. */
  @Column({ type: 'text', array: true })
  events: string[];

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ name: 'is_active', type: 'boolean', default: true })
  isActive: boolean;

  /** The signing secret, stored as given (it must sign, so it cannot be hashed); never answered after creation. */
  @Column({ type: 'text', select: true })
  secret: string;

  /** The secret before the last rotation; it keeps signing beside the new one until previousSecretExpiresAt. */
  @Column({ name: 'previous_secret', type: 'text', nullable: true })
  previousSecret: string | null;

  @Column({ name: 'previous_secret_expires_at', type: 'timestamptz', nullable: true })
  previousSecretExpiresAt: Date | null;

  /** Why the service disabled the webhook (410 Gone, 72 h without a success); null when a user did or it is active. */
  @Column({ name: 'disabled_reason', type: 'text', nullable: true })
  disabledReason: string | null;

  @Column({ name: 'last_success_at', type: 'timestamptz', nullable: true })
  lastSuccessAt: Date | null;

  /** First failed attempt since the last success; null while deliveries succeed. */
  @Column({ name: 'failing_since', type: 'timestamptz', nullable: true })
  failingSince: Date | null;
}
