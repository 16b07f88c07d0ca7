import type { Request } from 'express';
import type { Plan } from '../config/config.js';

/** Who is calling: resolved from the bearer token once per request by the authentication guard. */
export interface Principal {
  userId: number;
  userName: string;
  plan: Plan;
  team: string | null;
  /** The API token behind the request (for an OAuth access token: its parent API token; 0 for a console session). */
  apiTokenId: number;
  /** For an OAuth access token: its own id (its revocation and expiry end the jobs it started, as its parent's do). */
  accessTokenId?: number;
  permissions: ReadonlySet<string>;
  /** `session`: a signed-in user of the account console (/account pages only, never /api). */
  kind: 'api_token' | 'access_token' | 'session';
  /** When the presented credential stops being valid (null = never). */
  expiresAt: number | null;
}

export interface AppRequest extends Request {
  id: string;
  principal?: Principal | null;
  /** Why authentication failed, when a credential was presented but refused. */
  authError?: string;
  /** Which credential the guard chain verified: a token (then `principal` is set) or a machine credential. */
  credential?: 'token' | 'metrics-token' | 'sms-signature' | 'signed-link';
  startedAt?: bigint;
}
