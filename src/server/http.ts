import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { IncomingMessage, Server } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { AppConfig } from '../config/config.js';
import { completeOpenApi } from './openapi-document.js';
import { RouteTable } from './route-table.js';
import { requestTextMiddleware } from './request-text.middleware.js';
import { staticSecurityHeaders } from './security-headers.js';
import { AppExpressAdapter } from './express-adapter.js';
import { RequestIdMiddleware } from './request-id.middleware.js';
import type { AppRequest } from '../common/request.js';

/** The version of the API's contract (the OpenAPI document's info.version, GET /api/version's apiVersion). */
export const API_VERSION = '1';

/** What times every request (the metrics): started once per request past the API reference, before routing. */
export interface RequestTimer {
  start(req: Request, res: Response): void;
}

/**
 * The HTTP server's connection timeouts. Node closes a keep-alive connection after 5 s idle by
 * default: a load balancer or client pool that reuses it after a longer pause gets a reset socket.
 * The server keeps idle connections for HTTP_KEEP_ALIVE_TIMEOUT_MS (default 65 s, above the 60 s
 * idle timeout of common load balancers, so that they close first), and waits for a request's
 * headers a second longer than that (headersTimeout must exceed keepAliveTimeout, or a request
 * arriving on a connection about to time out is cut off); requestTimeout is never below it.
 */
export function configureServerTimeouts(server: Server, config: Pick<AppConfig, 'httpKeepAliveTimeoutMs'>): void {
  server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
  server.headersTimeout = config.httpKeepAliveTimeoutMs + 1000;
  if (server.requestTimeout > 0 && server.requestTimeout < server.headersTimeout) server.requestTimeout = server.headersTimeout;
}

/** Express-level settings of the API process: parsers and limits, security headers, CORS, the OpenAPI document. */
export function configureHttp(app: NestExpressApplication, config: AppConfig, timing: RequestTimer): void {
  // X-Forwarded-For decides the client address (rate limits per address, unique downloads): believed
  // only from the proxies TRUST_PROXY names, never by default (any client could choose its address).
  app.set('trust proxy', config.trustProxy);
  app.set('query parser', 'simple');
  // No automatic ETag on API JSON (it hashes every response body); asset downloads set their own.
  app.set('etag', false);
  app.disable('x-powered-by');
  // helmet's headers, computed once at boot (they are the same for every request).
  app.use(
    staticSecurityHeaders({
      contentSecurityPolicy: {
        directives: { defaultSrc: ["'self'"], scriptSrc: ["'self'", "'unsafe-inline'"], styleSrc: ["'self'", "'unsafe-inline'"], imgSrc: ["'self'", 'data:'] },
      },
    }),
  );
  if (config.corsOrigins) {
    app.enableCors({
      origin: config.corsOrigins === '*' ? true : config.corsOrigins,
      exposedHeaders: [
        'X-RateLimit-Limit',
        'X-RateLimit-Remaining',
        'X-RateLimit-Reset',
        'Retry-After',
        'X-Request-Id',
        'Content-Disposition',
        'ETag',
        'Location',
        'Idempotent-Replayed',
      ],
      maxAge: 600,
    });
  }
  // Routes marked @LargeJsonBody() (batch writes of up to 500 records or 10,000 ids, imports) take a larger JSON body than single records.
  // (body-parser hands its type check the request Express already extended, typed as Node's IncomingMessage.)
  const isJson = (req: IncomingMessage) => Boolean((req as Request).is(['application/json', 'application/*+json']));
  const takesLargeBody = app.get(RouteTable).largeJsonBodyRoutes();
  const isBatch = (req: IncomingMessage) => takesLargeBody(req.method ?? '', (req as Request).path);
  app.useBodyParser('json', { limit: config.batchBodyLimitBytes, type: (req: IncomingMessage) => isJson(req) && isBatch(req) });
  app.useBodyParser('json', { limit: config.bodyLimitBytes, type: (req: IncomingMessage) => isJson(req) && !isBatch(req) });
  app.useBodyParser('urlencoded', { limit: config.bodyLimitBytes, extended: false, parameterLimit: 100 });
  // Before the router: NUL / invalid UTF-8 in the path, query or body, and reserved keys, are a 400 everywhere.
  app.use(requestTextMiddleware);

  const document = buildOpenApi(app, config);
  // The reference's layers (its page, assets and documents, all under /api/docs) are one layer for every other request.
  const adapter = app.getHttpAdapter();
  const grouped = (prefix: RegExp, register: () => void) => (adapter instanceof AppExpressAdapter ? adapter.group(prefix, register) : register());
  grouped(/^\/api\/docs/i, () => {
    // The reference (HTML) at /api/docs; the document itself at /api/docs-json, or at /api/docs when JSON is asked for.
    app.use('/api/docs', (req: Request, res: Response, next: NextFunction) => {
      if (req.method === 'GET' && (req.path === '/' || req.path === '') && req.accepts(['html', 'json']) === 'json') {
        res.json(document);
        return;
      }
      next();
    });
    SwaggerModule.setup('api/docs', app, document, { jsonDocumentUrl: 'api/docs-json', customSiteTitle: 'SalesFlow API reference' });
  });

  // Every request past the reference: its id (X-Request-Id, the debug log line) and its metrics, in one layer.
  const ids = new RequestIdMiddleware(config);
  app.use(function requestIdAndMetrics(req: Request, res: Response, next: NextFunction) {
    ids.stamp(req as AppRequest, res);
    timing.start(req, res);
    next();
  });
}

