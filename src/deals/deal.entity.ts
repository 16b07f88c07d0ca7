import { Column, Entity, PrimaryGeneratedColumn, VirtualColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
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

  /** The pipeline the deal is in. */
  @Column({ name: 'pipeline_id', type: 'int' })
  pipelineId: number;

  /** The stage the deal is in (a current stage of its pipeline). */
  @Column({ name: 'stage_id', type: 'int' })
  stageId: number;

  /** The stage's name, kept with the deal (the search index and the free-text `stage` read it). */
  @Column({ type: 'text', nullable: true })
  stage: string | null;

  /** When the deal entered its stage (the injected clock's time). */
  @Column({ name: 'entered_stage_at', type: 'timestamptz' })
  enteredStageAt: Date;

  /** The deal's own win probability; null: the stage's. */
  @Column({ type: 'int', nullable: true })
  probability: number | null;

  /** The stage's probability, read with the deal (the record's probability when the deal has none of its own). */
  @VirtualColumn({ type: 'int', query: (alias) => `SELECT ps.probability FROM pipeline_stages ps WHERE ps.id = ${alias}.stage_id` })
  stageProbability: number;

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

  /** The company the deal is with; set to null when the company is deleted. */
  @Column({ name: 'company_id', type: 'int', nullable: true })
  companyId: number | null;
}

registerConstraints({
  deals_contact_id_fkey: { kind: 'reference', field: 'contact_id', target: 'contact' },
  deals_owner_id_fkey: { kind: 'reference', field: 'owner_id', target: 'user' },
  deals_company_id_fkey: { kind: 'reference', field: 'company_id', target: 'company' },
  deals_pipeline_id_fkey: { kind: 'reference', field: 'pipeline_id', target: 'pipeline' },
  deals_stage_id_fkey: { kind: 'reference', field: 'stage_id', target: 'stage' },
  deals_value_check: { kind: 'check', field: 'value', message: 'must be 0 or more' },
  deals_probability_check: { kind: 'check', field: 'probability', message: 'must be from 0 to 100' },
  deals_status_check: { kind: 'check', field: 'status', message: 'must be open, won or lost' },
  deals_quantity_check: { kind: 'check', field: 'quantity', message: 'must be 0 or more' },
});
