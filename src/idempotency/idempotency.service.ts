import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { AppError } from '../common/errors.js';
import { IDEMPOTENCY_HEADER, isRecordedStatus, ReplayedResponse } from './idempotency.decorators.js';
import { IdempotencyRepository, type IdempotencyScope, type StoredAnswer } from './idempotency.repository.js';

/**
 * Claims, completes and replays Idempotency-Keys in PostgreSQL, so a key holds across API
 * instances and while Redis is down. A request first claims its key with an in-progress row
 * (INSERT ... ON CONFLICT DO NOTHING: one winner), runs, then records its answer on that row.
 */
@Injectable()
export class IdempotencyService {
  constructor(
    private readonly keys: IdempotencyRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Claims the key for this request and answers the claim id; or throws the recorded answer
   * (ReplayedResponse), a 422 when the key was used for another request or by another credential,
   * or a 409 while the request that holds the key is still running.
   */
  async begin(scope: IdempotencyScope, fingerprint: string): Promise<string> {
    const { idempotencyLeaseSeconds: lease, idempotencyTtlHours: ttl } = this.config;
    for (let attempt = 0; attempt < 5; attempt++) {
      const claim = randomUUID();
      if (await this.keys.claimNew(scope, fingerprint, claim, lease, ttl)) return claim;
      const row = await this.keys.find(scope);
      if (!row) continue; // deleted since the insert failed: claim it again
      if (row.expired || (row.state === 'running' && row.leaseLeft < 0)) {
        // Forgotten, or its request crashed: the first retry to take it over runs the request.
        if (await this.keys.claimLapsed(scope, fingerprint, claim, lease, ttl)) return claim;
        continue;
      }
      if (row.credential !== scope.credential) {
        // The original's authorisation (the guards' and the service's: which token may create
        // tokens, grant which permissions...) held for its credential only: another credential,
        // even of the same account, is never answered with it.
        throw new AppError(
          'idempotency_key_mismatch',
          `This ${IDEMPOTENCY_HEADER} was used by another token of this account for ${scope.method} ${scope.path}; an answer is replayed only to the token that made the request: use a new key`,
          [{ field: IDEMPOTENCY_HEADER, message: 'was used by another token' }],
        );
      }
      if (row.fingerprint !== fingerprint) {
        throw new AppError(
          'idempotency_key_mismatch',
          `This ${IDEMPOTENCY_HEADER} was already used with a different request to ${scope.method} ${scope.path}; use a new key for a new request`,
          [{ field: IDEMPOTENCY_HEADER, message: 'was used with a different body, content type or query' }],
        );
      }
      if (row.state === 'done' && row.answer) throw new ReplayedResponse(row.answer.status, row.answer.headers, row.answer.body);
      throw new AppError(
        'conflict',
        `A request with this ${IDEMPOTENCY_HEADER} is still in progress; retry after Retry-After to get its answer`,
        [{ field: IDEMPOTENCY_HEADER, message: 'is held by a request still running' }],
        { 'Retry-After': '1' },
      );
    }
    throw new AppError('conflict', `The ${IDEMPOTENCY_HEADER} is contended; retry shortly`, [{ field: IDEMPOTENCY_HEADER, message: 'is contended' }], {
      'Retry-After': '1',
    });
  }

  /** Records the answer (2xx, 4xx) or forgets the key (5xx, 429: a retry runs the request again). */
  async finish(scope: IdempotencyScope, claim: string, answer: StoredAnswer): Promise<void> {
    if (isRecordedStatus(answer.status)) await this.keys.complete(scope, claim, answer, this.config.idempotencyTtlHours);
    else await this.keys.release(scope, claim);
  }

  /** Forgets an in-progress key whose answer was not recordable (streamed). */
  release(scope: IdempotencyScope, claim: string): Promise<void> {
    return this.keys.release(scope, claim);
  }

  /** Deletes keys past their retention (the idempotency.prune job). */
  prune(): Promise<number> {
    return this.keys.prune();
  }
}