/** The OpenAPI security requirement of each credential kind (common/route-access.ts). */

function buildOpenApi(app: NestExpressApplication, config: AppConfig): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setTitle('SalesFlow API')
    .setDescription(
      [
        'Sales and marketing automation API. Every /api route needs `Authorization: Bearer <token>` except those marked public.',
        'Errors always have the shape `{ "error": { "code", "message", "status", "details"? } }`; each operation lists the statuses it can answer. A path that exists answers other methods with 405 and an `Allow` header.',
        'Lists take `search`, `page` (1-based), `limit` (1..200, default 30), `orderBy`, `orderByDir` (asc|desc) and answer `{ total, <plural>: [...] }`.',
        'Rate limits per account and hour: basic 1000, professional 5000, enterprise 10000; see the X-RateLimit-* headers.',
        'Create, copy and revoke your API tokens in the [account console](/account) (sign in with the password set by `cli user:password` or an invitation link).',
      ].join('\n\n'),
    )
    .setVersion(API_VERSION)
    .addServer(config.baseUrl)
    .addBearerAuth()
    // HTTP Basic: OAuth client authentication (RFC 6749 §2.3.1) on the token endpoints, and an API token as the password on browser pages.
    .addBasicAuth(
      {
        type: 'http',
        scheme: 'basic',
        description: 'OAuth client credentials on the token endpoints; an API token as the password (any user name) on browser pages',
      },
      'basic',
    )
    // Segment's write key: HTTP Basic with an API token as the user name and an empty password (the tracking intake).
    .addBasicAuth(
      { type: 'http', scheme: 'basic', description: "An API token as the user name and an empty password (Segment's write key): the tracking intake" },
      'writeKey',
    )
    .addApiKey(
      {
        type: 'apiKey',
        in: 'header',
        name: 'X-Signature',
        description:
          't=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>; a timestamp more than 5 minutes from the server\'s time is refused',
      },
      'smsSignature',
    )
    .addApiKey(
      {
        type: 'apiKey',
        in: 'query',
        name: 'signature',
        description: "A signed, expiring link the service handed out (with `expires`), e.g. an export's `download.url`",
      },
      'signedLink',
    );
  const document = SwaggerModule.createDocument(app, builder.build());
  // Who may call each operation, its error answers, path ids, list parameters and body rules, from the same route table as GET /api/endpoints.
  completeOpenApi(document, app.get(RouteTable).all());
  return document;
}
