import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';
import type { FilterNode } from '../lists/filter-syntax.js';

/** What a rule reacts to: a change-feed event type, or a tracked event's name. */
export const RULE_SOURCES = ['recordEvent', 'trackedEvent'] as const;
export type RuleSource = (typeof RULE_SOURCES)[number];

@Entity('scoring_rules')
export class ScoringRule extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ name: 'is_published', type: 'boolean', default: true })
  isPublished: boolean;

  @Column({ name: 'on_kind', type: 'text' })
  onKind: RuleSource;

  /** The event type (recordEvent) or the tracked event's name (trackedEvent). */
  @Column({ name: 'on_name', type: 'text' })
  onName: string;

  /** The filter's JSON form (over the contact, or over the tracked event's properties). */
  @Column({ type: 'jsonb', nullable: true })
  filter: FilterNode | null;

  @Column({ type: 'int' })
  delta: number;

  @Column({ type: 'boolean', default: true })
  repeatable: boolean;

  @Column({ name: 'max_per_contact', type: 'int', nullable: true })
  maxPerContact: number | null;

  /** A duration (`1d`), or null. */
  @Column({ type: 'text', nullable: true })
  cooldown: string | null;
}

registerConstraints({
  scoring_rules_delta_check: { kind: 'check', field: 'delta', message: 'must not be 0 and at most 1000000 either way' },
  scoring_rules_max_per_contact_check: { kind: 'check', field: 'maxPerContact', message: 'must be 1 or more' },
  scoring_rules_on_kind_check: { kind: 'check', field: 'on', message: 'must name recordEvent or trackedEvent' },
  point_ledger_contact_id_fkey: { kind: 'reference', field: 'contactId', target: 'contact', status: 404 },
  point_ledger_delta_check: { kind: 'check', field: 'delta', message: 'must not be 0' },
  point_ledger_source_check: { kind: 'check', field: 'source', message: 'must be manual, rule, workflow, decay or import' },
  point_ledger_append_only: { kind: 'check', field: 'pointChange', message: 'the point ledger is append-only' },
});
