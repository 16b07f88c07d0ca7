import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';

@Entity('companies')
export class Company extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  /** Normalised (company.rules.ts normalizeDomain); unique. */
  @Column({ type: 'text', nullable: true })
  domain: string | null;

  @Column({ type: 'text', nullable: true })
  phone: string | null;

  @Column({ type: 'text', nullable: true })
  website: string | null;

  @Column({ type: 'text', nullable: true })
  industry: string | null;

  @Column({ type: 'int', nullable: true })
  size: number | null;

  @Column({ type: 'text', nullable: true })
  address1: string | null;

  @Column({ type: 'text', nullable: true })
  address2: string | null;

  @Column({ type: 'text', nullable: true })
  city: string | null;

  @Column({ type: 'text', nullable: true })
  state: string | null;

  @Column({ type: 'text', nullable: true })
  zipcode: string | null;

  @Column({ type: 'text', nullable: true })
  country: string | null;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ name: 'owner_id', type: 'int', nullable: true })
  ownerId: number | null;

  /** Custom field values by alias (the published company fields). */
  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  fields: Record<string, unknown>;
}

registerConstraints({
  companies_domain_uq: { kind: 'unique', field: 'domain', resource: 'company', existing: { table: 'companies', where: 'domain = $1' } },
  companies_owner_id_fkey: { kind: 'reference', field: 'ownerId', target: 'user' },
  companies_size_check: { kind: 'check', field: 'size', message: 'must be 0 or more' },
});
