import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
import { AuditedEntity } from '../common/audit.js';

@Entity('point_groups')
export class PointGroup extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ name: 'is_published', type: 'boolean', default: true })
  isPublished: boolean;

  @Column({ name: 'minimum_points', type: 'int' })
  minimumPoints: number;

  @Column({ name: 'maximum_points', type: 'int' })
  maximumPoints: number;

  /** `#rrggbb`, lower case. */
  @Column({ type: 'text', nullable: true })
  color: string | null;
}

registerConstraints({
  point_groups_range_ck: { kind: 'check', field: 'maximumPoints', message: 'must not be below minimumPoints' },
  point_groups_minimum_points_check: { kind: 'check', field: 'minimumPoints', message: 'must be 0 or more' },
  point_groups_maximum_points_check: { kind: 'check', field: 'maximumPoints', message: 'must be 0 or more' },
  point_groups_color_check: { kind: 'check', field: 'color', message: 'must be a colour written #rrggbb' },
});
