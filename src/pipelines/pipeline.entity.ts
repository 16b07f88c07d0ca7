import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
import { AuditedEntity } from '../common/audit.js';
import type { StageType } from './pipeline.rules.js';

@Entity('pipelines')
export class Pipeline extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ name: 'is_default', type: 'boolean', default: false })
  isDefault: boolean;

  /** true: writing a stage name that is not one of the pipeline's to a deal is a 400; false: the name is added as an open stage. */
  @Column({ name: 'strict_stages', type: 'boolean', default: true })
  strictStages: boolean;
}

@Entity('pipeline_stages')
export class PipelineStage {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'pipeline_id', type: 'int' })
  pipelineId: number;

  @Column({ type: 'text' })
  name: string;

  /** Sort key among the pipeline's stages (the record's `order` is the stage's index in that order). */
  @Column({ type: 'int' })
  position: number;

  @Column({ type: 'int' })
  probability: number;

  @Column({ type: 'text' })
  type: StageType;

  /** Set when the stage was removed: the row stays for the ledger's history. */
  @Column({ name: 'removed_at', type: 'timestamptz', nullable: true })
  removedAt: Date | null;
}

registerConstraints({
  pipelines_default_key: { kind: 'unique', field: 'isDefault', resource: 'pipeline', existing: { table: 'pipelines', where: 'is_default' } },
  pipeline_stages_name_key: { kind: 'unique', field: 'stages', resource: 'stage' },
  pipeline_stages_probability_check: { kind: 'check', field: 'probability', message: 'must be from 0 to 100' },
  pipeline_stages_type_check: { kind: 'check', field: 'type', message: 'must be open, won or lost' },
  pipeline_stages_pipeline_id_fkey: { kind: 'reference', field: 'pipelineId', target: 'pipeline', status: 404 },
});
