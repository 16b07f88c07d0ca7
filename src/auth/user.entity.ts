import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { Plan } from '../config/config.js';
import { registerConstraints } from '../database/constraints.js';

@Entity('users')
export class User {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  email: string;

  @Column({ type: 'text', default: 'basic' })
  plan: Plan;

  @Column({ type: 'text', nullable: true })
  team: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'modified_at', type: 'timestamptz', nullable: true })
  modifiedAt: Date | null;
}

registerConstraints({
  users_email_lower_uq: { kind: 'unique', field: 'email', resource: 'user', existing: { table: 'users', where: 'lower(email) = lower($1)' } },
});
