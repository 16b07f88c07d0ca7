import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
import { AuditedEntity } from '../common/audit.js';
import type { ActivityType } from './activity.rules.js';

@Entity('activities')
export class Activity extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  type: ActivityType;

  @Column({ type: 'text' })
  subject: string;

  @Column({ name: 'contact_id', type: 'int' })
  contactId: number;

  @Column({ name: 'due_date', type: 'timestamptz', nullable: true })
  dueDate: Date | null;

  @Column({ type: 'text', nullable: true })
  notes: string | null;

  @Column({ type: 'text', nullable: true })
  outcome: string | null;
}

registerConstraints({
  activities_contact_id_fkey: { kind: 'reference', field: 'contact_id', target: 'contact' },
  activities_type_check: { kind: 'check', field: 'type', message: 'must be call, email or meeting' },
});
