/**
 * The OpenAPI document's completion: makes the document SwaggerModule built say what the server does,
 * from the same route metadata the server runs on. The ideas live beside it: error answers
 * (openapi-errors.ts), request bodies (openapi-body-rules.ts), who may call an operation
 * (openapi-access.ts); this file reads Nest's decorator metadata and walks the operations.
 */
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { DECORATORS, type OpenAPIObject } from '@nestjs/swagger';
import { IdPipe } from '../common/id.pipe.js';
import { API_ERRORS_KEY, type ApiErrorDoc, SPARSE_MODELS } from '../common/openapi.js';
import { describeRegistry } from '../lists/filter-sql.js';
import { LIST_SPEC_KEY, type ListSpec } from '../lists/list-spec.js';
import { FILTER_NODE_SCHEMAS, LIST_SEARCH_KEY, listQueryParameters } from '../lists/list.openapi.js';
import { THROTTLER_SKIP } from '../patches/throttler.js';
import { documentAccess, documentIdempotencyKey } from './openapi-access.js';
import { bodyRules, jsonBodiesWithoutFiles, refuseNul, searchBodySchema, tightenBodySchemas } from './openapi-body-rules.js';
import { DEFAULT_DESCRIPTIONS, ERROR_SCHEMAS, RESPONSE_NAMES, errorResponse, genericCode, operationErrors, writeErrorResponses } from './openapi-errors.js';
import { type BodyClass, type Operation, type Schema, bodyContents, refName } from './openapi-schema.js';
import type { RouteInfo } from './route-table.js';

const MAX_ID = 2147483647;

function readArgs(r: RouteInfo): { data?: string; pipes?: unknown[] }[] {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, r.controller, r.handlerName) ?? {}) as Record<string, { data?: string; pipes?: unknown[] }>;
  return Object.values(args);
}

/** The shared components: error schemas and responses, the filter language's nodes, the sparse models. */
function addComponents(document: OpenAPIObject): Record<string, Schema> {
  document.components ??= {};
  const schemas = (document.components.schemas ??= {}) as Record<string, Schema>;
  Object.assign(schemas, ERROR_SCHEMAS, FILTER_NODE_SCHEMAS);
  for (const name of SPARSE_MODELS) {
    const full = schemas[name] as Schema | undefined;
    if (!full) continue;
    const copy = JSON.parse(JSON.stringify(full)) as Schema;
    copy.required = copy.properties && 'id' in copy.properties ? ['id'] : [];
    copy.description = `${name} with only the properties chosen by \`fields\` (all when not given); id is always there.`;
    schemas[`${name}Sparse`] = copy;
  }
  const responses = (document.components.responses ??= {}) as Record<string, unknown>;
  for (const [status, name] of Object.entries(RESPONSE_NAMES)) {
    responses[name] = errorResponse(Number(status), DEFAULT_DESCRIPTIONS[Number(status)], genericCode(Number(status)));
  }
  return schemas;
}

/** The classes of the routes' bodies (their parameter types, and @ApiBody types). */
function bodyClassesOf(routes: RouteInfo[]): Set<BodyClass> {
  const bodyClasses = new Set<BodyClass>();
  for (const r of routes) {
    const types = (Reflect.getMetadata('design:paramtypes', r.controller.prototype, r.handlerName) ?? []) as unknown[];
    for (const t of types) if (typeof t === 'function') bodyClasses.add(t as BodyClass);
    const apiParams = (Reflect.getMetadata(DECORATORS.API_PARAMETERS, r.controller.prototype[r.handlerName]) ?? []) as { in?: string; type?: unknown }[];
    for (const p of apiParams) if (p.in === 'body' && typeof p.type === 'function') bodyClasses.add(p.type as BodyClass);
  }
  return bodyClasses;
}

/**
 * Makes the document say what the server does, from the same route metadata the server runs on:
 * every operation lists each error status it can answer with the real error schema, path ids are
 * 32-bit positive integers, lists declare their parameters from their ListSpec, request bodies say
 * what the validation pipe refuses. Runs once over the document SwaggerModule built.
 */
