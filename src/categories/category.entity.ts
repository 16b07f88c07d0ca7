import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';
import { AuditedEntity } from '../common/audit.js';

@Entity('categories')
export class Category extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  title: string;

  @Column({ type: 'text' })
  alias: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  /** `#rrggbb`, lower case. */
  @Column({ type: 'text', nullable: true })
  color: string | null;

  @Column({ type: 'text' })
  bundle: string;
}

registerConstraints({
  categories_bundle_alias_uq: {
    kind: 'unique',
    field: 'alias',
    resource: 'category',
    existing: { table: 'categories', where: 'bundle = $1 AND alias = $2' },
  },
});
