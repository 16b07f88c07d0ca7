/**
 * Express internals the API's adapter relies on (src/server/express-adapter.ts; why: src/server/README.md).
 * express.spec.ts fails with a clear message when an Express upgrade changes any of them.
 */
import type express from 'express';

/**
 * The application router's list of layers, in the order a request passes them. Express 5 creates the
 * router on first use and exposes it as `app.router`; its `stack` is an array of layers, one per
 * app.use()/app.<method>() call, the newest last. The adapter reads it to know whether the middleware
 * chain it is building is still the application's last layer.
 */
export function routerStackOf(app: express.Express): readonly unknown[] {
  const stack = (app.router as unknown as { stack?: unknown }).stack;
  if (!Array.isArray(stack)) throw new Error('Express: app.router.stack is not an array (see src/patches/express.spec.ts)');
  return stack;
}
