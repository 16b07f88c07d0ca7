import { Injectable } from '@nestjs/common';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { defineList } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import type { ApiToken } from './api-token.entity.js';
import { ApiTokenRepository } from './api-token.repository.js';
import { CreateAccountTokenDto } from './api-token.dto.js';
import { canGrant, lackingPermissions } from './permissions.js';
import { TokensService } from './tokens.service.js';

export const ACCOUNT_TOKEN_LIST_SPEC = defineList({
  name: 'account tokens',
  // A token changes only when it is revoked (last use is not a change of the record).
  changedExpression: 'GREATEST(t.created_at, t.revoked_at)',
  fields: {
    id: { type: 'id', sql: 't.id' },
    name: { type: 'string', sql: 't.name' },
    createdAt: { type: 'datetime', sql: 't.created_at' },
    expiresAt: { type: 'datetime', sql: 't.expires_at' },
    lastUsedAt: { type: 'datetime', sql: 't.last_used_at' },
    revokedAt: { type: 'datetime', sql: 't.revoked_at' },
  },
  properties: ['id', 'name', 'prefix', 'permissions', 'expiresAt', 'lastUsedAt', 'createdAt', 'revokedAt', 'state'],
});

export type AccountTokenRecord = ReturnType<typeof toRecord>;

/** The one mapper of an API token to its API record. */
export function toRecord(t: ApiToken, now = Date.now()) {
  return {
    id: t.id,
    name: t.name,
    prefix: t.tokenPrefix,
    permissions: t.permissions,
    expiresAt: iso(t.expiresAt),
    lastUsedAt: iso(t.lastUsedAt),
    createdAt: isoRequired(t.createdAt),
    revokedAt: iso(t.revokedAt),
    state: t.revokedAt ? 'revoked' : t.expiresAt && t.expiresAt.getTime() <= now ? 'expired' : 'active',
  };
}

/**
 * The calling user's own API tokens (docs/decisions/api-tokens-and-oauth.md). Another user's token is a 404, never a 403.
 * A caller never sees or acts on more than it holds: reading or revoking a token holding a
 * permission the caller lacks is a 403, as creating one is, and the list shows only tokens within
 * the caller's permissions.
 */
@Injectable()
export class ApiTokensService {
  constructor(
    private readonly repo: ApiTokenRepository,
    private readonly tokens: TokensService,
  ) {}

  async list(query: Record<string, unknown>, who: Principal) {
    const q = parseListQuery(query, ACCOUNT_TOKEN_LIST_SPEC);
    const within = who.permissions.has('*') ? null : [...who.permissions];
    const page = await this.repo.page(who.userId, q, ACCOUNT_TOKEN_LIST_SPEC, within);
    return listEnvelope(
      q,
      'tokens',
      page,
      page.items.map((t) => toRecord(t)),
    );
  }

  async get(id: number, who: Principal): Promise<AccountTokenRecord> {
    return toRecord(await this.findVisible(id, who));
  }

  /**
   * Creates a token for the calling user. Its permissions may not exceed the calling token's
   * (403 forbidden, naming the ones it lacks); `*` only from a `*` token. Only an API token can
   * create one (an OAuth access token is refused: 403), and the new token never outlives its
   * creator: its expiry is capped at the creator's, and revoking the creator revokes it.
   */
  async create(dto: CreateAccountTokenDto, who: Principal): Promise<AccountTokenRecord & { secret: string }> {
    if (who.kind === 'access_token') {
      throw new AppError('forbidden', 'An OAuth access token cannot create API tokens; use an API token');
    }
    const permissions = [...new Set(dto.permissions)];
    if (!canGrant(who.permissions, permissions)) {
      throw new AppError(
        'forbidden',
        `A token cannot grant permissions its creator does not hold: ${lackingPermissions(who.permissions, permissions).join(', ')}`,
      );
    }
    let expiresAt: Date | null = null;
    if (dto.expiresAt !== undefined && dto.expiresAt !== null) {
      expiresAt = parseIsoWithOffset(dto.expiresAt);
      if (!expiresAt || expiresAt.getTime() <= Date.now()) throw fieldError('expiresAt', 'must be in the future');
    }
    if (who.expiresAt !== null && (expiresAt === null || expiresAt.getTime() > who.expiresAt)) expiresAt = new Date(who.expiresAt);
    // A token made by a token is its child (revoked with it); one made in the signed-in console has no parent.
    const created = await this.tokens.create(who.userId, dto.name, permissions, expiresAt, who.kind === 'api_token' ? who.apiTokenId : null);
    if (!created) throw new AppError('unauthorized', 'The calling token was revoked or expired while the new token was being created');
    return { ...(await this.get(created.id, who)), secret: created.secret };
  }

  /**
   * Revokes a token, every token it created (transitively) and every access token issued from
   * them, at once on every instance; answers it as it was. Revoking an already revoked token
   * revokes nothing new and answers it again.
   */
  async revoke(id: number, who: Principal): Promise<AccountTokenRecord> {
    const before = toRecord(await this.findVisible(id, who));
    await this.tokens.revokeApiToken(id, who.userId);
    return before;
  }

  /** The caller's token `id`: 404 when it is not theirs, 403 when it holds a permission the caller lacks. */
  private async findVisible(id: number, who: Principal): Promise<ApiToken> {
    const t = await this.repo.findRecord(id, who.userId);
    if (!t) throw notFound('Token', id);
    if (!canGrant(who.permissions, t.permissions)) {
      throw new AppError(
        'forbidden',
        `Token ${id} holds permissions the calling token lacks: ${lackingPermissions(who.permissions, t.permissions).join(', ')}`,
      );
    }
    return t;
  }
}
