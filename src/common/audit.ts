import { Column, CreateDateColumn } from 'typeorm';
import type { Principal } from './request.js';
import { iso } from './dates.js';

/**
 * Audit columns shared by most tables (docs/decisions/wire-format.md): who created and last changed a record, by
 * the user behind the token. Entities extend this; services stamp with stampCreated/stampModified.
 */
export abstract class AuditedEntity {
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** Set on creation (the database default, the same instant as created_at) and on every change. */
  @Column({ name: 'modified_at', type: 'timestamptz', nullable: true, default: () => 'now()' })
  modifiedAt: Date | null;

  @Column({ name: 'created_by', type: 'int', nullable: true })
  createdBy: number | null;

  @Column({ name: 'created_by_user', type: 'text', nullable: true })
  createdByUser: string | null;

  @Column({ name: 'modified_by', type: 'int', nullable: true })
  modifiedBy: number | null;

  @Column({ name: 'modified_by_user', type: 'text', nullable: true })
  modifiedByUser: string | null;
}

export function stampCreated<T extends AuditedEntity>(entity: T, who: Principal): T {
  entity.createdBy = who.userId;
  entity.createdByUser = who.userName;
  // Left to the column default (now(), the instant of created_at), which the insert reads back.
  Reflect.deleteProperty(entity, 'modifiedAt');
  entity.modifiedBy = who.userId;
  entity.modifiedByUser = who.userName;
  return entity;
}

export function stampModified<T extends AuditedEntity>(entity: T, who: Principal): T {
  entity.modifiedAt = new Date();
  entity.modifiedBy = who.userId;
  entity.modifiedByUser = who.userName;
  return entity;
}

/** The audit part of a record as the API shows it (createdAt/modifiedAt naming). */
export function auditOut(e: AuditedEntity) {
  return {
    createdAt: iso(e.createdAt),
    modifiedAt: iso(e.modifiedAt),
    createdBy: e.createdBy,
    createdByUser: e.createdByUser,
    modifiedBy: e.modifiedBy,
    modifiedByUser: e.modifiedByUser,
  };
}
