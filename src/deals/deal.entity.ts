import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import type { DealStatus } from './deal.rules.js';

@Entity('deals')
export class Deal extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  title: string;

  /** numeric(14,2): read as a string by the driver, returned to clients as a number. */
  @Column({ type: 'numeric', precision: 14, scale: 2 })
  value: string | number;

  @Column({ name: 'contact_id', type: 'int' })
  contactId: number;

  /** A calendar date, read and written as YYYY-MM-DD. */
  @Column({ name: 'expected_close_date', type: 'date', nullable: true })
  expectedCloseDate: string | null;

  @Column({ type: 'text', nullable: true })
  stage: string | null;

  @Column({ type: 'int', nullable: true })
  probability: number | null;

  @Column({ type: 'text', default: 'open' })
  status: DealStatus;

  @Column({ type: 'text', nullable: true })
  product: string | null;

  @Column({ type: 'int', default: 1 })
  quantity: number;

  @Column({ name: 'closed_at', type: 'timestamptz', nullable: true })
  closedAt: Date | null;

  @Column({ name: 'owner_id', type: 'int', nullable: true })
  ownerId: number | null;
}
