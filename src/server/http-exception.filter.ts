import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryFailedError } from 'typeorm';
import { constraintRule, pgErrorOf, translateConstraintError } from '../database/constraints.js';
import { AppError, type ErrorCode, type ErrorDetail, GENERIC_ERROR_STATUS } from '../common/errors.js';
import { RouteTable } from './route-table.js';
import { ReadyAnswer } from '../idempotency/answer-recorder.js';

/**
 * HTTP status → code, for errors that do not come from our own AppError (Nest, Express, body-parser).
 * Only the generic codes: the OAuth codes share statuses with them (400, 401) and are thrown explicitly.
 */
const CODE_BY_STATUS: Record<number, ErrorCode> = Object.fromEntries(Object.entries(GENERIC_ERROR_STATUS).map(([code, status]) => [status, code as ErrorCode]));

/** PostgreSQL SQLSTATEs that mean "the database is not reachable right now", not "the query is wrong". */
const PG_UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08006']);
const NET_UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);

function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string; driverError?: { code?: string } };
  const code = e?.driverError?.code ?? e?.code;
  if (code && (PG_UNAVAILABLE.has(code) || NET_UNAVAILABLE.has(code))) return true;
  const msg = e?.message ?? '';
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(msg);
}

/**
 * Names the parser a 400 came from: body-parser's JSON parse failures are "Malformed JSON body",
 * busboy's "Malformed multipart body", multer's limits "Multipart body refused" (decided by the
 * error's cause and the request's content type, not by words in the message: multer's
 * "Unexpected file field" is not about JSON).
 */
/** An HttpException's message as text: strings as they are, a structured message as JSON (never "[object Object]"). */
function textOf(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return String(v);
}

export function labelBodyError(exception: HttpException, req: Pick<Request, 'headers'>, message: string): string {
  const cause = (exception as { cause?: unknown }).cause as { type?: unknown } | undefined;
  const contentType = (req.headers?.['content-type'] ?? '').toLowerCase();
  if (cause instanceof SyntaxError || cause?.type === 'entity.parse.failed') return `Malformed JSON body: ${message}`;
  if (cause instanceof Error && contentType.startsWith('multipart/')) {
    // multer's own errors (a MulterError has a LIMIT_* style code) refuse a well-formed body; busboy's mean it does not parse.
    const refused = typeof (cause as { code?: unknown }).code === 'string';
    return `${refused ? 'Multipart body refused' : 'Malformed multipart body'}: ${message.replace(/^Multipart: /, '')}`;
  }
  return message;
}

/** Stream errors that mean the other end of the connection went away. */
const ABORT_CODES = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * Whether a failure is the client closing the connection before the response was complete (a
 * download cancelled midway): the response's side of the connection is gone and the error is a
 * stream's "closed early". The same codes from elsewhere (a database connection reset while the
 * client still waits) are not: then the response is still open.
 */
