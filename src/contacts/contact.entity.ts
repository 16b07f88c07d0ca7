import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';

@Entity('contacts')
export class Contact extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  /** Empty (null) only for a contact created from a tracking client's userId alone (src/tracking/). */
  @Column({ type: 'text', nullable: true })
  email: string | null;

  /** The id a tracking client knows the contact by (Segment's userId); unique when set. */
  @Column({ name: 'external_id', type: 'text', nullable: true })
  externalId: string | null;

  @Column({ type: 'text', nullable: true })
  phone: string | null;

  @Column({ type: 'text', nullable: true })
  company: string | null;

  @Column({ type: 'text', nullable: true })
  title: string | null;

  @Column({ name: 'owner_id', type: 'int', nullable: true })
  ownerId: number | null;

  /** The contact's primary company (companies.id); set to null when the company is deleted. */
  @Column({ name: 'company_id', type: 'int', nullable: true })
  companyId: number | null;

  /** Custom field values by field alias. */
  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  fields: Record<string, unknown>;

  /** Lead score: the sum of the contact's point ledger, changed only by the scoring feature (never by a contact write). */
  @Column({ type: 'int', default: 0 })
  points: number;

  /** Do-not-contact on the sms channel: why (null when the contact may be texted). */
  @Column({ name: 'dnc_sms_reason', type: 'text', nullable: true })
  dncSmsReason: DncReason | null;

  @Column({ name: 'dnc_sms_since', type: 'timestamptz', nullable: true })
  dncSmsSince: Date | null;

  @Column({ name: 'dnc_sms_comment', type: 'text', nullable: true })
  dncSmsComment: string | null;
}

/** Why a contact must not be texted. */
export const DNC_REASONS = ['unsubscribed', 'bounced', 'manual'] as const;
export type DncReason = (typeof DNC_REASONS)[number];

registerConstraints({
  contacts_email_lower_uq: { kind: 'unique', field: 'email', resource: 'contact', existing: { table: 'contacts', where: 'lower(email) = $1' } },
  contacts_external_id_uq: {
    kind: 'unique',
    field: 'externalId',
    resource: 'contact',
    existing: { table: 'contacts', where: 'external_id = $1' },
  },
  contacts_owner_id_fkey: { kind: 'reference', field: 'ownerId', target: 'user' },
  contacts_company_id_fkey: { kind: 'reference', field: 'companyId', target: 'company' },
  contacts_dnc_sms_reason_check: { kind: 'check', field: 'reason', message: 'must be unsubscribed, bounced or manual' },
  contacts_dnc_sms_comment_check: { kind: 'check', field: 'comment', message: 'must be at most 1000 characters' },
});
