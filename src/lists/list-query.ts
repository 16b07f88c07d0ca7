/**
 * The one reader of list parameters: search, page, limit, orderBy, orderByDir, modifiedSince, a
 * resource's exact-match filters, and on lists with filterable fields filter, after, count and fields.
 * Every problem is collected and reported at once as a 400.
 */
import { createHash } from 'node:crypto';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, type ErrorDetail } from '../common/errors.js';
import { parseId } from '../common/id.pipe.js';
import { decodeCursor } from './cursor.js';
import { compileFilter, filterProblems } from './filter-sql.js';
import { changedExpression, DEFAULT_LIMIT, type ListExtras, type ListQuery, type ListSpec, MAX_LIMIT, MAX_PAGE, MAX_SEARCH } from './list-spec.js';

const BASE_PARAMS = ['search', 'page', 'limit', 'orderBy', 'orderByDir'];
/** Taken by lists that declare `filterable` (every list of the API; see ListSpec). */
const NEW_PARAMS = ['filter', 'after', 'count'];
const MAX_FIELDS = 100;

type Query = Record<string, unknown>;

function single(query: Query, name: string, errors: ErrorDetail[]): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') {
    errors.push({ field: name, message: 'must be given once, as a plain value' });
    return undefined;
  }
  return v;
}

function positiveInt(raw: string | undefined, name: string, min: number, max: number, fallback: number, errors: ErrorDetail[]): number {
  if (raw === undefined) return fallback;
  if (!/^\d{1,10}$/.test(raw.trim()) || Number(raw) < min || Number(raw) > max) {
    errors.push({ field: name, message: `must be a whole number from ${min} to ${max}` });
    return fallback;
  }
  return Number(raw);
}

export function parseBoolean(raw: string): boolean | null {
  const v = raw.trim().toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return null;
}

