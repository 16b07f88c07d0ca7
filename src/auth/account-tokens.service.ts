import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { iso, isoRequired, parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { ApiToken } from './api-token.entity.js';
import { CreateAccountTokenDto } from './account-token.dto.js';
import { canGrant } from './permissions.js';
import { TokensService } from './tokens.service.js';

export const ACCOUNT_TOKEN_LIST_SPEC: ListSpec = {
  sortable: {
    id: 't.id',
    name: 't.name',
    createdAt: 't.created_at',
    expiresAt: 't.expires_at',
    lastUsedAt: 't.last_used_at',
    revokedAt: 't.revoked_at',
  },
};

export type AccountTokenRecord = ReturnType<AccountTokensService['toRecord']>;

/** The calling user's own API tokens (decisions §5). Another user's token is a 404, never a 403. */
@Injectable()
export class AccountTokensService {
  constructor(
    @InjectRepository(ApiToken) private readonly repo: Repository<ApiToken>,
    private readonly tokens: TokensService,
  ) {}

  toRecord(t: ApiToken, now = Date.now()) {
    return {
      id: t.id,
      name: t.name,
      prefix: t.tokenPrefix,
      permissions: t.permissions,
      expiresAt: iso(t.expiresAt),
      lastUsedAt: iso(t.lastUsedAt),
      createdAt: isoRequired(t.createdAt),
      revokedAt: iso(t.revokedAt),
      state: (t.revokedAt ? 'revoked' : t.expiresAt && t.expiresAt.getTime() <= now ? 'expired' : 'active') as 'active' | 'expired' | 'revoked',
    };
  }

  async list(query: Record<string, unknown>, who: Principal) {
    const q = parseListQuery(query, ACCOUNT_TOKEN_LIST_SPEC);
    const qb = this.repo.createQueryBuilder('t').where('t.user_id = :userId', { userId: who.userId });
    const { total, items } = await paginate(qb, q, ACCOUNT_TOKEN_LIST_SPEC);
    return { total, tokens: items.map((t) => this.toRecord(t)) };
  }

  async get(id: number, who: Principal): Promise<AccountTokenRecord> {
    const t = await this.repo.findOne({ where: { id, userId: who.userId } });
    if (!t) throw notFound('Token', id);
    return this.toRecord(t);
  }

  /**
   * Creates a token for the calling user. Its permissions may not exceed the calling token's
   * (403 forbidden, naming the ones it lacks); `*` only from a `*` token.
   */
  async create(dto: CreateAccountTokenDto, who: Principal): Promise<AccountTokenRecord & { secret: string }> {
    const permissions = [...new Set(dto.permissions)];
    if (!canGrant(who.permissions, permissions)) {
      const lacking = permissions.filter((p) => !canGrant(who.permissions, [p]));
      throw new AppError('forbidden', `A token cannot grant permissions its creator does not hold: ${lacking.join(', ')}`);
    }
    let expiresAt: Date | null = null;
    if (dto.expiresAt !== undefined && dto.expiresAt !== null) {
      expiresAt = parseIsoWithOffset(dto.expiresAt);
      if (!expiresAt || expiresAt.getTime() <= Date.now()) throw fieldError('expiresAt', 'must be in the future');
    }
    const { id, secret } = await this.tokens.create(who.userId, dto.name, permissions, expiresAt);
    return { ...(await this.get(id, who)), secret };
  }

  /**
   * Revokes a token and every access token issued from it, at once on every instance; answers it
   * as it was. Revoking an already revoked token changes nothing and answers it again.
   */
  async revoke(id: number, who: Principal): Promise<AccountTokenRecord> {
    const before = await this.get(id, who);
    await this.tokens.revokeApiToken(id, who.userId);
    return before;
  }
}
