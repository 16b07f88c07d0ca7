import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** A short-lived OAuth2 access token issued from an API token (client credentials grant). */
@Entity('oauth_access_tokens')
export class AccessToken {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'api_token_id', type: 'int' })
  apiTokenId: number;

  @Column({ name: 'token_hash', type: 'char', length: 64, select: false })
  tokenHash: string;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