export function isClientAbort(exception: unknown, res: Pick<Response, 'destroyed' | 'writableFinished'>): boolean {
  const code = (exception as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ABORT_CODES.has(code) && res.destroyed && !res.writableFinished;
}

export interface Normalized {
  code: ErrorCode;
  status: number;
  message: string;
  details?: ErrorDetail[];
  headers?: Record<string, string>;
  extra?: Record<string, unknown>;
}

/**
 * The one global exception filter: every error, ours, Nest's or Express's, leaves as
 * `{ error: { code, message, status, details? } }`. Unknown errors are 500 with the request id.
 */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpExceptionFilter');

  constructor(
    private readonly routes: RouteTable,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    // An answer a check already knows (an Idempotency-Key replay: the recorded answer, as it was sent): not an error.
    if (exception instanceof ReadyAnswer) {
      this.replay(exception, host.switchToHttp().getResponse<Response>());
      return;
    }
    // Integrity errors of registered constraints (common/constraints.ts) become 409/400/404; finding
    // the existing record's id takes a query, so these answer asynchronously.
    const pg = pgErrorOf(exception);
    if (pg?.code?.startsWith('23') && constraintRule(pg.constraint)) {
      void translateConstraintError(exception, (sql, params) => this.dataSource.query(sql, params)).then(
        (translated) => this.send(translated ?? exception, host),
        () => this.send(exception, host),
      );
      return;
    }
    this.send(exception, host);
  }

  private replay(answer: ReadyAnswer, res: Response): void {
    for (const [k, v] of Object.entries(answer.headers)) res.setHeader(k, v);
    res.status(answer.status);
    if (answer.body === null) res.send();
    else res.send(answer.body);
  }

  private send(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request & { id?: string }>();
    const res = ctx.getResponse<Response>();
    if (isClientAbort(exception, res)) {
      // Not a failure of the server: nobody is left to answer, and there is no stack worth keeping.
      this.logger.log({
        msg: 'request aborted by the client',
        requestId: req.id,
        method: req.method,
        path: req.path,
        status: res.headersSent ? res.statusCode : undefined,
        bytesSent: req.socket?.bytesWritten,
      });
      return;
    }
    const n = normalizeError(exception, req, (path) => this.routes.methodsFor(path));
    if (n.status >= 500) {
      const level = n.code === 'unavailable' ? 'warn' : 'error';
      this.logger[level]({
        msg: 'request failed',
        requestId: req.id,
        method: req.method,
        path: req.path,
        status: n.status,
        err: exception instanceof Error ? { name: exception.name, message: exception.message, stack: exception.stack } : String(exception),
      });
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    for (const [k, v] of Object.entries(n.headers ?? {})) res.setHeader(k, v);
    const body: Record<string, unknown> = { code: n.code, message: n.message, status: n.status };
    if (n.details && n.details.length) body.details = n.details;
    if (n.status === 500 && req.id) body.requestId = req.id;
    res.status(n.status).json({ error: body, ...n.extra });
  }
}

/** body-parser's 413 carries the limit it applied (BODY_LIMIT_BYTES, or BATCH_BODY_LIMIT_BYTES on batch routes): name it. */
function tooLargeMessage(exception: HttpException): string {
  const cause = (exception as { cause?: { limit?: unknown } }).cause;
  const limit = typeof cause?.limit === 'number' ? cause.limit : undefined;
  return limit !== undefined ? `Request body is larger than the limit of ${limit} bytes` : 'Request body is larger than the configured limit';
}

/**
 * An error as its answer: integrity errors of registered constraints translated (common/constraints.ts,
 * `lookup` finds the existing record), then normalized like the filter does. Batch routes call this per
 * item, so an item's error is exactly what the single-record route would have answered.
 */
export async function errorAnswer(exception: unknown, lookup: (sql: string, params: string[]) => Promise<{ id: number }[]>): Promise<Normalized> {
  const pg = pgErrorOf(exception);
  if (pg?.code?.startsWith('23') && constraintRule(pg.constraint)) {
    const translated = await translateConstraintError(exception, lookup).catch(() => null);
    return normalizeError(translated ?? exception);
  }
  return normalizeError(exception);
}

export function normalizeError(exception: unknown, req?: Pick<Request, 'headers' | 'path' | 'method'>, methodsFor?: (path: string) => string[]): Normalized {
  if (exception instanceof AppError) {
    return {
      code: exception.code,
      status: exception.status,
      message: exception.message,
      details: exception.details,
      headers: exception.headers,
      extra: exception.extra,
    };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const response = exception.getResponse();
    const raw = typeof response === 'string' ? response : ((response as { message?: unknown }).message ?? exception.message);
    let message = textOf(Array.isArray(raw) ? raw.join('; ') : raw);
    // The router's own 404 ("Cannot GET /x"): a known path with another method is a 405.
    if (status === 404 && typeof message === 'string' && message.startsWith('Cannot ')) {
      const allowed = req && methodsFor ? methodsFor(req.path) : [];
      if (allowed.length) {
        return {
          code: 'method_not_allowed',
          status: 405,
          message: `Method ${req?.method ?? ''} is not allowed on ${req?.path ?? ''}; allowed: ${allowed.join(', ')}`,
          headers: { Allow: allowed.join(', ') },
        };
      }
      return { code: 'not_found', status: 404, message: req ? `No route for ${req.method} ${req.path}` : 'Not found' };
    }
    const code = CODE_BY_STATUS[status] ?? (status >= 500 ? 'internal_error' : 'validation_failed');
    if (status === 400 && req) message = labelBodyError(exception, req, message);
    if (status === 413) message = tooLargeMessage(exception);
    if (status === 415) message = `Unsupported content type: ${message}`;
    if (status === 429) return { code: 'rate_limited', status, message: 'Rate limit exceeded; see Retry-After' };
    if (status >= 500) return { code: 'internal_error', status: 500, message: 'Internal server error' };
    // The OAuth2 endpoints answer RFC 6749's invalid_request for a body that does not parse.
    if (code === 'validation_failed' && req?.path.startsWith('/api/oauth/')) return { code: 'invalid_request', status: 400, message };
    return { code, status: code === 'validation_failed' ? 400 : status, message };
  }
  if (isDatabaseUnavailable(exception)) {
    return { code: 'unavailable', status: 503, message: 'The database is unavailable; retry shortly', headers: { 'Retry-After': '5' } };
  }
  if (exception instanceof QueryFailedError) {
    const pg = (exception as QueryFailedError & { driverError?: { code?: string } }).driverError;
    // Values the validation layer let through but PostgreSQL refused: still the client's fault.
    if (pg?.code === '22P02' || pg?.code === '22003' || pg?.code === '22007' || pg?.code === '22008' || pg?.code === '22001') {
      return { code: 'validation_failed', status: 400, message: 'A value is out of range or malformed' };
    }
    if (pg?.code === '23505') return { code: 'conflict', status: 409, message: 'A unique value is already taken' };
    if (pg?.code === '40001' || pg?.code === '40P01') {
      return { code: 'unavailable', status: 503, message: 'Concurrent update; retry the request', headers: { 'Retry-After': '1' } };
    }
  }
  return { code: 'internal_error', status: 500, message: 'Internal server error' };
}
