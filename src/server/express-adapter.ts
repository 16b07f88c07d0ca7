import { type NestApplicationOptions, StreamableFile } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { hasAnswerRecorder } from '../idempotency/answer-recorder.js';
import { routerStackOf } from '../patches/express.js';
import { serverWithExpressPrototypes } from '../patches/node-http.js';

/** The route-registration methods Nest calls on the HTTP adapter. */
type Method = 'get' | 'post' | 'put' | 'delete' | 'patch' | 'head' | 'options' | 'all' | 'search';
type Handler = (req: Request, res: Response, next: NextFunction) => unknown;

/** A path segment that matches only itself (no parameter, wildcard or optional part). */
const LITERAL = /^[A-Za-z0-9._~-]+$/;

/**
 * The bucket of a route path: its first two segments when both are literal (`api/contacts`), or its
 * only segment (`health`); null for a path that starts with a parameter or wildcard (the catch-all).
 */
export function routeBucket(path: string): string | null {
  const segments = path.split('/').filter(Boolean);
  if (segments.length === 0 || !LITERAL.test(segments[0])) return null;
  if (segments.length === 1) return segments[0].toLowerCase();
  return LITERAL.test(segments[1]) ? `${segments[0]}/${segments[1]}`.toLowerCase() : null;
}

/** The buckets a request path can fall in: its first two segments, then its first alone (a one-segment route such as /health/). */
function requestBuckets(path: string): [string, string] | [string] | [] {
  let start = 1;
  while (path.charCodeAt(start) === 47) start++; // '/'
  const first = path.indexOf('/', start);
  if (first === -1) return start < path.length ? [path.slice(start).toLowerCase()] : [];
  const second = path.indexOf('/', first + 1);
  const two = path.slice(start, second === -1 ? undefined : second).toLowerCase();
  return [two, path.slice(start, first).toLowerCase()];
}

/**
 * The API's Express adapter (why and the measurements: src/server/README.md). Three changes to
 * Nest's, each keeping what Express would have answered:
 *
 * - Routes live in one router per path prefix instead of one list of ~250 layers that every request
 *   walks in order. A request goes straight to the router of its first two path segments; a route
 *   whose path does not begin with two literal segments (the catch-all) is registered on the
 *   application after the buckets, exactly as before. Matching inside a bucket is Express's own (same
 *   case sensitivity and trailing-slash rules), and routes of one path always share a bucket, so the
 *   first matching route is the one Express would have chosen. OPTIONS requests skip the buckets: a
 *   bucket's router would answer them itself with an Allow list, where the application's catch-all
 *   route answers them today (404/405 through the guard chain).
 * - A handler's JSON answer is written as one string with its length (res.json would, for a body of
 *   1,000 characters or more, copy it into a Buffer and hand Node two chunks), unless something needs
 *   Express's res.send: an answer recorder (idempotency/answer-recorder.ts: an Idempotency-Key being
 *   recorded), conditional-request headers, a non-JSON content type, or a status without a body.
 * - The HTTP server creates requests and responses with Express's prototypes already in place
 *   (initHttpServer), so Express's per-request Object.setPrototypeOf finds nothing to change.
 */
export class AppExpressAdapter extends ExpressAdapter {
  private readonly buckets = new Map<string, Router>();
  private dispatchMounted = false;
  /** The router of group() while its registrations run. */
  private groupRouter: Router | null = null;
  /** The middleware chain being registered (one layer: see chained). */
  private chain: Handler[] | null = null;
  private chainLayer: unknown = null;
  /** The body parsers registered one after another so far (one layer: see useBodyParser). */
  private parsers: Handler[] | null = null;
  private capturingParser = false;

  constructor() {
    super(express());
  }

