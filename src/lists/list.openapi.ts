/**
 * The lists' part of the OpenAPI document: the route metadata that names a route's list, each list's
 * query parameters with their descriptions (from the same ListSpec parseListQuery checks against),
 * and the filter language's schemas.
 */
import { applyDecorators, SetMetadata, type Type } from '@nestjs/common';
import { ApiEnvelope } from '../common/openapi.js';
import { MAX_CURSOR } from './cursor.js';
import { describeRegistry } from './filter-sql.js';
import { FILTER_LIMITS, FILTER_OPERATORS } from './filter-syntax.js';
import { changedExpression, DEFAULT_LIMIT, LIST_SPEC_KEY, type ListSpec, MAX_LIMIT, MAX_PAGE, MAX_SEARCH } from './list-spec.js';

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

/** The `modifiedSince` parameter's description. */
const MODIFIED_SINCE_DOC = [
  'Incremental sync: only records created or changed at or after this time (ISO 8601 with an offset),',
  'by modifiedAt, or the creation time for records never changed.',
  'Deletions are in the event feed (GET /api/events).',
].join(' ');

/** How the `filter` parameter is written (its description, before the list's filterable fields). */
const FILTER_SYNTAX_DOC = [
  'Structured filter, in the query-string form `field[op]:value` combined with and(...), or(...), not(...)',
  '(a top-level comma list is an and), or as JSON (text starting with {, the FilterNode schema).',
  'Values with , ( ) [ ] " or outer spaces are double-quoted with backslash escapes (\\" and \\\\);',
  'lists for in, nin and between are [a,b]; isEmpty and isNotEmpty take no value.',
  'Date-times take ISO 8601 with an offset or now, now-7d, now+2h (units s, m, h, d, w, M, y).',
  `At most ${FILTER_LIMITS.maxDepth} nested groups, ${FILTER_LIMITS.maxConditions} conditions,`,
  `${FILTER_LIMITS.maxListValues} list values, ${FILTER_LIMITS.maxValueLength} characters a value.`,
  'Example: and(createdAt[gte]:now-7d,or(name[startsWith]:ada,email[endsWith]:"@example.com")).',
].join(' ');

/** The `after` parameter's description. */
const AFTER_DOC = [
  'Keyset paging: the `next` of the previous answer, or empty to start a walk at the first record.',
  'The answer then carries `next` (null after the last page).',
  'A cursor is tied to its list (a cursor of another list is a 400) and to orderBy, orderByDir, filter and search (400 otherwise),',
  'and cannot be combined with page > 1. As fast at any depth as on the first page.',
].join(' ');

export interface QueryParameterDoc {
  name: string;
  in: 'query';
  required: false;
  description: string;
  schema: Record<string, unknown>;
}

/**
 * The OpenAPI query parameters of a list, from the spec parseListQuery() validates with: the same
 * names, ranges and allowed values, so the document cannot promise what the server refuses.
 */
export function listQueryParameters(spec: ListSpec): QueryParameterDoc[] {
  const q = (name: string, description: string, schema: Record<string, unknown>): QueryParameterDoc => ({
    name,
    in: 'query',
    required: false,
    description,
    schema,
  });
  const sortable = Object.keys(spec.sortable);
  const params: QueryParameterDoc[] = [];
  if (spec.searchExpression) {
    params.push(q('search', 'Case-insensitive substring match; blank means no search.', { type: 'string', maxLength: MAX_SEARCH }));
  }
  params.push(
    q('page', '1-based page number.', { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: 1 }),
    q('limit', 'Records per page.', { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }),
    q('orderBy', 'Property to order by (ties are broken by id).', { type: 'string', enum: sortable, ...(sortable.includes('id') ? { default: 'id' } : {}) }),
    q('orderByDir', 'Order direction (case-insensitive).', { type: 'string', enum: ['asc', 'desc'], default: (spec.defaultOrderByDir ?? 'ASC').toLowerCase() }),
  );
  if (changedExpression(spec)) {
    params.push(q('modifiedSince', MODIFIED_SINCE_DOC, { type: 'string', format: 'date-time' }));
  }
  const registry = describeRegistry(spec.filterable ?? {});
  if (spec.filterable)
    params.push(
      q('filter', `${FILTER_SYNTAX_DOC} Filterable fields: ${registry || 'none'}${spec.dynamicFilterDoc ? `; ${spec.dynamicFilterDoc}` : ''}.`, {
        type: 'string',
        maxLength: FILTER_LIMITS.maxTextLength,
      }),
      q('after', AFTER_DOC, { type: 'string', maxLength: MAX_CURSOR }),
      q('count', 'false: do not count the matching records (`total` is then -1, and the answer carries `next`).', { type: 'boolean', default: true }),
    );
  if (spec.properties) {
    params.push(
      q(
        'fields',
        `Sparse records: a comma-separated list of the properties to answer (id is always answered): ${['id', ...spec.properties.filter((p) => p !== 'id')].join(', ')}${spec.dynamicFilterDoc ? '; fields.<alias> answers one custom value (inside `fields`), `fields` all of them' : ''}. Unknown names are a 400.`,
        { type: 'string', maxLength: 2000 },
      ),
    );
  }
  for (const [name, f] of Object.entries(spec.filters ?? {})) {
    if (f.type === 'boolean') params.push(q(name, `Exact-match filter on ${name}: true, false, 1 or 0.`, { type: 'boolean' }));
    else if (f.type === 'int') params.push(q(name, `Exact-match filter on ${name}.`, { type: 'integer', minimum: 1, maximum: 2147483647 }));
    else if (f.values) params.push(q(name, `Exact-match filter on ${name}.`, { type: 'string', enum: [...f.values] }));
    else params.push(q(name, `Exact-match filter on ${name}.`, { type: 'string', maxLength: f.maxLength ?? 200 }));
  }
  return params;
}

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
    description: `A filter: a condition, or {"and":[...]}, {"or":[...]}, {"not":{...}}. At most ${FILTER_LIMITS.maxDepth} nested groups, ${FILTER_LIMITS.maxConditions} conditions, ${FILTER_LIMITS.maxListValues} values in a list, ${FILTER_LIMITS.maxValueLength} characters a value. Strings: eq/neq/in/nin exact, contains/startsWith/endsWith case-insensitive. Date-times: ISO 8601 with an offset, or now, now-7d, now+2h (s, m, h, d, w, M, y).`,
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
