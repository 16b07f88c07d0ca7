import { describe, expect, it } from '@jest/globals';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { lastValueFrom, of } from 'rxjs';
import { PutStatusInterceptor, putOutcome } from './put-status.js';

function run(value: unknown) {
  const res = {
    statusCode: 200,
    status(code: number) {
      this.statusCode = code;
      return this;
    },
  };
  const context = {
    switchToHttp: () => ({ getResponse: () => res }),
    getClass: () => ({ name: 'ThingsController' }),
    getHandler: () => ({ name: 'put' }),
  } as unknown as ExecutionContext;
  const next: CallHandler = { handle: () => of(value) };
  return { res, body: lastValueFrom(new PutStatusInterceptor().intercept(context, next)) };
}

describe('PUT create-or-replace status', () => {
  it('answers 201 with the body when the handler created, 200 when it replaced', async () => {
    const created = run(putOutcome(true, { thing: { id: 1 } }));
    expect(await created.body).toEqual({ thing: { id: 1 } });
    expect(created.res.statusCode).toBe(201);
    const replaced = run(putOutcome(false, { thing: { id: 2 } }));
    expect(await replaced.body).toEqual({ thing: { id: 2 } });
    expect(replaced.res.statusCode).toBe(200);
  });

  it('fails loudly when a handler does not say whether it created', async () => {
    await expect(run({ thing: {} }).body).rejects.toThrow('ThingsController.put is @CreateOrReplace() but did not return putOutcome(created, body)');
  });
});
