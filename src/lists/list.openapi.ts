import { applyDecorators, SetMetadata, type Type } from '@nestjs/common';
import { ApiEnvelope } from '../common/openapi.js';
import { FILTER_LIMITS, FILTER_OPERATORS } from './filter.js';
import { LIST_SPEC_KEY, type ListSpec } from './list.js';

/**
 * Documents a list's query parameters from the list spec the service validates with (the same
 * object: parseListQuery(query, SPEC)). The contract test checks that the server accepts exactly
 * the documented parameters.
 */
export const ApiListQuery = (spec: ListSpec) => SetMetadata(LIST_SPEC_KEY, spec);

export const LIST_SEARCH_KEY = 'sf:list-search';

/**
 * `POST /api/<resource>/search`: the list's envelope (records possibly sparse) and, in the
 * description, the list's filterable fields from the same spec the service checks with.
 */
export const ApiListSearch = (key: string, record: Type<unknown>, spec: ListSpec) =>
  applyDecorators(ApiEnvelope(key, record, { list: true, sparse: true }), SetMetadata(LIST_SEARCH_KEY, spec));

/** The filter language's schemas, added to the document's components. */
export const FILTER_NODE_SCHEMAS = {
  FilterCondition: {
    type: 'object',
    required: ['field', 'op'],
    additionalProperties: false,
    description:
      'One condition: a filterable field of the list, an operator the field takes, and the value (none for isEmpty/isNotEmpty; [a,b] for in, nin, between).',
    properties: {
      field: { type: 'string', maxLength: 200 },
      op: { type: 'string', enum: [...FILTER_OPERATORS] },
      value: {
        oneOf: [
          { type: 'string', maxLength: FILTER_LIMITS.maxValueLength },
          { type: 'number' },
          { type: 'boolean' },
          { type: 'array', maxItems: FILTER_LIMITS.maxListValues, items: { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }] } },
        ],
      },
    },
  },
  FilterNode: {
    description: `A filter (issue 14): a condition, or {"and":[...]}, {"or":[...]}, {"not":{...}}. At most ${FILTER_LIMITS.maxDepth} nested groups, ${FILTER_LIMITS.maxConditions} conditions, ${FILTER_LIMITS.maxListValues} values in a list, ${FILTER_LIMITS.maxValueLength} characters a value. Strings: eq/neq/in/nin exact, contains/startsWith/endsWith case-insensitive. Date-times: ISO 8601 with an offset, or now, now-7d, now+2h (s, m, h, d, w, M, y).`,
    oneOf: [
      { $ref: '#/components/schemas/FilterCondition' },
      {
        type: 'object',
        required: ['and'],
        additionalProperties: false,
        properties: { and: { type: 'array', minItems: 1, maxItems: FILTER_LIMITS.maxConditions, items: { $ref: '#/components/schemas/FilterNode' } } },
      },
      {
        type: 'object',
        required: ['or'],
        additionalProperties: false,
        properties: { or: { type: 'array', minItems: 1, maxItems: FILTER_LIMITS.maxConditions, items: { $ref: '#/components/schemas/FilterNode' } } },
      },
      { type: 'object', required: ['not'], additionalProperties: false, properties: { not: { $ref: '#/components/schemas/FilterNode' } } },
    ],
  },
};
