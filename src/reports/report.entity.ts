import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import type { ReportFilters, ReportSchedule, ReportType } from './report-definition.js';

@Entity('reports')
export class Report extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text' })
  type: ReportType;

  @Column({ name: 'is_published', type: 'boolean', default: true })
  isPublished: boolean;

  @Column({ type: 'text', nullable: true })
  schedule: ReportSchedule | null;

  @Column({ type: 'jsonb', default: () => `'{}'::jsonb` })
  filters: ReportFilters;

  @Column({ type: 'text', array: true })
  columns: string[];

  @Column({ name: 'last_run', type: 'timestamptz', nullable: true })
  lastRun: Date | null;
}
