import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';
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

// Constraints of the reports tables, translated by the global exception filter (common/constraints.ts).
// The DTO refuses these values first; the checks are the last line.
registerConstraints({
  reports_type_check: { kind: 'check', field: 'type', message: 'must be sales or marketing' },
  reports_schedule_check: { kind: 'check', field: 'schedule', message: 'must be daily, weekly or monthly' },
  report_results_report_id_fkey: { kind: 'reference', field: 'id', target: 'report', status: 404 },
});
