/**
 * Node's HTTP server building requests and responses with Express's prototypes from the start, so
 * Express's per-request Object.setPrototypeOf changes nothing (why, and the measurement: src/server/README.md).
 * node-http.spec.ts fails with a clear message when a Node upgrade changes what this relies on.
 */
import { IncomingMessage, type Server, ServerResponse, createServer } from 'node:http';
import type express from 'express';

/** Whether `fn` is an ES class (which cannot be called on an object the way constructorWithPrototype calls it). */
export function isClass(fn: unknown): boolean {
  return /^class\b/.test(Function.prototype.toString.call(fn));
}

/**
 * A constructor of `base`'s instances (IncomingMessage, ServerResponse: Node's are plain
 * constructor functions of at most two arguments) whose prototype is `proto`: Express's app.request
 * or app.response, which inherit from base.prototype. It runs `base` on the object `new` made
 * (Reflect.construct with a new target measured no faster than setPrototypeOf).
 */
export function constructorWithPrototype<T>(base: T, proto: object): T {
  const init = base as unknown as (this: object, a: unknown, b: unknown) => void;
  const made = function (this: object, a: unknown, b: unknown): void {
    init.call(this, a, b);
  };
  made.prototype = proto;
  return made as unknown as T;
}

/**
 * An HTTP server for `app` whose requests and responses are made with app.request and app.response
 * as their prototypes; null on a Node whose IncomingMessage or ServerResponse is a class (the caller
 * then uses the usual server).
 */
export function serverWithExpressPrototypes(app: express.Express): Server | null {
  if (isClass(IncomingMessage) || isClass(ServerResponse)) return null;
  return createServer(
    { IncomingMessage: constructorWithPrototype(IncomingMessage, app.request), ServerResponse: constructorWithPrototype(ServerResponse, app.response) },
    app,
  );
}
