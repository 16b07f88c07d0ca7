import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { AppError } from '../common/errors.js';
import {
  canonicalJson,
  fingerprintOf,
  parseIdempotencyKey,
  ReplayedResponse,
  SECRET_NOT_KEPT_NOTICE,
  scopeOf,
  withoutSecret,
} from './idempotency.decorators.js';
import type { IdempotencyScope } from './idempotency.repository.js';
import { IdempotencyService } from './idempotency.service.js';

describe('IdempotencyService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let svc: IdempotencyService;
  let userId: number;
  let n = 0;
  const scope = (key = `k${++n}`, credential = 'api_token:1'): IdempotencyScope => ({
    userId,
    scope: scopeOf('POST', '/api/things'),
    key,
    method: 'POST',
    path: '/api/things',
    credential,
  });
  const fp = 'a'.repeat(64);
  const rows = (key: string) => ctx.query<{ state: string }>(`SELECT state FROM idempotency_keys WHERE key = $1`, [key]);

  beforeAll(async () => {
    ctx = await startServiceContext();
    svc = ctx.get(IdempotencyService);
    userId = (await ctx.principal()).userId;
  });
  afterAll(async () => ctx.close());

  it('records a 2xx or 4xx answer and replays it; the same key with another fingerprint is a 422', async () => {
    for (const status of [201, 404]) {
      const s = scope();
      const claim = await svc.begin(s, fp);
      await svc.finish(s, claim, { status, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}') });
      const replay = await svc.begin(s, fp).catch((e: unknown) => e);
      expect(replay).toBeInstanceOf(ReplayedResponse);
      expect((replay as ReplayedResponse).status).toBe(status);
      expect((replay as ReplayedResponse).body?.toString()).toBe('{"a":1}');
      const mismatch = await svc.begin(s, 'b'.repeat(64)).catch((e: unknown) => e);
      expect(mismatch).toBeInstanceOf(AppError);
      expect((mismatch as AppError).code).toBe('idempotency_key_mismatch');
    }
  });

  it('replays an answer only to the credential that made the request: another token of the account gets a 422, the key stays held', async () => {
    const s = scope();
    const claim = await svc.begin(s, fp);
    await svc.finish(s, claim, { status: 201, headers: {}, body: Buffer.from('{"a":1}') });
    for (const other of ['api_token:2', 'access_token:1']) {
      const refused = await svc.begin({ ...s, credential: other }, fp).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).code).toBe('idempotency_key_mismatch');
      expect((refused as AppError).message).toMatch(/another token/);
    }
    expect(await svc.begin(s, fp).catch((e: unknown) => e)).toBeInstanceOf(ReplayedResponse);
    // A key recorded without a credential (before credentials were kept) is answered to nobody.
    await ctx.query(`UPDATE idempotency_keys SET credential = NULL WHERE key = $1`, [s.key]);
    expect(((await svc.begin(s, fp).catch((e: unknown) => e)) as AppError).code).toBe('idempotency_key_mismatch');
  });

  it('forgets 5xx and 429 answers: the retry claims the key again', async () => {
    for (const status of [500, 503, 429]) {
      const s = scope();
      const claim = await svc.begin(s, fp);
      await svc.finish(s, claim, { status, headers: {}, body: null });
      expect(await rows(s.key)).toEqual([]);
      expect(typeof (await svc.begin(s, fp))).toBe('string');
    }
  });

  it('answers 409 while the holder runs; only one of parallel claims wins', async () => {
    const s = scope();
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => svc.begin(s, fp)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes.filter((x) => x.status === 'rejected')) {
      expect(o.reason).toBeInstanceOf(AppError);
      expect((o.reason as AppError).status).toBe(409);
    }
  });

  it('a crashed claim lapses after its lease; the prune job deletes expired keys', async () => {
    const s = scope();
    const first = await svc.begin(s, fp);
    await ctx.query(`UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE key = $1`, [s.key]);
    const second = await svc.begin(s, fp);
    expect(second).not.toBe(first);
    // The crashed request's late completion is ignored: the key belongs to the retry now.
    await svc.finish(s, first, { status: 201, headers: {}, body: Buffer.from('late') });
    expect(await rows(s.key)).toEqual([{ state: 'running' }]);
    await svc.finish(s, second, { status: 201, headers: {}, body: Buffer.from('mine') });
    const old = scope();
    await svc.finish(old, await svc.begin(old, fp), { status: 200, headers: {}, body: null });
    await ctx.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`, [old.key]);
    expect(await svc.prune()).toBeGreaterThanOrEqual(1);
    expect(await rows(old.key)).toEqual([]);
    expect(await rows(s.key)).toEqual([{ state: 'done' }]);
  });

  it('keys and fingerprints', () => {
    expect(() => parseIdempotencyKey('ok_key:1-2')).not.toThrow();
    for (const bad of ['', ' ', 'a b', 'x'.repeat(256), 'é', ['a', 'b']]) expect(() => parseIdempotencyKey(bad)).toThrow(AppError);
    expect(canonicalJson({ b: [1, { d: 1, c: 2 }], a: null })).toBe('{"a":null,"b":[1,{"c":2,"d":1}]}');
    const req = (body: unknown, type = 'application/json', query = {}) => ({ headers: { 'content-type': type }, query, body });
    expect(fingerprintOf(req({ a: 1, b: 2 }))).toBe(fingerprintOf(req({ b: 2, a: 1 }, 'application/json; charset=utf-8')));
    expect(fingerprintOf(req({ a: 1 }))).not.toBe(fingerprintOf(req({ a: 2 })));
    expect(fingerprintOf(req({ a: 1 }))).not.toBe(fingerprintOf(req({ a: 1 }, 'application/x-www-form-urlencoded')));
    expect(fingerprintOf(req({ a: 1 }))).not.toBe(fingerprintOf(req({ a: 1 }, 'application/json', { x: '1' })));
  });

  it('keeps an answer that carried a secret without it, with a notice; other bodies as they are', () => {
    const body = Buffer.from(JSON.stringify({ token: { id: 7, name: 'ci', secret: 'sf_abc' } }));
    const kept = withoutSecret(body, ['token', 'secret']);
    expect(kept?.toString()).not.toContain('sf_abc');
    expect(JSON.parse(kept?.toString() ?? '')).toEqual({ token: { id: 7, name: 'ci' }, notice: SECRET_NOT_KEPT_NOTICE });
    const error = Buffer.from('{"error":{"code":"forbidden","message":"no","status":403}}');
    expect(withoutSecret(error, ['token', 'secret'])).toBe(error);
    expect(withoutSecret(Buffer.from('not json'), ['token', 'secret'])?.toString()).toBe('not json');
    expect(withoutSecret(null, ['token', 'secret'])).toBeNull();
    expect(withoutSecret(body, [])).toBe(body);
  });
});
