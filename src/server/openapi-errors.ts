/**
 * Error answers in the OpenAPI document: the error body schema, the shared responses of each status,
 * and the error statuses each operation can answer with, from its route metadata.
 */
import { ERROR_STATUS, type ErrorCode, GENERIC_ERROR_STATUS } from '../common/errors.js';
import type { ApiErrorDoc } from '../common/openapi.js';
import type { Operation } from './openapi-schema.js';
import type { RouteInfo } from './route-table.js';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

export const DEFAULT_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (malformed body or a value that breaks a rule); `details` names each field',
  401: 'No valid token: missing, malformed, unknown, expired or revoked (WWW-Authenticate: Bearer)',
  403: 'The token lacks the permission this route needs',
  404: 'No record with this id (a path id that is not a whole number from 1 to 2147483647 names no record either)',
  405: 'The path exists, but not with this method (Allow lists the methods)',
  409: 'Conflict with the current state of a record',
  413: 'The request body is larger than the configured limit',
  415: 'The request body is in a media type this route does not take',
  416: 'Range not satisfiable',
  429: 'Rate limit exceeded (Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset)',
  503: 'The database or the job queue is unavailable; retry after Retry-After seconds',
};

export const RESPONSE_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  416: 'RangeNotSatisfiable',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
};

const HEADERS: Record<number, Record<string, object>> = {
  401: { 'WWW-Authenticate': { schema: { type: 'string' } } },
  405: { Allow: { schema: { type: 'string' } } },
  429: {
    'Retry-After': { schema: { type: 'integer' } },
    'X-RateLimit-Limit': { schema: { type: 'integer' } },
    'X-RateLimit-Remaining': { schema: { type: 'integer' } },
    'X-RateLimit-Reset': { schema: { type: 'integer' } },
  },
  503: { 'Retry-After': { schema: { type: 'integer' } } },
};

export const genericCode = (status: number): ErrorCode[] =>
  (Object.entries(GENERIC_ERROR_STATUS) as [ErrorCode, number][]).filter(([, s]) => s === status).map(([c]) => c);

/** The error body for one status: ApiErrorBody with `code` narrowed to the codes of that status. */
function errorSchema(status: number, codes: ErrorCode[]) {
  return {
    allOf: [
      { $ref: '#/components/schemas/ApiErrorBody' },
      {
        type: 'object',
        required: ['error'],
        properties: {
          error: {
            type: 'object',
            required: ['code', 'status'],
            properties: { code: { type: 'string', enum: codes }, status: { type: 'integer', enum: [status] } },
          },
        },
      },
    ],
  };
}

export function errorResponse(status: number, description: string, codes: ErrorCode[]) {
  return {
    description,
    ...(HEADERS[status] ? { headers: HEADERS[status] } : {}),
    content: { 'application/json': { schema: errorSchema(status, codes) } },
  };
}

export const ERROR_SCHEMAS = {
  ApiErrorDetail: {
    type: 'object',
    required: ['field', 'message'],
    description:
      'One problem: the field (dotted path for nested properties, or a query parameter) and what is wrong; some carry more (e.g. existingId on 409).',
    properties: { field: { type: 'string' }, message: { type: 'string' }, existingId: { type: 'integer' } },
    additionalProperties: true,
  },
  ApiErrorBody: {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    description: 'Every error answer: one shape for every failure.',
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'status'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
          message: { type: 'string' },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          details: { type: 'array', items: { $ref: '#/components/schemas/ApiErrorDetail' } },
          requestId: { type: 'string', description: 'Sent with 500 answers: the id to find the failure in the logs.' },
        },
      },
    },
  },
};

/** What the route metadata says about an operation's errors, beyond the operation itself. */
export interface ErrorSources {
  /** A list (ListSpec) or a list search. */
  isList: boolean;
  /** Takes an Idempotency-Key. */
  idempotent: boolean;
  /** @SkipThrottle(): never a 429. */
  skipThrottle: boolean;
  /** @ApiErrors() on the handler. */
  declared: ApiErrorDoc[];
  /** The body's rules beyond its schema (bodyRules), each a 400. */
  bodyRules: string[];
}

