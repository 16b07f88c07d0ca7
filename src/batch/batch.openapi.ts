import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath } from '@nestjs/swagger';
import { API_ERRORS_KEY } from '../common/openapi.js';
import { BatchItemResultDto, BatchResultDto, BatchSummaryDto } from './batch.dto.js';

/**
 * The answers of a batch route (common/batch.ts): 200 with one result per item, 413 over the item
 * or byte limit, 422 when an atomic batch had a failing item (the error with `results` and `summary`)
 * or the Idempotency-Key was used with another request.
 */
export function ApiBatchAnswers(opts: { resultDescription?: string } = {}) {
  const batchFailed = {
    type: 'object',
    required: ['error', 'results', 'summary'],
    additionalProperties: false,
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'status'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', enum: ['batch_failed'] },
          message: { type: 'string' },
          status: { type: 'integer', enum: [422] },
          details: { type: 'array', items: { $ref: '#/components/schemas/ApiErrorDetail' } },
        },
      },
      results: { type: 'array', items: { $ref: getSchemaPath(BatchItemResultDto) } },
      summary: { $ref: getSchemaPath(BatchSummaryDto) },
    },
  };
  const mismatch = {
    allOf: [{ $ref: '#/components/schemas/ApiErrorBody' }, { properties: { error: { properties: { code: { enum: ['idempotency_key_mismatch'] } } } } }],
  };
  return applyDecorators(
    ApiExtraModels(BatchResultDto, BatchItemResultDto, BatchSummaryDto),
    ApiResponse({
      status: 200,
      description: opts.resultDescription ?? 'One result per item, in input order, and the counts',
      schema: { $ref: getSchemaPath(BatchResultDto) },
    }),
    ApiResponse({
      status: 422,
      description:
        'An atomic batch with a failing item (`batch_failed`: nothing was written; `results` as they would have been, without ids), or an Idempotency-Key already used with another request',
      content: { 'application/json': { schema: { anyOf: [batchFailed, mismatch] } } },
    }),
    SetMetadata(API_ERRORS_KEY, [
      { status: 413, description: 'More than 500 items, or a body over BATCH_BODY_LIMIT_BYTES (the message names the limit)' },
      { status: 403, description: "The token lacks the route's permission, or (mode delete) the resource's delete permission" },
    ]),
  );
}
