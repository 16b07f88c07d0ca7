import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import helmet from 'helmet';
import type { NextFunction, Request, Response } from 'express';
import type { AppConfig } from './config/config.js';
import { RouteTable } from './common/route-table.js';
import { API_VERSION } from './system/system.controller.js';

/** Express-level settings of the API process: parsers and limits, security headers, CORS, the OpenAPI document. */
export function configureHttp(app: NestExpressApplication, config: AppConfig): void {
  app.set('trust proxy', 'loopback, linklocal, uniquelocal');
  app.set('query parser', 'simple');
  // No automatic ETag on API JSON (it hashes every response body); asset downloads set their own.
  app.set('etag', false);
  app.use(
    helmet({
      contentSecurityPolicy: {
        directives: { defaultSrc: ["'self'"], scriptSrc: ["'self'", "'unsafe-inline'"], styleSrc: ["'self'", "'unsafe-inline'"], imgSrc: ["'self'", 'data:'] },
      },
    }),
  );
  if (config.corsOrigins) {
    app.enableCors({
      origin: config.corsOrigins === '*' ? true : config.corsOrigins,
      exposedHeaders: ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After', 'X-Request-Id', 'Content-Disposition', 'ETag'],
      maxAge: 600,
    });
  }
  app.useBodyParser('json', { limit: config.bodyLimitBytes, type: ['application/json', 'application/*+json'] });
  app.useBodyParser('urlencoded', { limit: config.bodyLimitBytes, extended: false, parameterLimit: 100 });

  const document = buildOpenApi(app, config);
  // The reference (HTML) at /api/docs; the document itself at /api/docs-json, or at /api/docs when JSON is asked for.
  app.use('/api/docs', (req: Request, res: Response, next: NextFunction) => {
    if (req.method === 'GET' && (req.path === '/' || req.path === '') && req.accepts(['html', 'json']) === 'json') {
      res.json(document);
      return;
    }
    next();
  });
  SwaggerModule.setup('api/docs', app, document, { jsonDocumentUrl: 'api/docs-json', customSiteTitle: 'SalesFlow API reference' });
}

function buildOpenApi(app: NestExpressApplication, config: AppConfig): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setTitle('SalesFlow API')
    .setDescription(
      [
        'Sales and marketing automation API. Every /api route needs `Authorization: Bearer <token>` except those marked public.',
        'Errors always have the shape `{ "error": { "code", "message", "status", "details"? } }`.',
        'Lists take `search`, `page` (1-based), `limit` (1..200, default 30), `orderBy`, `orderByDir` (asc|desc) and answer `{ total, <plural>: [...] }`.',
        'Rate limits per account and hour: basic 1000, professional 5000, enterprise 10000; see the X-RateLimit-* headers.',
        'Create, copy and revoke your API tokens in the [account console](/account) (sign in with the password set by `cli user:password` or an invitation link).',
      ].join('\n\n'),
    )
    .setVersion(API_VERSION)
    .addServer(config.baseUrl)
    .addBearerAuth();
  const document = SwaggerModule.createDocument(app, builder.build());
  // Each operation states the permission it needs, from the same route table as GET /api/endpoints.
  const routes = app.get(RouteTable).all();
  for (const r of routes) {
    const openApiPath = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = (document.paths[openApiPath] as Record<string, { description?: string; security?: unknown[]; 'x-permission'?: string }> | undefined)?.[
      r.method.toLowerCase()
    ];
    if (!op) continue;
    op['x-permission'] = r.permission;
    op.description = `${op.description ? op.description + '\n\n' : ''}Permission: \`${r.permission}\``;
    op.security = r.permission === 'public' ? [] : [{ bearer: [] }];
  }
  return document;
}
