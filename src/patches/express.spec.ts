/**
 * The Express internals src/patches/express.ts relies on. A failure here after an Express upgrade
 * means the adapter's middleware chain (src/server/express-adapter.ts) must be revisited.
 */
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import { routerStackOf } from './express.js';

describe('Express internals (src/patches/express.ts)', () => {
  it('keeps the application layers in app.router.stack, one per app.use()/app.<method>(), newest last', () => {
    const app = express();
    expect(Array.isArray((app.router as unknown as { stack?: unknown }).stack)).toBe(true);
    const before = routerStackOf(app).length;
    const first = (_req: unknown, _res: unknown, next: () => void) => next();
    const second = (_req: unknown, _res: unknown, next: () => void) => next();
    app.use(first);
    app.use(second);
    const stack = routerStackOf(app) as { handle?: unknown }[];
    expect(stack.length).toBe(before + 2);
    expect(stack[stack.length - 2].handle).toBe(first);
    expect(stack[stack.length - 1].handle).toBe(second);
    // The same array, so the adapter can compare its last element with the layer it added.
    expect(routerStackOf(app)).toBe(stack);
  });

  it('names the broken assumption when the stack is missing', () => {
    const fake = { router: {} } as unknown as express.Express;
    expect(() => routerStackOf(fake)).toThrow(/app\.router\.stack is not an array/);
  });
});