/** Validates the query string against the spec; every problem is reported at once as a 400. */
export function parseListQuery(query: Query, spec: ListSpec, extras: ListExtras = {}): ListQuery {
  const errors: ErrorDetail[] = [];
  const changed = changedExpression(spec);
  refuseUnknownParams(query, spec, changed !== null, errors);
  const page = positiveInt(single(query, 'page', errors), 'page', 1, MAX_PAGE, 1, errors);
  const limit = positiveInt(single(query, 'limit', errors), 'limit', 1, MAX_LIMIT, DEFAULT_LIMIT, errors);
  const { orderBy, orderByDir } = readOrder(query, spec, errors);
  const search = readSearch(query, spec, errors);
  const modifiedSince = changed ? readModifiedSince(query, errors) : null;
  const filters = readExactFilters(query, spec, errors);

  const out: ListQuery = { page, limit, offset: (page - 1) * limit, orderBy, orderByDir, search, filters, modifiedSince };
  const filterNode = readFilter(query, spec, extras, out, errors);
  readCount(query, spec, out, errors);
  readFields(query, spec, extras, out, errors);
  readAfter(query, spec, filterNode, out, errors);

  if (errors.length) {
    throw new AppError('validation_failed', `Invalid list parameters: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
  }
  return out;
}

function refuseUnknownParams(query: Query, spec: ListSpec, hasModifiedSince: boolean, errors: ErrorDetail[]): void {
  const allowed = new Set([
    ...BASE_PARAMS,
    ...(spec.filterable ? NEW_PARAMS : []),
    ...(spec.properties ? ['fields'] : []),
    ...(hasModifiedSince ? ['modifiedSince'] : []),
    ...Object.keys(spec.filters ?? {}),
  ]);
  for (const key of Object.keys(query)) {
    if (!allowed.has(key)) {
      errors.push({ field: key, message: `is not a known parameter; allowed: ${[...allowed].join(', ')}` });
    }
  }
}

function readOrder(query: Query, spec: ListSpec, errors: ErrorDetail[]): Pick<ListQuery, 'orderBy' | 'orderByDir'> {
  const orderByRaw = single(query, 'orderBy', errors);
  let orderBy = 'id';
  if (orderByRaw !== undefined && orderByRaw !== '') {
    if (!Object.prototype.hasOwnProperty.call(spec.sortable, orderByRaw)) {
      errors.push({ field: 'orderBy', message: `must be one of: ${Object.keys(spec.sortable).join(', ')}` });
    } else orderBy = orderByRaw;
  }
  const dirRaw = single(query, 'orderByDir', errors);
  let orderByDir: 'ASC' | 'DESC' = spec.defaultOrderByDir ?? 'ASC';
  if (dirRaw !== undefined && dirRaw !== '') {
    const d = dirRaw.toLowerCase();
    if (d !== 'asc' && d !== 'desc') errors.push({ field: 'orderByDir', message: 'must be asc or desc' });
    else orderByDir = d === 'asc' ? 'ASC' : 'DESC';
  }
  return { orderBy, orderByDir };
}

function readSearch(query: Query, spec: ListSpec, errors: ErrorDetail[]): string | null {
  const searchRaw = single(query, 'search', errors);
  if (searchRaw === undefined || searchRaw.trim() === '') return null;
  if (!spec.searchExpression) errors.push({ field: 'search', message: 'is not supported on this list' });
  else if (searchRaw.length > MAX_SEARCH) errors.push({ field: 'search', message: `must be at most ${MAX_SEARCH} characters` });
  else if (searchRaw.includes('\u0000')) errors.push({ field: 'search', message: 'must not contain NUL characters' });
  else return searchRaw.trim();
  return null;
}

function readModifiedSince(query: Query, errors: ErrorDetail[]): Date | null {
  const sinceRaw = single(query, 'modifiedSince', errors);
  if (sinceRaw === undefined || sinceRaw === '') return null;
  const modifiedSince = parseIsoWithOffset(sinceRaw.trim());
  if (!modifiedSince) errors.push({ field: 'modifiedSince', message: 'must be an ISO 8601 date-time with an offset, e.g. 2026-01-31T12:00:00Z' });
  return modifiedSince;
}

function readExactFilters(query: Query, spec: ListSpec, errors: ErrorDetail[]): ListQuery['filters'] {
  const filters: ListQuery['filters'] = {};
  for (const [name, f] of Object.entries(spec.filters ?? {})) {
    const raw = single(query, name, errors);
    if (raw === undefined || raw === '') continue;
    if (f.type === 'boolean') {
      const b = parseBoolean(raw);
      if (b === null) errors.push({ field: name, message: 'must be true, false, 1 or 0' });
      else filters[name] = b;
    } else if (f.type === 'int') {
      // Integer filters name records (ids): the same 1..2147483647 rule as path ids.
      const id = parseId(raw);
      if (id === null) errors.push({ field: name, message: 'must be a positive whole number (an id from 1 to 2147483647)' });
      else filters[name] = id;
    } else {
      if (f.values && !f.values.includes(raw)) errors.push({ field: name, message: `must be one of: ${f.values.join(', ')}` });
      else if (raw.length > (f.maxLength ?? 200) || raw.includes('\u0000')) errors.push({ field: name, message: 'is too long or malformed' });
      else filters[name] = raw;
    }
  }
  return filters;
}

/**
 * filter: text (query string, either form) or, from a POST /search body, the JSON object. Sets
 * out.filter and answers the parsed tree (which the cursor binding hashes), or undefined.
 */
function readFilter(query: Query, spec: ListSpec, extras: ListExtras, out: ListQuery, errors: ErrorDetail[]): unknown {
  const filterRaw = spec.filterable ? query.filter : undefined;
  if (filterRaw === undefined || filterRaw === '') return undefined;
  if (typeof filterRaw !== 'string' && (typeof filterRaw !== 'object' || filterRaw === null || Array.isArray(filterRaw))) {
    errors.push({ field: 'filter', message: 'must be given once: a filter text, or in a JSON body an object' });
    return undefined;
  }
  try {
    const { node, compiled } = compileFilter(filterRaw, { ...(spec.filterable ?? {}), ...(extras.filterable ?? {}) }, extras.now);
    out.filter = compiled;
    return node;
  } catch (e) {
    const problems = filterProblems(e);
    if (!problems) throw e;
    errors.push(...problems.slice(0, 20));
    return undefined;
  }
}

function readCount(query: Query, spec: ListSpec, out: ListQuery, errors: ErrorDetail[]): void {
  const countRaw = spec.filterable ? single(query, 'count', errors) : undefined;
  if (countRaw === undefined || countRaw === '') return;
  const b = parseBoolean(countRaw);
  if (b === null) errors.push({ field: 'count', message: 'must be true, false, 1 or 0' });
  else if (!b) out.count = false;
}

function readFields(query: Query, spec: ListSpec, extras: ListExtras, out: ListQuery, errors: ErrorDetail[]): void {
  const fieldsRaw = spec.properties ? single(query, 'fields', errors) : undefined;
  if (fieldsRaw === undefined || fieldsRaw.trim() === '') return;
  const allowedFields = ['id', ...(spec.properties ?? []).filter((p) => p !== 'id'), ...(extras.properties ?? [])];
  const names = [...new Set(fieldsRaw.split(',').map((n) => n.trim()))].filter((n) => n !== '');
  if (names.length > MAX_FIELDS) {
    errors.push({ field: 'fields', message: `must name at most ${MAX_FIELDS} properties` });
    return;
  }
  const unknown = names.filter((n) => !allowedFields.includes(n));
  if (unknown.length) {
    errors.push({
      field: 'fields',
      message: `${unknown.map((n) => JSON.stringify(n.slice(0, 60))).join(', ')} ${unknown.length === 1 ? 'is not a property' : 'are not properties'} of this list; allowed: ${allowedFields.join(', ')}`,
    });
  } else out.fields = names;
}

/**
 * after (keyset paging) and, with it or with count=false, the binding every cursor of this query
 * carries: a hash of its list, order, filter and search.
 */
function readAfter(query: Query, spec: ListSpec, filterNode: unknown, out: ListQuery, errors: ErrorDetail[]): void {
  const afterRaw = spec.filterable ? single(query, 'after', errors) : undefined;
  if (afterRaw !== undefined || out.count === false) {
    const { orderBy, orderByDir, search, filters, modifiedSince } = out;
    out.binding = createHash('sha256')
      .update(JSON.stringify([spec.name, orderBy, orderByDir, filterNode ?? null, search, filters, modifiedSince?.toISOString() ?? null]))
      .digest('base64url')
      .slice(0, 16);
    out.list = spec.name;
  }
  if (afterRaw === undefined) return;
  if (out.page > 1) errors.push({ field: 'after', message: 'cannot be combined with page > 1: a cursor walk pages with after and next only' });
  else if (afterRaw.trim() === '') out.after = null;
  else {
    const pos = decodeCursor(afterRaw.trim(), spec.name, out.binding ?? '');
    if (typeof pos === 'string') errors.push({ field: 'after', message: pos });
    else out.after = pos;
  }
}
