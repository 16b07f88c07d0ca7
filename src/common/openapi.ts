import { applyDecorators, type Type } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath } from '@nestjs/swagger';

/**
 * Documents a response envelope (decisions §2): `{ <key>: Record }`, or with `list`,
 * `{ total, <plural>: Record[] }`. Record classes live in the resource's .dto.ts file, where the
 * swagger plugin reads their TypeScript types.
 */
export function ApiEnvelope(key: string, record: Type<unknown>, opts: { list?: boolean; status?: number; description?: string } = {}) {
  const schema = opts.list
    ? { type: 'object', required: ['total', key], properties: { total: { type: 'integer' }, [key]: { type: 'array', items: { $ref: getSchemaPath(record) } } } }
    : { type: 'object', required: [key], properties: { [key]: { $ref: getSchemaPath(record) } } };
  return applyDecorators(ApiExtraModels(record), ApiResponse({ status: opts.status ?? 200, description: opts.description ?? '', schema }));
}

/** The error body every failure has (decisions §4). */
export class ApiErrorBody {
  error: { code: string; message: string; status: number; details?: { field: string; message: string }[]; requestId?: string };
}
