import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';

export const SEGMENT_TYPES = ['dynamic', 'static'] as const;
export type SegmentType = (typeof SEGMENT_TYPES)[number];
export const BUILD_STATUSES = ['building', 'ready', 'failed'] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

@Entity('segments')
export class Segment extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text' })
  type: SegmentType;

  /** Dynamic segments: the filter over contacts, as its JSON tree (FilterNode); null for static ones. */
  @Column({ type: 'jsonb', nullable: true })
  filter: Record<string, unknown> | null;

  /** Grows with every change of the filter (or a requested rebuild). */
  @Column({ name: 'filter_version', type: 'int', default: 1 })
  filterVersion: number;

  @Column({ name: 'build_status', type: 'text', default: 'ready' })
  buildStatus: BuildStatus;

  /** The filter_version the members were last built for (null: never built). */
  @Column({ name: 'built_version', type: 'int', nullable: true })
  builtVersion: number | null;

  @Column({ name: 'build_started_at', type: 'timestamptz', nullable: true })
  buildStartedAt: Date | null;

  @Column({ name: 'built_at', type: 'timestamptz', nullable: true })
  builtAt: Date | null;

  @Column({ name: 'build_error', type: 'text', nullable: true })
  buildError: string | null;
}

registerConstraints({
  segments_type_check: { kind: 'check', field: 'type', message: 'must be dynamic or static' },
  segments_filter_check: { kind: 'check', field: 'filter', message: 'is required for a dynamic segment and not allowed for a static one' },
  // Membership rows name their segment and contact; the batch checks both before writing.
  segment_members_segment_id_fkey: { kind: 'reference', field: 'segmentId', target: 'segment', status: 404 },
  segment_members_contact_id_fkey: { kind: 'reference', field: 'contactId', target: 'contact', status: 404 },
});
