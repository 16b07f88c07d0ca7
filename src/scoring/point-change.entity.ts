import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { PointSource } from './scoring.rules.js';

/** A row of the point ledger: one change of one contact's points (append-only; see the scoring migration). */
@Entity('point_ledger')
export class PointChange {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'contact_id', type: 'int' })
  contactId: number;

  @Column({ type: 'int' })
  delta: number;

  @Column({ type: 'text' })
  reason: string;

  @Column({ type: 'text' })
  source: PointSource;

  /** The rule that gave the points; kept when the rule is deleted (no foreign key). */
  @Column({ name: 'rule_id', type: 'int', nullable: true })
  ruleId: number | null;

  /** The change-feed event or tracked event the points answer; unique with ruleId. */
  @Column({ name: 'source_event_id', type: 'text', nullable: true })
  sourceEventId: string | null;

  /** The decay period (`<settings version>:<period index>`); unique with contactId. */
  @Column({ name: 'decay_period', type: 'text', nullable: true })
  decayPeriod: string | null;

  @Column({ type: 'jsonb', nullable: true })
  details: Record<string, unknown> | null;

  /** Business time of the change (the injected clock). */
  @Column({ type: 'timestamptz' })
  at: Date;

  @Column({ name: 'by_user_id', type: 'int', nullable: true })
  byUserId: number | null;

  @Column({ name: 'by_user_name', type: 'text', nullable: true })
  byUserName: string | null;
}