  /**
   * Node's server builds requests and responses with Express's prototypes from the start, so
   * Express's per-request Object.setPrototypeOf changes nothing (src/server/README.md, "The Express
   * adapter"). Over HTTPS, with the options that need Nest's own set-up, or on a Node whose
   * IncomingMessage or ServerResponse is a class, Nest's server is used as before.
   */
  override initHttpServer(options: NestApplicationOptions): void {
    const server =
      options?.httpsOptions || options?.forceCloseConnections || options?.return503OnClosing
        ? null
        : serverWithExpressPrototypes(this.getInstance<express.Express>());
    if (server) this.httpServer = server;
    else super.initHttpServer(options);
  }

  override get(...args: unknown[]): unknown {
    return this.register('get', args);
  }
  override post(...args: unknown[]): unknown {
    return this.register('post', args);
  }
  override put(...args: unknown[]): unknown {
    return this.register('put', args);
  }
  override delete(...args: unknown[]): unknown {
    return this.register('delete', args);
  }
  override patch(...args: unknown[]): unknown {
    return this.register('patch', args);
  }
  override head(...args: unknown[]): unknown {
    return this.register('head', args);
  }
  override options(...args: unknown[]): unknown {
    return this.register('options', args);
  }
  override all(...args: unknown[]): unknown {
    return this.register('all', args);
  }
  override search(...args: unknown[]): unknown {
    return this.register('search', args);
  }

  override use(...args: unknown[]): unknown {
    if (this.capturingParser && args.length === 1 && typeof args[0] === 'function') {
      if (!this.parsers) {
        const parsers: Handler[] = (this.parsers = []);
        this.chained(function parseBody(req: Request, res: Response, next: NextFunction) {
          // Every parser skips a request without a body (type-is's hasBody) after giving it req.body = undefined.
          if (req.headers['transfer-encoding'] === undefined && Number.isNaN(Number(req.headers['content-length']))) {
            if (!Reflect.has(req, 'body')) req.body = undefined;
            next();
            return;
          }
          let i = 0;
          const step = (err?: unknown) => {
            if (err !== undefined && err !== null) next(err);
            else if (i === parsers.length) next();
            else void parsers[i++](req, res, step);
          };
          step();
        });
      }
      this.parsers.push(args[0] as Handler);
      return this;
    }
    this.parsers = null;
    if (this.groupRouter) return (this.groupRouter.use as (...a: unknown[]) => unknown)(...args);
    // A request handler for every path (not an error handler, which Express tells by its four parameters).
    if (args.length === 1 && typeof args[0] === 'function' && args[0].length < 4) {
      this.chained(args[0] as Handler);
      return this;
    }
    this.chain = null;
    return super.use(...args);
  }

  /**
   * Middleware for every path registered one after another (security headers, body parsers, request
   * text checks, the API reference's prefix check, request id and metrics) run as one Express layer:
   * Express allocates a match, a params object and a closure per layer a request passes, about
   * 1 KB each. In the chain each runs as Express would run it: in order, the next one when it calls
   * next(), an error (thrown, passed to next, or a rejected promise) handed to Express's error
   * handling, nothing more when it answers itself.
   */
  private chained(handler: Handler): void {
    const app = this.getInstance<express.Express>();
    const stack = routerStackOf(app);
    // Only while the chain is still the application's last layer (Nest registers some layers on the Express instance directly).
    if (this.chain && stack[stack.length - 1] === this.chainLayer) {
      this.chain.push(handler);
      return;
    }
    const chain: Handler[] = (this.chain = [handler]);
    app.use(function middlewareChain(req: Request, res: Response, next: NextFunction) {
      let i = 0;
      const step = (err?: unknown) => {
        // next('route') in a middleware means next() (Express); next('router') leaves the router.
        if (err !== undefined && err !== null && err !== 'route') {
          next(err);
          return;
        }
        if (i === chain.length) {
          next();
          return;
        }
        const fn = chain[i++];
        try {
          const ret = fn(req, res, step);
          if (ret instanceof Promise) ret.catch((e: unknown) => next(e ?? new Error('Rejected promise')));
        } catch (e) {
          next(e);
        }
      };
      step();
    });
    this.chainLayer = stack[stack.length - 1];
  }

