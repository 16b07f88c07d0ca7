/**
 * The one implementation of list parameters (decisions §3): search, page, limit, orderBy,
 * orderByDir and a resource's exact-match filters. Resources declare a ListSpec; nothing else
 * parses these parameters.
 */
import type { DataSource, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { parseIsoWithOffset } from './dates.js';
import { AppError, type ErrorDetail } from './errors.js';
import { parseId } from './id.pipe.js';

export const DEFAULT_LIMIT = 30;
export const MAX_LIMIT = 200;
const MAX_PAGE = 1_000_000;
const MAX_SEARCH = 200;

export type FilterSpec =
  { type: 'string'; column: string; values?: readonly string[]; maxLength?: number } | { type: 'boolean'; column: string } | { type: 'int'; column: string };

export interface ListSpec {
  /** API property name → SQL expression to order by (qualified with the query's alias). */
  sortable: Record<string, string>;
  /**
   * SQL expression (lower-cased text) that `search` matches as a substring, ideally with a
   * trigram index on exactly this expression. Omit for resources without search.
   */
  searchExpression?: string;
  /** Extra exact-match filters by query parameter name. */
  filters?: Record<string, FilterSpec>;
  /** Column that breaks ties so pages never overlap; default `<alias>.id`. */
  idColumn?: string;
  /**
   * A table whose exact size the row_counts triggers keep (see the row-counts migration): an
   * unfiltered, unscoped list reads its total from there instead of counting every row.
   */
  countTable?: string;
  /**
   * SQL expression of a record's last change time, which `modifiedSince` compares with (issue 13,
   * incremental sync). Default: COALESCE of the columns behind the sortable modifiedAt (or
   * dateModified) and createdAt (or dateAdded), so a record never changed since its creation counts
   * as changed when it was created. A list without those columns takes no modifiedSince.
   */
  changedExpression?: string;
}

/** The expression `modifiedSince` compares with, or null when the list has no audit timestamps. */
export function changedExpression(spec: ListSpec): string | null {
  if (spec.changedExpression) return spec.changedExpression;
  const modified = spec.sortable.modifiedAt ?? spec.sortable.dateModified;
  const created = spec.sortable.createdAt ?? spec.sortable.dateAdded;
  if (!modified || !created) return null;
  return `COALESCE(${modified}, ${created})`;
}

export interface ListQuery {
  page: number;
  limit: number;
  offset: number;
  orderBy: string;
  orderByDir: 'ASC' | 'DESC';
  search: string | null;
  filters: Record<string, string | number | boolean>;
  /** Only records changed (or created) at or after this time. */
  modifiedSince: Date | null;
}

const BASE_PARAMS = ['search', 'page', 'limit', 'orderBy', 'orderByDir'];

function single(query: Record<string, unknown>, name: string, errors: ErrorDetail[]): string | undefined {
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
export function parseListQuery(query: Record<string, unknown>, spec: ListSpec): ListQuery {
  const errors: ErrorDetail[] = [];
  const filterNames = Object.keys(spec.filters ?? {});
  const changed = changedExpression(spec);
  const allowed = new Set([...BASE_PARAMS, ...(changed ? ['modifiedSince'] : []), ...filterNames]);
  for (const key of Object.keys(query)) {
    if (!allowed.has(key)) {
      errors.push({ field: key, message: `is not a known parameter; allowed: ${[...allowed].join(', ')}` });
    }
  }
  const page = positiveInt(single(query, 'page', errors), 'page', 1, MAX_PAGE, 1, errors);
  const limit = positiveInt(single(query, 'limit', errors), 'limit', 1, MAX_LIMIT, DEFAULT_LIMIT, errors);

  const orderByRaw = single(query, 'orderBy', errors);
  let orderBy = 'id';
  if (orderByRaw !== undefined && orderByRaw !== '') {
    if (!Object.prototype.hasOwnProperty.call(spec.sortable, orderByRaw)) {
      errors.push({ field: 'orderBy', message: `must be one of: ${Object.keys(spec.sortable).join(', ')}` });
    } else orderBy = orderByRaw;
  }
  const dirRaw = single(query, 'orderByDir', errors);
  let orderByDir: 'ASC' | 'DESC' = 'ASC';
  if (dirRaw !== undefined && dirRaw !== '') {
    const d = dirRaw.toLowerCase();
    if (d !== 'asc' && d !== 'desc') errors.push({ field: 'orderByDir', message: 'must be asc or desc' });
    else orderByDir = d === 'asc' ? 'ASC' : 'DESC';
  }

  let search: string | null = null;
  const searchRaw = single(query, 'search', errors);
  if (searchRaw !== undefined && searchRaw.trim() !== '') {
    if (!spec.searchExpression) errors.push({ field: 'search', message: 'is not supported on this list' });
    else if (searchRaw.length > MAX_SEARCH) errors.push({ field: 'search', message: `must be at most ${MAX_SEARCH} characters` });
    else if (searchRaw.includes('\u0000')) errors.push({ field: 'search', message: 'must not contain NUL characters' });
    else search = searchRaw.trim();
  }

  let modifiedSince: Date | null = null;
  const sinceRaw = changed ? single(query, 'modifiedSince', errors) : undefined;
  if (sinceRaw !== undefined && sinceRaw !== '') {
    modifiedSince = parseIsoWithOffset(sinceRaw.trim());
    if (!modifiedSince) errors.push({ field: 'modifiedSince', message: 'must be an ISO 8601 date-time with an offset, e.g. 2026-01-31T12:00:00Z' });
  }

  const filters: Record<string, string | number | boolean> = {};
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

  if (errors.length) {
    throw new AppError('validation_failed', `Invalid list parameters: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
  }
  return { page, limit, offset: (page - 1) * limit, orderBy, orderByDir, search, filters, modifiedSince };
}

/** Route metadata key of a list route's ListSpec (set by ApiListQuery in openapi.ts). */
export const LIST_SPEC_KEY = 'sf:list-spec';

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
    q('orderByDir', 'Order direction (case-insensitive).', { type: 'string', enum: ['asc', 'desc'], default: 'asc' }),
  );
  if (changedExpression(spec)) {
    params.push(
      q(
        'modifiedSince',
        'Incremental sync: only records created or changed at or after this time (ISO 8601 with an offset), by modifiedAt, or the creation time for records never changed. Deletions are in the event feed (GET /api/events).',
        { type: 'string', format: 'date-time' },
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

/** Escapes LIKE wildcards so a search is always a literal substring. */
export function likePattern(term: string): string {
  return '%' + term.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

/** Applies search and filters (not paging) to a query builder. */
export function applyListFilters<T extends ObjectLiteral>(qb: SelectQueryBuilder<T>, q: ListQuery, spec: ListSpec): SelectQueryBuilder<T> {
  if (q.search && spec.searchExpression) {
    qb.andWhere(`${spec.searchExpression} LIKE :__search`, { __search: likePattern(q.search) });
  }
  for (const [name, value] of Object.entries(q.filters)) {
    const f = spec.filters?.[name];
    // parseListQuery accepts only the filters the spec declares.
    if (!f) throw new Error(`list filter ${name} is not in the list spec`);
    qb.andWhere(`${f.column} = :__f_${name}`, { [`__f_${name}`]: value });
  }
  const changed = changedExpression(spec);
  if (q.modifiedSince && changed) qb.andWhere(`${changed} >= :__modifiedSince`, { __modifiedSince: q.modifiedSince });
  return qb;
}

/** The row count that the row_counts triggers keep for a table (bigint: pg answers it as a string). */
async function countedRows(dataSource: DataSource, table: string): Promise<number> {
  const rows: { n: string }[] = await dataSource.query(`SELECT coalesce(sum(n), 0)::bigint AS n FROM row_counts WHERE table_name = $1`, [table]);
  return Number(rows[0].n);
}

/**
 * Runs a list: filters, total count, ordered page. The order is the requested column, ties broken
 * by id in the same direction, so that pages never overlap.
 */
export async function paginate<T extends ObjectLiteral>(
  qb: SelectQueryBuilder<T>,
  q: ListQuery,
  spec: ListSpec,
  /**
   * scoped: the caller narrowed the query itself (so the table's row count is not the total);
   * scopeCount: the exact total of that scope when no search or filter applies, if the caller can
   * count it more cheaply than by counting the rows (e.g. a campaign's members).
   */
  opts: { scoped?: boolean; scopeCount?: () => Promise<number> } = {},
): Promise<{ total: number; items: T[] }> {
  applyListFilters(qb, q, spec);
  const idColumn = spec.idColumn ?? `${qb.alias}.id`;
  const unfiltered = !q.search && Object.keys(q.filters).length === 0 && !q.modifiedSince;
  const total =
    unfiltered && opts.scoped && opts.scopeCount
      ? await opts.scopeCount()
      : unfiltered && !opts.scoped && spec.countTable
        ? await countedRows(qb.dataSource, spec.countTable)
        : await qb.clone().orderBy().getCount();
  if (total === 0 || q.offset >= total) return { total, items: [] };
  const orderExpr = spec.sortable[q.orderBy] ?? idColumn;
  // Deferred join: the page's ids are found on their own (an index-only scan on the ordering index,
  // however deep the page) and only those rows are read, in the same statement.
  const pageQb = qb
    .clone()
    .select(idColumn)
    .orderBy(orderExpr, q.orderByDir, q.orderByDir === 'ASC' ? 'NULLS LAST' : 'NULLS FIRST');
  if (orderExpr !== idColumn) pageQb.addOrderBy(idColumn, q.orderByDir);
  pageQb.offset(q.offset).limit(q.limit);
  qb.andWhere(`${idColumn} IN (${pageQb.getQuery()})`).setParameters(pageQb.getParameters());
  qb.orderBy(orderExpr, q.orderByDir, q.orderByDir === 'ASC' ? 'NULLS LAST' : 'NULLS FIRST');
  if (orderExpr !== idColumn) qb.addOrderBy(idColumn, q.orderByDir);
  const items = await qb.getMany();
  return { total, items };
}

/**
 * The `[rows, rowCount]` that TypeORM's `query()` answers for an UPDATE or DELETE (other statements
 * answer the rows alone), as named parts.
 */
export function rowsAndCount(result: unknown): { rows: Record<string, unknown>[]; count: number } {
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') {
    return { rows: result[0] as Record<string, unknown>[], count: result[1] };
  }
  throw new Error('expected the [rows, rowCount] result of an UPDATE or DELETE');
}
