import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
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
