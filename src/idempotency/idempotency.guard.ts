import { type ExecutionContext, Injectable, Logger } from '@nestjs/common';
import type { NowOrLater, RequestCheck } from '../common/request-check.js';
import { attachAnswerRecorder } from './answer-recorder.js';
import type { Response } from 'express';
import {
  ANSWERS_SECRET_KEY,
  credentialOf,
  fingerprintOf,
  IDEMPOTENT_METHODS,
  parseIdempotencyKey,
  RECORDED_HEADERS,
  scopeOf,
  withoutSecret,
} from './idempotency.decorators.js';
import type { IdempotencyScope } from './idempotency.repository.js';
import { IdempotencyService } from './idempotency.service.js';
import type { AppRequest } from '../common/request.js';
import { isFallbackRoute, routeAccess, routeMetadata } from '../common/route-access.js';

/**
 * Idempotency-Key on every POST, PUT, PATCH and DELETE under /api that a token calls: the last global
 * guard, after the credential, rate-limit, permission and content-type guards (the account is known
 * and the request has been counted), before validation and the handler. Claims the key and records
 * the answer the client gets (the global exception filter's error answers included) before sending
 * it, as an AnswerRecorder (idempotency/answer-recorder.ts); a replay is thrown as ReplayedResponse, a
 * ReadyAnswer the filter sends as it is. A guard rather than an interceptor: a global interceptor puts every route, GETs
 * included, behind an RxJS pipeline (about 30 µs of CPU per request in bench/RESULTS.md's cost table).
 * Routes without an account are out of scope (public routes such as the OAuth token endpoint, the
 * SMS gateway's signed callbacks, the account console's session pages): the header is ignored there.
 */
@Injectable()
export class IdempotencyGuard implements RequestCheck {
  private readonly logger = new Logger('Idempotency');

  constructor(private readonly idempotency: IdempotencyService) {}

  /** Answers without a promise for a request that carries no key (almost all). */
  check(context: ExecutionContext): NowOrLater<boolean> {
    if (context.getType() !== 'http') return true;
    const req = context.switchToHttp().getRequest<AppRequest>();
    const header = req.headers['idempotency-key'];
    if (header === undefined || !IDEMPOTENT_METHODS.has(req.method) || !req.path.startsWith('/api/') || isFallbackRoute(context)) return true;
    const { credential } = routeAccess(context);
    if (!req.principal || credential === 'none' || credential === 'session' || credential === 'sms-signature') return true;
    const key = parseIdempotencyKey(header);
    const scope: IdempotencyScope = {
      userId: req.principal.userId,
      scope: scopeOf(req.method, req.path),
      key,
      method: req.method,
      path: req.path,
      credential: credentialOf(req.principal),
    };
    const fingerprint = fingerprintOf(req);
    const res = context.switchToHttp().getResponse<Response>();
    const secretPath = (routeMetadata(ANSWERS_SECRET_KEY, context) as string[] | undefined) ?? [];
    return this.idempotency.begin(scope, fingerprint).then((claim) => {
      this.recordAnswer(res, scope, claim, secretPath);
      return true;
    });
  }

  /**
   * Records the first answer sent (by the route or by the exception filter), then sends it. A response
   * that ends without one (a stream) is not replayable: its key is released so a retry runs again. An
   * answer carrying a secret (`secretPath`, from @AnswersSecret()) is recorded without it: the
   * database never holds it in plaintext.
   */
  private recordAnswer(res: Response, scope: IdempotencyScope, claim: string, secretPath: readonly string[]): void {
    attachAnswerRecorder(res, {
      record: (res, body, send) => {
        const headers: Record<string, string> = {};
        for (const name of RECORDED_HEADERS) {
          const value = res.getHeader(name);
          if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
        }
        const kept = res.statusCode < 300 ? withoutSecret(body, secretPath) : body;
        this.idempotency.finish(scope, claim, { status: res.statusCode, headers, body: kept }).then(send, (err: unknown) => {
          this.logger.warn({ msg: 'could not record the answer of an idempotent request', err: err instanceof Error ? err.message : String(err) });
          send();
        });
      },
      abandon: () => {
        this.idempotency.release(scope, claim).catch(() => undefined);
      },
    });
  }
}
