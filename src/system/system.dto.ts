import { ApiProperty } from '@nestjs/swagger';
import { CREDENTIALS } from '../common/route-access.js';
/** GET /api/version. */
export class VersionDto {
  /** The service's release (package version). */
  version: string;
  /** The API contract's version; paths carry no version segment except the OAuth endpoints (/api/oauth/v2). */
  apiVersion: string;
  /** The commit the build came from (GIT_COMMIT), or "unknown". */
  commit: string;
}

export class EndpointDto {
  method: string;
  /** Express-style path (`:id` marks a parameter). */
  path: string;
  /** The permission a token needs, `*`, `authenticated` (any valid token), `public`, or `signature` (a signed callback). */
  permission: string;
  /** Present when the route needs further permissions besides `permission` (it answers records of another resource, e.g. contacts). */
  @ApiProperty({ type: [String], required: false })
  alsoRequires?: string[];
  /**
   * Present when the route takes a credential other than `Authorization: Bearer <token>` (or none, on
   * public routes): `token-or-basic` (also a token as the HTTP Basic password), `write-key` (also a token as the
   * HTTP Basic user name with an empty password), `metrics-token`
   * (also Bearer METRICS_TOKEN), `sms-signature` (X-Signature: a timestamped HMAC of the body with SMS_WEBHOOK_SECRET).
   */
  @ApiProperty({ enum: CREDENTIALS.filter((c) => c !== 'token' && c !== 'none'), required: false })
  credential?: string;
}

/** GET /api/endpoints: every route the server has, generated from its live route table. */
export class EndpointsDto {
  endpoints: EndpointDto[];
}

export class DependencyStatusDto {
  /** up, down or disabled. */
  status: string;
  latencyMs?: number;
  error?: string;
}

export class QueueStatusDto {
  /** bullmq (Redis) or in-process. */
  mode: string;
  status: string;
}

/** GET /health. */
export class HealthDto {
  /** ok, degraded (Redis down), down (database down) or shutting_down. */
  status: string;
  database: DependencyStatusDto;
  redis: DependencyStatusDto;
  queue: QueueStatusDto;
  embeddedDatabase: boolean;
  role: string;
}
