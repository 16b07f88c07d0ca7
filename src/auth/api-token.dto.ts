import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsIn, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { PERMISSIONS } from './permissions.js';
import { Rule } from '../common/documented-rules.js';

export class CreateAccountTokenDto {
  /** A name that tells the token apart, e.g. the application that uses it. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  name: string;

  /** Permissions of the token; at most those of the calling token (403 otherwise). Duplicates are ignored. */
  @ApiProperty({ enum: PERMISSIONS, isArray: true })
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(100)
  @IsIn(PERMISSIONS as readonly string[] as string[], { each: true, message: `each value in permissions must be one of: ${PERMISSIONS.join(', ')}` })
  permissions: string[];

  /** When the token stops working: an ISO 8601 date-time with offset, in the future. Omitted or null: never. */
  @IsOptional()
  @IsIsoDateTime()
  @Rule('must be in the future')
  expiresAt?: string | null;
}

/** An API token as its owner sees it (never the secret). */
export class AccountTokenRecordDto {
  id: number;
  name: string;
  /** The first characters of the secret, to tell tokens apart. */
  prefix: string;
  @ApiProperty({ enum: PERMISSIONS, isArray: true })
  permissions: string[];
  expiresAt: string | null;
  /** Last request made with the token or an access token issued from it (recorded at most once a minute). */
  lastUsedAt: string | null;
  createdAt: string;
  revokedAt: string | null;
  @ApiProperty({ enum: ['active', 'expired', 'revoked'] })
  state: 'active' | 'expired' | 'revoked';
}

/** A token just created: the record plus its secret, shown this once and never again. */
export class CreatedAccountTokenRecordDto extends AccountTokenRecordDto {
  /**
   * The secret (`sf_...`): send it as `Authorization: Bearer <secret>`, or use it as an OAuth2 client_secret with the id as client_id.
   * Absent in a replay of this answer (Idempotency-Key), which carries a `notice` instead: the secret is never kept.
   */
  secret?: string;
}
