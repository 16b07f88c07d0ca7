import { applyDecorators, SetMetadata, type Type } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath } from '@nestjs/swagger';
import type { ErrorCode } from './errors.js';

/** Record schemas answered sparsely (`fields=` of POST /search): `<Name>Sparse` is the record with only `id` required. */
export const SPARSE_MODELS = new Set<string>();

/**
 * Documents a response envelope (docs/decisions/envelopes-and-ids.md): `{ <key>: Record }`, or with `list`,
 * `{ total, <plural>: Record[] }`. Record classes live in the resource's .dto.ts file, where the
 * swagger plugin reads their TypeScript types.
 */
export function ApiEnvelope(
  key: string,
  record: Type<unknown>,
  opts: { list?: boolean; status?: number; description?: string; sparse?: boolean; secretNotice?: boolean } = {},
) {
  if (opts.sparse) SPARSE_MODELS.add(record.name);
  const items = { $ref: opts.sparse ? `#/components/schemas/${record.name}Sparse` : getSchemaPath(record) };
  const schema = opts.list
    ? {
        type: 'object',
        required: ['total', key],
        properties: {
          total: { type: 'integer', description: 'Records matching the list parameters; -1 with count=false (not counted).' },
          [key]: { type: 'array', items },
          next: {
            type: 'string',
            nullable: true,
            description: 'With after= or count=false: the cursor of the next page (pass it as after), null after the last page.',
          },
        },
      }
    : { type: 'object', required: [key], properties: { [key]: { $ref: getSchemaPath(record) } } as Record<string, object> };
  if (opts.secretNotice && !opts.list) {
    schema.properties.notice = {
      type: 'string',
      description: 'Only in a replay (Idempotency-Key) of this answer: the secret was shown once, in the original answer, and is left out.',
    };
  }
  return applyDecorators(ApiExtraModels(record), ApiResponse({ status: opts.status ?? 200, description: opts.description ?? '', schema }));
}

/** The error body every failure has (docs/decisions/errors.md); its schema is written by completeOpenApi(). */
export class ApiErrorBody {
  error: { code: string; message: string; status: number; details?: { field: string; message: string }[]; requestId?: string };
}

export const API_ERRORS_KEY = 'sf:api-errors';

/** An error answer a route gives beyond those the route metadata implies (see completeOpenApi). */
export interface ApiErrorDoc {
  status: number;
  description: string;
  /** The codes this route answers with that status; default: the generic code of the status. */
  codes?: ErrorCode[];
}

/**
 * Route-specific error answers: 409 on unique properties or state rules, the OAuth error codes,
 * a signature check's 401. Everything the route metadata tells (body, path ids, permission,
 * throttling, list parameters) is documented without it.
 */
export const ApiErrors = (...errors: ApiErrorDoc[]) => SetMetadata(API_ERRORS_KEY, errors);