  /**
   * Body parsers registered one after another (JSON for batch routes, JSON, form) are one Express
   * layer that a request without a body passes in one step; a request with one goes through each
   * parser in registration order, exactly as through their separate layers.
   */
  override useBodyParser(...args: Parameters<ExpressAdapter['useBodyParser']>): this {
    this.capturingParser = true;
    try {
      super.useBodyParser(...args);
    } finally {
      this.capturingParser = false;
    }
    return this;
  }

  /**
   * Whatever `register` adds to the application (middleware, routes, static files: e.g. the API
   * reference's eleven layers) goes into one router that only requests whose path matches `prefix`
   * enter, mounted where the group is declared: every other request passes one layer instead of all
   * of them. `prefix` must match every path those layers can answer.
   */
  group(prefix: RegExp, register: () => void): void {
    const app = this.getInstance<express.Express>();
    const router = express.Router({ caseSensitive: Boolean(app.get('case sensitive routing')), strict: Boolean(app.get('strict routing')) });
    this.parsers = null;
    this.chained(function prefixGroup(req: Request, res: Response, next: NextFunction) {
      if (prefix.test(req.path)) router(req, res, next);
      else next();
    });
    this.groupRouter = router;
    try {
      register();
    } finally {
      this.groupRouter = null;
    }
  }

  /**
   * Nest asks this once it has registered every middleware and is about to register the controllers'
   * routes: the dispatch layer goes there, after the middleware. Routes registered before (the API
   * reference's, at boot) stay plain application routes, as do all routes if Nest never asks.
   */
  override isRouteOrderSensitive(): boolean {
    this.mountDispatch(this.getInstance<express.Express>());
    return super.isRouteOrderSensitive();
  }

  override reply(response: Response, body: unknown, statusCode?: number): unknown {
    if (body === null || typeof body !== 'object' || body instanceof StreamableFile || body instanceof Error || ArrayBuffer.isView(body)) {
      return super.reply(response, body, statusCode);
    }
    const status = statusCode ?? response.statusCode;
    const type = response.getHeader('Content-Type');
    if (
      hasAnswerRecorder(response) ||
      status === 204 ||
      status === 304 ||
      response.getHeader('ETag') !== undefined ||
      response.getHeader('Last-Modified') !== undefined ||
      (type !== undefined && !/^application\/json\b/i.test(String(type)))
    ) {
      return super.reply(response, body, statusCode);
    }
    const text = JSON.stringify(body) as string | undefined;
    if (text === undefined) return super.reply(response, body, statusCode);
    response.statusCode = status;
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.setHeader('Content-Length', Buffer.byteLength(text));
    response.end(text);
    return response;
  }

  private register(method: Method, args: unknown[]): unknown {
    const app = this.getInstance<express.Express>();
    this.parsers = null;
    if (this.groupRouter) return (this.groupRouter[method] as (...a: unknown[]) => unknown)(...args);
    this.chain = null;
    const [path, ...handlers] = args;
    const bucket = this.dispatchMounted && typeof path === 'string' ? routeBucket(path) : null;
    if (bucket === null) return (app[method] as (...a: unknown[]) => unknown)(...args);
    let router = this.buckets.get(bucket);
    if (!router) {
      router = express.Router({ caseSensitive: Boolean(app.get('case sensitive routing')), strict: Boolean(app.get('strict routing')) });
      this.buckets.set(bucket, router);
    }
    return (router[method] as (...a: unknown[]) => unknown)(path, ...(handlers as Handler[]));
  }

  /** The one application layer that hands a request to its bucket. */
  private mountDispatch(app: express.Express): void {
    if (this.dispatchMounted) return;
    this.dispatchMounted = true;
    const buckets = this.buckets;
    app.use(function routeByPrefix(req: Request, res: Response, next: NextFunction) {
      if (req.method === 'OPTIONS') {
        next();
        return;
      }
      const [two, one] = requestBuckets(req.path);
      const router = (two !== undefined ? buckets.get(two) : undefined) ?? (one !== undefined ? buckets.get(one) : undefined);
      if (!router) {
        next();
        return;
      }
      router(req, res, next);
    });
  }
}
