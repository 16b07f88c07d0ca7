/**
 * Domain errors: one class with a code from the table in docs/decisions/errors.md. Services throw these;
 * the global exception filter (http-exception.filter.ts) is the only place that builds error JSON.
 */
export const GENERIC_ERROR_STATUS = {
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;

/**
 * OAuth2 error codes (RFC 6749 §5.2, RFC 7009 §2.2.1), answered only by /api/oauth/v2/*. Several
 * share a status with a generic code, so the exception filter's status → code fallback inverts
 * GENERIC_ERROR_STATUS alone.
 */
export const OAUTH_ERROR_STATUS = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
} as const;

/**
 * 422 answers of Idempotency-Key and batch writes: a reused Idempotency-Key with another request, and an
 * atomic batch refused because an item failed. Kept apart so the status → code fallback stays unambiguous.
 */
export const UNPROCESSABLE_ERROR_STATUS = {
  idempotency_key_mismatch: 422,
  batch_failed: 422,
} as const;

export const ERROR_STATUS = { ...GENERIC_ERROR_STATUS, ...OAUTH_ERROR_STATUS, ...UNPROCESSABLE_ERROR_STATUS } as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  field: string;
  message: string;
  [extra: string]: unknown;
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Extra response headers (e.g. Allow on 405, Retry-After on 429/503). */
    readonly headers?: Record<string, string>,
    /** Properties sent beside `error` in the body (an atomic batch's `results` and `summary`). */
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) => new AppError('validation_failed', message, details);

export const fieldError = (field: string, message: string) => new AppError('validation_failed', `${field}: ${message}`, [{ field, message }]);

export const notFound = (what: string, id?: number | string) => new AppError('not_found', id === undefined ? `${what} not found` : `${what} ${id} not found`);

export const conflict = (message: string, details?: ErrorDetail[]) => new AppError('conflict', message, details);

export const unavailable = (message: string) => new AppError('unavailable', message, undefined, { 'Retry-After': '5' });

/** Properties that may be omitted from an edit but never set to null: one 400 listing each. */
export function rejectNulls(dto: object, fields: readonly string[]): void {
  const details: ErrorDetail[] = fields.filter((f) => (dto as Record<string, unknown>)[f] === null).map((field) => ({ field, message: 'must not be null' }));
  if (details.length) {
    throw new AppError('validation_failed', `Validation failed: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details);
  }
}
