import { describe, expect, it } from '@jest/globals';
import type express from 'express';
import type { Request, Response } from 'express';
import { IncomingMessage, type Server, ServerResponse } from 'node:http';
import request from 'supertest';
import { attachAnswerRecorder } from '../idempotency/answer-recorder.js';
import { AppExpressAdapter, routeBucket } from './express-adapter.js';

describe('routeBucket', () => {
  it('takes the first two literal segments, or the only one', () => {
    expect(routeBucket('/api/contacts/:id')).toBe('api/contacts');
    expect(routeBucket('/api/Text-Messages/broadcasts')).toBe('api/text-messages');
    expect(routeBucket('/health')).toBe('health');
    expect(routeBucket('/account/')).toBe('account');
  });
  it('leaves paths that start with a parameter or wildcard to the application router', () => {
    expect(routeBucket('/')).toBeNull();
    expect(routeBucket('*path')).toBeNull();
    expect(routeBucket('/*path')).toBeNull();
    expect(routeBucket('/api/:resource')).toBeNull();
    expect(routeBucket('/:id/contacts')).toBeNull();
  });
});

describe('AppExpressAdapter', () => {
  /** Routes registered as Nest does: middleware, then isRouteOrderSensitive(), then the routes in order, the catch-all last. */
  function app(): express.Express {
    const adapter = new AppExpressAdapter();
    const answer = (name: string) => (req: Request, res: Response) => res.json({ name, params: req.params });
    adapter.get('/early/route', answer('registered before the router'));
    const instance = adapter.getInstance<express.Express>();
    instance.use((_req: Request, res: Response, next: () => void) => {
      res.setHeader('X-Middleware', 'ran');
      next();
    });
    adapter.isRouteOrderSensitive();
    adapter.get('/api/contacts/new', answer('new'));
    adapter.get('/api/contacts/:id', answer('one'));
    adapter.post('/api/contacts', answer('create'));
    adapter.get('/health', answer('health'));
    adapter.all('/*path', answer('catch-all'));
    return instance;
  }

  it('answers each route as one Express router would, middleware first', async () => {
    const http = request(app());
    const one = await http.get('/api/contacts/5');
    expect(one.body).toEqual({ name: 'one', params: { id: '5' } });
    expect(one.headers['x-middleware']).toBe('ran');
    expect((await http.get('/api/contacts/new')).body.name).toBe('new');
    expect((await http.get('/API/Contacts/7/')).body).toEqual({ name: 'one', params: { id: '7' } });
    expect((await http.post('/api/contacts')).body.name).toBe('create');
    expect((await http.get('/health/')).body.name).toBe('health');
    expect((await http.get('/early/route')).body.name).toBe('registered before the router');
    expect((await http.head('/api/contacts/5')).status).toBe(200);
  });

  it('hands what no bucket route matches to the routes after the buckets', async () => {
    const http = request(app());
    expect((await http.delete('/api/contacts/5')).body.name).toBe('catch-all');
    expect((await http.get('/api/contacts/5/extra')).body.name).toBe('catch-all');
    expect((await http.get('/api/nothing')).body.name).toBe('catch-all');
    expect((await http.get('//api/contacts/5')).body.name).toBe('catch-all');
    expect((await http.get('/api/contact%73/5')).body.name).toBe('catch-all');
    // OPTIONS skips the buckets, whose routers would answer it themselves.
    expect((await http.options('/api/contacts/5')).body.name).toBe('catch-all');
  });
});

describe('AppExpressAdapter.initHttpServer', () => {
  /** The prototypes of each request and response when the server hands them over (before Express) and in the handler. */
  async function prototypes(options: Parameters<AppExpressAdapter['initHttpServer']>[0]) {
    const adapter = new AppExpressAdapter();
    adapter.initHttpServer(options);
    const app = adapter.getInstance<express.Express>();
    const server = adapter.getHttpServer() as Server;
    const atServer: boolean[] = [];
    server.prependListener('request', (req, res) => atServer.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response));
    app.get('/things/:id', (req: Request, res: Response) => {
      res.status(201).json({
        express: Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response,
        node: req instanceof IncomingMessage && res instanceof ServerResponse,
        id: req.params.id,
        q: req.query.q,
        header: req.get('X-Thing'),
      });
    });
    const answers = [];
    // Two requests on one keep-alive connection: the second request object is made the same way.
    const agent = request.agent(server);
    for (const q of ['a', 'b']) answers.push(await agent.get(`/things/7?q=${q}`).set('X-Thing', q));
    await new Promise<void>((done) => server.close(() => done()));
    return { atServer, answers: answers.map((r) => ({ status: r.status, body: r.body as unknown })) };
  }

  it("builds requests and responses with Express's prototypes, which Express then leaves as they are", async () => {
    const { atServer, answers } = await prototypes({});
    expect(atServer).toEqual([true, true, true, true]);
    for (const [i, q] of ['a', 'b'].entries()) expect(answers[i]).toEqual({ status: 201, body: { express: true, node: true, id: '7', q, header: q } });
  });

  it("uses Nest's own server where its options need it (Express sets the prototypes per request there)", async () => {
    const { atServer, answers } = await prototypes({ forceCloseConnections: true });
    expect(atServer).toEqual([false, false, false, false]);
    expect(answers[0]).toEqual({ status: 201, body: { express: true, node: true, id: '7', q: 'a', header: 'a' } });
  });
});