/** The error answers of one operation, by status: those its route metadata implies, then those declared on it. */
export function operationErrors(op: Operation, r: RouteInfo, from: ErrorSources): Map<number, ApiErrorDoc> {
  const errors = new Map<number, ApiErrorDoc>();
  const add = (status: number, description = DEFAULT_DESCRIPTIONS[status]) => {
    if (!errors.has(status)) errors.set(status, { status, description });
  };
  if (BODY_METHODS.has(r.method)) {
    add(400);
    add(413);
    add(
      415,
      `${DEFAULT_DESCRIPTIONS[415]} (${Object.keys((op.requestBody as { content?: object } | undefined)?.content ?? { 'application/json': 1 }).join(', ')})`,
    );
  }
  if (from.isList) {
    add(
      400,
      'Invalid list parameters (unknown parameter, value out of range, orderBy not in the list, a filter with an unknown field, an operator the field does not take, a bad value or a broken limit, a cursor of another list or another walk); `details` names each parameter',
    );
  }
  // Every query parameter a route declares is checked (and the query string's text is, for every route): a bad one is a 400.
  if ((op.parameters ?? []).some((p) => p.in === 'query')) {
    add(400, 'Invalid query parameter (unknown, malformed, out of range or not one of its values; or text that is not UTF-8 or holds NUL); `details` names it');
  }
  if ((op.parameters ?? []).some((p) => p.in === 'path')) add(404);
  if (r.permission !== 'public') {
    add(401);
    if (r.permission !== 'authenticated') add(403);
  }
  if (from.idempotent) {
    add(400, r.method === 'DELETE' ? 'The Idempotency-Key header is malformed' : undefined);
    add(409, 'Conflict with the current state of a record, or a request with the same Idempotency-Key is still running (retry after Retry-After)');
    errors.set(422, { status: 422, description: 'The Idempotency-Key was already used with a different request', codes: ['idempotency_key_mismatch'] });
  }
  if (!from.skipThrottle) add(429);
  // Every request may reach the database (the token lookup, the route's own queries).
  add(503);
  // Error answers declared on the route with @ApiResponse (e.g. the download's 404 and 416).
  for (const [status, res] of Object.entries(op.responses)) {
    const s = Number(status);
    if (s < 400) continue;
    const schema = Object.values(res.content ?? {})[0]?.schema;
    const isOwnBody = schema && !(schema as { $ref?: string }).$ref?.endsWith('/ApiErrorBody');
    if (isOwnBody) continue; // e.g. /health's 503 answers its status document
    errors.set(s, { status: s, description: res.description || DEFAULT_DESCRIPTIONS[s] || '' });
  }
  for (const e of from.declared) errors.set(e.status, e);
  // The body's rules beyond the schema (cross-field rules, references to other records) are 400s too.
  if (from.bodyRules.length) {
    const bad = errors.get(400) ?? { status: 400, description: DEFAULT_DESCRIPTIONS[400] };
    errors.set(400, { ...bad, description: `${bad.description}. Beyond what the body schema says, also when: ${from.bodyRules.join('; ')}` });
  }
  return errors;
}

/** Writes the error answers onto the operation, by status: a shared response where the answer is the standard one. */
export function writeErrorResponses(op: Operation, errors: Map<number, ApiErrorDoc>): void {
  for (const e of [...errors.values()].sort((a, b) => a.status - b.status)) {
    const existing = op.responses[String(e.status)];
    const ownSchema = Object.values(existing?.content ?? {})[0]?.schema as { $ref?: string } | undefined;
    if (existing && ownSchema && !ownSchema.$ref?.endsWith('/ApiErrorBody')) continue;
    const codes = e.codes ?? genericCode(e.status);
    const standard = !e.codes && e.description === DEFAULT_DESCRIPTIONS[e.status] && RESPONSE_NAMES[e.status];
    op.responses[String(e.status)] = standard
      ? ({ $ref: `#/components/responses/${RESPONSE_NAMES[e.status]}` } as never)
      : errorResponse(e.status, e.description, codes);
  }
}
