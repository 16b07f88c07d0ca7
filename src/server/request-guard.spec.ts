import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import { RequestGuard } from './request-guard.js';

type Answer = boolean | Promise<boolean> | Error;

const ALL = ['authentication', 'rate limit', 'permission', 'same origin', 'content type', 'idempotency'];

/** The fused guard over six checks that log their name and answer as told. */
function guard(answers: Partial<Record<string, Answer>>) {
  const calls: string[] = [];
  const step = (name: string) => () => {
    calls.push(name);
    const a = answers[name] ?? true;
    if (a instanceof Error) throw a;
    return a;
  };
  const g = new RequestGuard(ALL.map((name) => ({ check: step(name) })));
  return { calls, run: () => g.canActivate({} as ExecutionContext) };
}

describe('RequestGuard', () => {
  it('runs the six checks in their order, without a promise when none needs one', () => {
    const { calls, run } = guard({});
    expect(run()).toBe(true);
    expect(calls).toEqual(ALL);
  });

  it('waits for a check that answers a promise before running the next', async () => {
    let release: (v: boolean) => void = () => undefined;
    const { calls, run } = guard({ 'rate limit': new Promise<boolean>((r) => (release = r)) });
    const result = run();
    expect(result).toBeInstanceOf(Promise);
    expect(calls).toEqual(['authentication', 'rate limit']);
    release(true);
    await expect(result).resolves.toBe(true);
    expect(calls).toEqual(ALL);
  });

  it('stops at a check that refuses: a thrown error (sync or rejected) or false', async () => {
    const thrown = guard({ permission: new Error('forbidden') });
    expect(() => thrown.run()).toThrow('forbidden');
    expect(thrown.calls).toEqual(['authentication', 'rate limit', 'permission']);

    const rejected = guard({ 'rate limit': Promise.reject(new Error('rate limited')) });
    await expect(rejected.run()).rejects.toThrow('rate limited');
    expect(rejected.calls).toEqual(['authentication', 'rate limit']);

    const refused = guard({ 'same origin': false });
    expect(refused.run()).toBe(false);
    expect(refused.calls).toEqual(['authentication', 'rate limit', 'permission', 'same origin']);
  });
});
