/**
 * The Node internals src/patches/node-http.ts relies on. A failure here after a Node upgrade means
 * the server must go back to Express's per-request Object.setPrototypeOf (src/server/express-adapter.ts).
 */
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import { IncomingMessage, ServerResponse } from 'node:http';
import request from 'supertest';
import { constructorWithPrototype, isClass, serverWithExpressPrototypes } from './node-http.js';

describe('Node HTTP internals (src/patches/node-http.ts)', () => {
  it("IncomingMessage and ServerResponse are plain constructor functions (callable on an object made by 'new')", () => {
    expect(isClass(IncomingMessage)).toBe(false);
    expect(isClass(ServerResponse)).toBe(false);
    expect(
      isClass(
        class Made {
          readonly made = true;
        },
      ),
    ).toBe(true);
  });

  it("Express's app.request and app.response inherit from Node's prototypes", () => {
    const app = express();
    expect(app.request instanceof IncomingMessage).toBe(true);
    expect(app.response instanceof ServerResponse).toBe(true);
  });

  it('constructorWithPrototype runs the base constructor on an object with the given prototype', () => {
    function Base(this: { a?: unknown; b?: unknown }, a: unknown, b: unknown) {
      this.a = a;
      this.b = b;
    }
    const proto = Object.create(Base.prototype as object) as object;
    const Made = constructorWithPrototype(Base as unknown as new (a: unknown, b: unknown) => { a: unknown; b: unknown }, proto);
    const made = new Made(1, 2);
    expect(Object.getPrototypeOf(made)).toBe(proto);
    expect(made).toBeInstanceOf(Base);
    expect({ a: made.a, b: made.b }).toEqual({ a: 1, b: 2 });
  });

  it("Node's server takes the IncomingMessage and ServerResponse it builds with (createServer options)", async () => {
    const app = express();
    const server = serverWithExpressPrototypes(app);
    expect(server).not.toBeNull();
    const seen: boolean[] = [];
    server!.prependListener('request', (req, res) => seen.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response));
    app.get('/x', (_req, res) => {
      res.json({ ok: true });
    });
    const res = await request(server!).get('/x');
    expect(res.body).toEqual({ ok: true });
    expect(seen).toEqual([true, true]);
  });
});
