import { Column, Entity, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';
import type { EnrollmentStatus, Settings, Step, Trigger, WorkflowStatus } from './workflow-definition.js';

@Entity('workflows')
export class Workflow extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text', default: 'draft' })
  status: WorkflowStatus;

  /** The current version: new enrollments enter it. */
  @Column({ type: 'int', default: 1 })
  version: number;

  @Column({ type: 'jsonb' })
  trigger: Trigger;

  @Column({ type: 'jsonb' })
  steps: Step[];

  @Column({ type: 'jsonb' })
  settings: Settings;

  /** A schedule trigger's next tick (null for other triggers, or while not active). */
  @Column({ name: 'schedule_next_at', type: 'timestamptz', nullable: true })
  scheduleNextAt: Date | null;
}

/** One saved version of a workflow's definition: enrollments run the version they entered (or were migrated to). */
@Entity('workflow_versions')
export class WorkflowVersion {
  @PrimaryColumn({ name: 'workflow_id', type: 'int' })
  workflowId: number;

  @PrimaryColumn({ type: 'int' })
  version: number;

  @Column({ type: 'jsonb' })
  trigger: Trigger;

  @Column({ type: 'jsonb' })
  steps: Step[];

  @Column({ type: 'jsonb' })
  settings: Settings;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}

/** A contact's way through a workflow version. */
@Entity('workflow_enrollments')
export class WorkflowEnrollment {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'workflow_id', type: 'int' })
  workflowId: number;

  @Column({ type: 'int' })
  version: number;

  @Column({ name: 'contact_id', type: 'int' })
  contactId: number;

  @Column({ type: 'text' })
  status: EnrollmentStatus;

  @Column({ name: 'step_key', type: 'text', nullable: true })
  stepKey: string | null;

  @Column({ name: 'next_at', type: 'timestamptz', nullable: true })
  nextAt: Date | null;

  @Column({ name: 'entered_at', type: 'timestamptz' })
  enteredAt: Date;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt: Date | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  @Column({ name: 'step_seq', type: 'int' })
  stepSeq: number;

  @Column({ type: 'int' })
  attempts: number;

  /** The event that woke the enrollment waiting at an untilEvent step (null while it waits or after a timeout). */
  @Column({ name: 'woken_by', type: 'jsonb', nullable: true })
  wokenBy: Record<string, unknown> | null;

  /** When the enrollment began waiting (the database's time), null when it does not wait. */
  @Column({ name: 'waiting_since', type: 'timestamptz', nullable: true })
  waitingSince: Date | null;
}

registerConstraints({
  workflows_status_check: { kind: 'check', field: 'status', message: 'must be draft, active, paused or archived' },
  workflow_enrollments_contact_id_fkey: { kind: 'reference', field: 'contactIds', target: 'contact' },
});
