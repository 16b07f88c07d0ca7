import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../common/constraints.js';

@Entity('contacts')
export class Contact extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  email: string;

  @Column({ type: 'text', nullable: true })
  phone: string | null;

  @Column({ type: 'text', nullable: true })
  company: string | null;

  @Column({ type: 'text', nullable: true })
  title: string | null;

  @Column({ name: 'owner_id', type: 'int', nullable: true })
  ownerId: number | null;

  /** Custom field values by field alias. */
  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  fields: Record<string, unknown>;
}

registerConstraints({
  contacts_email_lower_uq: { kind: 'unique', field: 'email', resource: 'contact', existing: { table: 'contacts', where: 'lower(email) = $1' } },
  contacts_owner_id_fkey: { kind: 'reference', field: 'ownerId', target: 'user' },
});