export function completeOpenApi(document: OpenAPIObject, routes: RouteInfo[]): void {
  const schemas = addComponents(document);
  tightenBodySchemas(schemas, bodyClassesOf(routes));
  jsonBodiesWithoutFiles(document, schemas);
  for (const item of Object.values(document.paths) as Record<string, Operation>[])
    for (const op of Object.values(item)) for (const c of Object.values(bodyContents(op))) refuseNul(c.schema, schemas);

  for (const r of routes) {
    const openApiPath = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = (document.paths[openApiPath] as Record<string, Operation> | undefined)?.[r.method.toLowerCase()];
    if (op) completeOperation(op, r, schemas);
  }
  mergeSameTemplates(document);
}

/** One operation: who may call it, its path ids, its list parameters or search body, its error answers. */
function completeOperation(op: Operation, r: RouteInfo, schemas: Record<string, Schema>): void {
  const handler = r.controller.prototype[r.handlerName] as Function;
  documentAccess(op, r);

  // Path ids: IdPipe takes 1..2147483647, anything else is a 404.
  const idParams = new Set(
    readArgs(r)
      .filter((a) => (a.pipes ?? []).some((p) => p === IdPipe || p instanceof IdPipe))
      .flatMap((a) => (a.data ? [a.data] : [])),
  );
  for (const p of op.parameters ?? []) {
    if (p.in === 'path' && idParams.has(p.name)) p.schema = { type: 'integer', format: 'int32', minimum: 1, maximum: MAX_ID };
  }

  // List parameters, from the ListSpec the service validates with.
  const spec = Reflect.getMetadata(LIST_SPEC_KEY, handler) as ListSpec | undefined;
  if (spec) {
    const names = new Set((op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name));
    op.parameters = [...(op.parameters ?? []), ...listQueryParameters(spec).filter((p) => !names.has(p.name))];
  }

  const searchSpec = Reflect.getMetadata(LIST_SEARCH_KEY, handler) as ListSpec | undefined;
  if (searchSpec) {
    const json = bodyContents(op)['application/json'] as { schema?: Schema } | undefined;
    const base = json?.schema?.$ref ? schemas[refName(json.schema.$ref)] : undefined;
    if (json && base) json.schema = searchBodySchema(base, searchSpec);
    const fields = describeRegistry(searchSpec.filterable ?? {});
    op.description = `${op.description ?? ''}\n\nFilterable fields: ${fields || 'none'}${searchSpec.dynamicFilterDoc ? `; ${searchSpec.dynamicFilterDoc}` : ''}.`;
  }

  const errors = operationErrors(op, r, {
    isList: Boolean(spec || searchSpec),
    idempotent: documentIdempotencyKey(op, r),
    skipThrottle: [handler, r.controller].some((t) => Reflect.getMetadata(THROTTLER_SKIP + 'default', t) === true),
    declared: (Reflect.getMetadata(API_ERRORS_KEY, handler) ?? []) as ApiErrorDoc[],
    bodyRules: [...new Set(Object.values(bodyContents(op)).flatMap((c) => bodyRules(schemas, c.schema)))],
  });
  writeErrorResponses(op, errors);
}

/**
 * Paths that differ only in the names of their parameters (`/api/fields/{segment}` and
 * `/api/fields/{id}`) are one path to OpenAPI: the operations join the path with the most of them,
 * their parameters renamed by position.
 */
function mergeSameTemplates(document: OpenAPIObject): void {
  const names = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const shapes = new Map<string, string[]>();
  for (const path of Object.keys(document.paths)) {
    const shape = path.replace(/\{[^}]+\}/g, '{}');
    shapes.set(shape, [...(shapes.get(shape) ?? []), path]);
  }
  for (const group of shapes.values()) {
    if (group.length < 2) continue;
    const count = (p: string) => Object.keys(document.paths[p]).length;
    const target = group.reduce((a, b) => (count(b) > count(a) ? b : a));
    const into = document.paths[target] as Record<string, Operation>;
    for (const path of group.filter((p) => p !== target)) {
      const from = document.paths[path] as Record<string, Operation>;
      if (Object.keys(from).some((m) => m in into)) continue;
      const rename = new Map(names(path).map((n, i) => [n, names(target)[i]]));
      for (const [method, op] of Object.entries(from)) {
        for (const p of op.parameters ?? []) {
          const renamed = p.in === 'path' ? rename.get(p.name) : undefined;
          if (renamed !== undefined) p.name = renamed;
        }
        into[method] = op;
      }
      delete document.paths[path];
    }
  }
}
