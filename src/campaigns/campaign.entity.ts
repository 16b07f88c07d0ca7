import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
import { AuditedEntity } from '../common/audit.js';
import type { CampaignStatus } from './campaign.rules.js';

@Entity('campaigns')
export class Campaign extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text', nullable: true })
  type: string | null;

  @Column({ type: 'text', default: 'active' })
  status: CampaignStatus;

  @Column({ name: 'start_date', type: 'timestamptz', nullable: true })
  startDate: Date | null;

  @Column({ name: 'end_date', type: 'timestamptz', nullable: true })
  endDate: Date | null;

  /** The segment whose members the campaign mirrors (null: members are managed by hand). */
  @Column({ name: 'segment_id', type: 'int', nullable: true })
  segmentId: number | null;
}

registerConstraints({
  campaigns_status_check: { kind: 'check', field: 'status', message: 'must be active, inactive or completed' },
  campaigns_segment_id_fkey: { kind: 'reference', field: 'segmentId', target: 'segment' },
});