describe('AppExpressAdapter.reply', () => {
  function app() {
    const adapter = new AppExpressAdapter();
    adapter.isRouteOrderSensitive();
    const big = { items: Array.from({ length: 100 }, (_, i) => ({ i, text: 'é'.repeat(20) })) };
    adapter.get('/api/json/big', (_req: Request, res: Response) => adapter.reply(res, big, 201));
    adapter.get('/api/json/empty', (_req: Request, res: Response) => adapter.reply(res, undefined, 204));
    adapter.get('/api/json/wrapped', (_req: Request, res: Response) => {
      attachAnswerRecorder(res, {
        record(r, body, send) {
          r.setHeader('X-Wrapped', body?.toString() ?? 'none');
          send();
        },
        abandon() {},
      });
      return adapter.reply(res, { ok: true }, 200);
    });
    return { http: request(adapter.getInstance<express.Express>()), big };
  }

  it('writes a JSON answer as one string with its byte length', async () => {
    const { http, big } = app();
    const res = await http.get('/api/json/big');
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(big)));
    expect(res.body).toEqual(big);
    const head = await http.head('/api/json/big');
    expect(head.status).toBe(201);
    expect(head.text).toBeUndefined();
  });

  it('leaves bodiless statuses and an answer a recorder waits for to Express (res.send)', async () => {
    const { http } = app();
    const empty = await http.get('/api/json/empty');
    expect(empty.status).toBe(204);
    expect(empty.text).toBe('');
    const wrapped = await http.get('/api/json/wrapped');
    expect(wrapped.headers['x-wrapped']).toBe('{"ok":true}');
    expect(wrapped.body).toEqual({ ok: true });
  });
});

describe('AppExpressAdapter middleware chain, body parsers and groups', () => {
  type Next = (err?: unknown) => void;
  function app(): express.Express {
    const adapter = new AppExpressAdapter();
    const instance = adapter.getInstance<express.Express>();
    const mark = (name: string) => (req: Request, _res: Response, next: Next) => {
      (req as Request & { seen?: string[] }).seen = [...((req as Request & { seen?: string[] }).seen ?? []), name];
      next();
    };
    adapter.use(mark('first'));
    adapter.useBodyParser('json', false);
    adapter.use((req: Request, _res: Response, next: Next) => (req.path === '/boom' ? next(new Error('boom')) : next()));
    const failing = (req: Request, _res: Response, next: Next): Promise<void> | undefined => {
      if (req.path === '/throws') throw new Error('thrown');
      if (req.path === '/rejects') return Promise.reject(new Error('rejected'));
      next();
      return undefined;
    };
    adapter.use(failing);
    adapter.group(/^\/docs/i, () => {
      adapter.get('/docs/page', (_req: Request, res: Response) => res.json({ docs: true }));
      adapter.use('/docs', mark('docs-middleware'));
    });
    adapter.use(mark('last'));
    adapter.isRouteOrderSensitive();
    adapter.post('/api/echo', (req: Request, res: Response) => res.json({ body: req.body as unknown, seen: (req as Request & { seen?: string[] }).seen }));
    adapter.get('/api/seen', (req: Request, res: Response) => res.json({ seen: (req as Request & { seen?: string[] }).seen, hasBody: 'body' in req }));
    instance.use((err: Error, _req: Request, res: Response, _next: Next) => res.status(500).json({ error: err.message }));
    return instance;
  }

  it('registers consecutive pathless middleware as one layer and runs them in order', async () => {
    const a = app();
    const names = (a.router as unknown as { stack: { name: string }[] }).stack.map((l) => l.name);
    // Five middleware, the body parser and the group's prefix check: one layer (the group's own layers live in its router).
    expect(names.filter((n) => n === 'middlewareChain').length).toBe(1);
    const r = await request(a).get('/api/seen');
    expect(r.body).toEqual({ seen: ['first', 'last'], hasBody: true });
  });

  it('parses a body through the parsers as their own layers would, and skips a bodyless request', async () => {
    const r = await request(a()).post('/api/echo').set('content-type', 'application/json').send('{"x":1}');
    expect(r.body).toEqual({ body: { x: 1 }, seen: ['first', 'last'] });
    const bad = await request(a()).post('/api/echo').set('content-type', 'application/json').send('{"x":');
    expect(bad.status).toBe(500); // the parser's error reaches the error handler, past the rest of the chain
  });

  it('hands an error passed to next, thrown, or rejected to the error handler', async () => {
    expect((await request(a()).get('/boom')).body).toEqual({ error: 'boom' });
    expect((await request(a()).get('/throws')).body).toEqual({ error: 'thrown' });
    expect((await request(a()).get('/rejects')).body).toEqual({ error: 'rejected' });
  });

  it('enters a group only for its prefix, with its routes and middleware as before', async () => {
    expect((await request(a()).get('/docs/page')).body).toEqual({ docs: true });
    expect((await request(a()).get('/DOCS/page')).body).toEqual({ docs: true });
    expect((await request(a()).get('/api/seen')).body.seen).not.toContain('docs-middleware');
  });

  function a(): express.Express {
    return app();
  }
});
