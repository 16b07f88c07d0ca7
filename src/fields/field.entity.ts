import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { AuditedEntity } from '../common/audit.js';
import { registerConstraints } from '../database/constraints.js';
import type { FieldObject, FieldProperties, FieldType } from './field-rules.js';

/** A custom field of contacts or companies. created_at/modified_at are dateAdded/dateModified in the API. */
@Entity('fields')
export class Field extends AuditedEntity {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  object: FieldObject;

  @Column({ type: 'text' })
  label: string;

  @Column({ type: 'text' })
  alias: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ type: 'text' })
  type: FieldType;

  @Column({ name: 'field_group', type: 'text', nullable: true })
  group: string | null;

  @Column({ name: 'field_order', type: 'int', default: 0 })
  order: number;

  @Column({ name: 'default_value', type: 'text', nullable: true })
  defaultValue: string | null;

  @Column({ name: 'is_required', type: 'boolean', default: false })
  isRequired: boolean;

  @Column({ name: 'is_publicly_updatable', type: 'boolean', default: false })
  isPubliclyUpdatable: boolean;

  @Column({ name: 'is_unique_identifier', type: 'boolean', default: false })
  isUniqueIdentifier: boolean;

  @Column({ type: 'jsonb', default: () => `'[]'::jsonb` })
  properties: FieldProperties;

  @Column({ name: 'is_published', type: 'boolean', default: true })
  isPublished: boolean;

  @Column({ name: 'publish_up', type: 'timestamptz', nullable: true })
  publishUp: Date | null;

  @Column({ name: 'publish_down', type: 'timestamptz', nullable: true })
  publishDown: Date | null;
}

registerConstraints({
  fields_object_alias_uq: { kind: 'unique', field: 'alias', resource: 'field', existing: { table: 'fields', where: 'object = $1 AND alias = $2' } },
  fields_object_check: { kind: 'check', field: 'object', message: 'must be contact or company' },
  fields_alias_check: { kind: 'check', field: 'alias', message: 'must start with a lower-case letter and contain only a-z, 0-9 and _' },
});
