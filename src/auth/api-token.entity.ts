import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { registerConstraints } from '../database/constraints.js';

/** An API token: the secret is shown once at creation; only its SHA-256 is stored. */
@Entity('api_tokens')
export class ApiToken {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'user_id', type: 'int' })
  userId: number;

  @Column({ type: 'text' })
  name: string;

  @Column({ name: 'token_hash', type: 'char', length: 64, select: false })
  tokenHash: string;

  /** The first characters of the secret, so a user can tell tokens apart without the secret. */
  @Column({ name: 'token_prefix', type: 'text' })
  tokenPrefix: string;

  @Column({ type: 'text', array: true })
  permissions: string[];

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** The API token that created this one (null: created with the CLI); revoking it revokes this one. */
  @Column({ name: 'parent_token_id', type: 'int', nullable: true, select: false })
  parentTokenId: number | null;
}

registerConstraints({
  api_tokens_user_id_fkey: { kind: 'reference', field: 'userId', target: 'user' },
  api_tokens_parent_token_id_fkey: { kind: 'reference', field: 'parentTokenId', target: 'token' },
  oauth_access_tokens_api_token_id_fkey: { kind: 'reference', field: 'client_id', target: 'token' },
});
