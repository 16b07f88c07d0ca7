/**
 * The one implementation of list parameters (decisions §3): search, page, limit, orderBy,
 * orderByDir and a resource's exact-match filters. Resources declare a ListSpec; nothing else
 * parses these parameters.
 */
import { createHash } from 'node:crypto';
import type { DataSource, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, type ErrorDetail } from '../common/errors.js';
import { type CompiledFilter, compileFilter, describeRegistry, FILTER_LIMITS, type FilterRegistry, filterProblems } from './filter.js';
import { parseId } from '../common/id.pipe.js';
import { poolOf, prepared } from '../database/transactions.js';

export const DEFAULT_LIMIT = 30;
export const MAX_LIMIT = 200;
const MAX_PAGE = 1_000_000;
const MAX_SEARCH = 200;

export type FilterSpec =
  { type: 'string'; column: string; values?: readonly string[]; maxLength?: number } | { type: 'boolean'; column: string } | { type: 'int'; column: string };

export interface ListSpec {
  /**
   * The list's name (`contacts`, `deals`, `account tokens`; a scoped list names its scope, e.g.
   * `campaign 5 contacts`): every cursor carries it, and a cursor of another list is a 400.
   */
  name: string;
  /** API property name → SQL expression to order by (qualified with the query's alias). */
  sortable: Record<string, string>;
  /**
   * SQL expression (lower-cased text) that `search` matches as a substring, ideally with a
   * trigram index on exactly this expression. Omit for resources without search.
   */
  searchExpression?: string;
  /** Extra exact-match filters by query parameter name. */
  filters?: Record<string, FilterSpec>;
  /** orderByDir when the request names none; default ASC (a log such as webhook deliveries: DESC, newest first). */
  defaultOrderByDir?: 'ASC' | 'DESC';
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
  /**
   * The fields `filter` takes (issue 14): API name → type and SQL expression. Adding a filterable
   * field (e.g. `company.id`, `segment.id`) is one more entry here.
   */
  filterable?: FilterRegistry;
  /** Top-level properties of the list's records, which `fields=` may select (id is always answered). */
  properties?: readonly string[];
  /**
   * Text for the OpenAPI document about fields the service adds at request time (contacts:
   * `fields.<alias>` of each published custom field).
   */
  dynamicFilterDoc?: string;
}

/** What a service adds to its spec at request time (contacts: a filter field and a `fields=` name per custom field). */
export interface ListExtras {
  filterable?: FilterRegistry;
  /** Extra names `fields=` takes, e.g. `fields.plan`. */
  properties?: readonly string[];
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
  /** The compiled `filter` (absent: none). */
  filter?: CompiledFilter;
  /**
   * Keyset paging (`after`): null to start a walk from the first record (`after=` empty), or the
   * position after which the page starts. Absent: offset paging only, and no `next` in the answer.
   */
  after?: CursorPosition | null;
  /** The value every cursor of this query carries: a hash of its list, order, filter and search. */
  binding?: string;
  /** The list's name (ListSpec.name), which every cursor of this query carries. */
  list?: string;
  /** false: `count=false`, the total is not counted (answered as -1). */
  count?: boolean;
  /** `fields=`: the properties to answer (id always), or absent for all. */
  fields?: readonly string[];
}

/** Where a cursor page starts: the sort key (as PostgreSQL's text of it, null for a NULL key) and the id. */
export interface CursorPosition {
  key: string | null;
  id: number;
}

const BASE_PARAMS = ['search', 'page', 'limit', 'orderBy', 'orderByDir'];
/** Taken by lists that declare `filterable` (every list of the API; see ListSpec). */
const NEW_PARAMS = ['filter', 'after', 'count'];
const MAX_FIELDS = 100;
const MAX_CURSOR = 4096;

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
export function parseListQuery(query: Record<string, unknown>, spec: ListSpec, extras: ListExtras = {}): ListQuery {
  const errors: ErrorDetail[] = [];
  const filterNames = Object.keys(spec.filters ?? {});
  const changed = changedExpression(spec);
  const allowed = new Set([
    ...BASE_PARAMS,
    ...(spec.filterable ? NEW_PARAMS : []),
    ...(spec.properties ? ['fields'] : []),
    ...(changed ? ['modifiedSince'] : []),
    ...filterNames,
  ]);
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
  let orderByDir: 'ASC' | 'DESC' = spec.defaultOrderByDir ?? 'ASC';
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

  const out: ListQuery = { page, limit, offset: (page - 1) * limit, orderBy, orderByDir, search, filters, modifiedSince };

  // filter: text (query string, either form) or, from a POST /search body, the JSON object.
  let filterNode: unknown = undefined;
  const filterRaw = spec.filterable ? query.filter : undefined;
  if (filterRaw !== undefined && filterRaw !== '') {
    if (typeof filterRaw !== 'string' && (typeof filterRaw !== 'object' || filterRaw === null || Array.isArray(filterRaw))) {
      errors.push({ field: 'filter', message: 'must be given once: a filter text, or in a JSON body an object' });
    } else {
      try {
        const { node, compiled } = compileFilter(filterRaw, { ...(spec.filterable ?? {}), ...(extras.filterable ?? {}) });
        out.filter = compiled;
        filterNode = node;
      } catch (e) {
        const problems = filterProblems(e);
        if (!problems) throw e;
        errors.push(...problems.slice(0, 20));
      }
    }
  }

  const countRaw = spec.filterable ? single(query, 'count', errors) : undefined;
  if (countRaw !== undefined && countRaw !== '') {
    const b = parseBoolean(countRaw);
    if (b === null) errors.push({ field: 'count', message: 'must be true, false, 1 or 0' });
    else if (!b) out.count = false;
  }

  const fieldsRaw = spec.properties ? single(query, 'fields', errors) : undefined;
  if (fieldsRaw !== undefined && fieldsRaw.trim() !== '') {
    const allowedFields = ['id', ...(spec.properties ?? []).filter((p) => p !== 'id'), ...(extras.properties ?? [])];
    const names = [...new Set(fieldsRaw.split(',').map((n) => n.trim()))].filter((n) => n !== '');
    if (names.length > MAX_FIELDS) errors.push({ field: 'fields', message: `must name at most ${MAX_FIELDS} properties` });
    else {
      const unknown = names.filter((n) => !allowedFields.includes(n));
      if (unknown.length) {
        errors.push({
          field: 'fields',
          message: `${unknown.map((n) => JSON.stringify(n.slice(0, 60))).join(', ')} ${unknown.length === 1 ? 'is not a property' : 'are not properties'} of this list; allowed: ${allowedFields.join(', ')}`,
        });
      } else out.fields = names;
    }
  }

  const afterRaw = spec.filterable ? single(query, 'after', errors) : undefined;
  if (afterRaw !== undefined || out.count === false) {
    out.binding = createHash('sha256')
      .update(JSON.stringify([spec.name, orderBy, orderByDir, filterNode ?? null, search, filters, modifiedSince?.toISOString() ?? null]))
      .digest('base64url')
      .slice(0, 16);
    out.list = spec.name;
  }
  if (afterRaw !== undefined) {
    if (page > 1) errors.push({ field: 'after', message: 'cannot be combined with page > 1: a cursor walk pages with after and next only' });
    else if (afterRaw.trim() === '') out.after = null;
    else {
      const pos = decodeCursor(afterRaw.trim(), spec.name, out.binding ?? '');
      if (typeof pos === 'string') errors.push({ field: 'after', message: pos });
      else out.after = pos;
    }
  }

  if (errors.length) {
    throw new AppError('validation_failed', `Invalid list parameters: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
  }
  return out;
}

/** A cursor: base64url of JSON [list, binding, key, id]; the list's name, so that one list refuses another's cursor by name. */
export function encodeCursor(list: string, binding: string, pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([list, binding, pos.key, pos.id])).toString('base64url');
}

/** The position a cursor of the list `list` names, or why it is refused. */
function decodeCursor(raw: string, list: string, binding: string): CursorPosition | string {
  const bad = 'is not a cursor of this list (use the `next` of a previous answer, or an empty after= to start)';
  if (raw.length > MAX_CURSOR || !/^[A-Za-z0-9_-]+$/.test(raw)) return bad;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    return bad;
  }
  if (!Array.isArray(parsed) || parsed.length !== 4) return bad;
  const [l, b, key, id] = parsed as unknown[];
  if (
    typeof l !== 'string' ||
    typeof b !== 'string' ||
    (key !== null && typeof key !== 'string') ||
    typeof id !== 'number' ||
    !Number.isInteger(id) ||
    id < 0 ||
    id > 2147483647
  )
    return bad;
  if (typeof key === 'string' && (key.length > 1000 || key.includes('\u0000'))) return bad;
  if (l !== list) {
    const from = /^[a-z0-9 ]{1,100}$/i.test(l) ? `the ${l} list` : 'another list';
    return `is a cursor of ${from}, not of the ${list} list: a cursor continues only the walk it came from (start this list with an empty after=)`;
  }
  if (b !== binding) return 'was made for another orderBy, orderByDir, filter or search: a cursor continues only the walk it came from';
  return { key, id };
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
    q('orderByDir', 'Order direction (case-insensitive).', { type: 'string', enum: ['asc', 'desc'], default: (spec.defaultOrderByDir ?? 'ASC').toLowerCase() }),
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
  const registry = describeRegistry(spec.filterable ?? {});
  if (spec.filterable)
    params.push(
      q(
        'filter',
        `Structured filter (issue 14), in the query-string form \`field[op]:value\` combined with and(...), or(...), not(...) (a top-level comma list is an and), or as JSON (text starting with {, the FilterNode schema). Values with , ( ) [ ] " or outer spaces are double-quoted with backslash escapes (\\" and \\\\); lists for in, nin and between are [a,b]; isEmpty and isNotEmpty take no value. Date-times take ISO 8601 with an offset or now, now-7d, now+2h (units s, m, h, d, w, M, y). At most ${FILTER_LIMITS.maxDepth} nested groups, ${FILTER_LIMITS.maxConditions} conditions, ${FILTER_LIMITS.maxListValues} list values, ${FILTER_LIMITS.maxValueLength} characters a value. Example: and(createdAt[gte]:now-7d,or(name[startsWith]:ada,email[endsWith]:"@example.com")). Filterable fields: ${registry || 'none'}${spec.dynamicFilterDoc ? `; ${spec.dynamicFilterDoc}` : ''}.`,
        { type: 'string', maxLength: FILTER_LIMITS.maxTextLength },
      ),
      q(
        'after',
        'Keyset paging: the `next` of the previous answer, or empty to start a walk at the first record. The answer then carries `next` (null after the last page). A cursor is tied to its list (a cursor of another list is a 400) and to orderBy, orderByDir, filter and search (400 otherwise), and cannot be combined with page > 1. As fast at any depth as on the first page.',
        { type: 'string', maxLength: MAX_CURSOR },
      ),
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

/** Escapes LIKE wildcards so a search is always a literal substring. */
export function likePattern(term: string): string {
  return '%' + term.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

/** Applies search and filters (not paging) to a query builder. */
export function applyListFilters<T extends ObjectLiteral>(qb: SelectQueryBuilder<T>, q: ListQuery, spec: ListSpec): SelectQueryBuilder<T> {
  if (q.filter) qb.andWhere(q.filter.sql, q.filter.params);
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

const COUNTED_ROWS = prepared(`SELECT coalesce(sum(n), 0)::bigint AS n FROM row_counts WHERE table_name = $1`);

/** The row count that the row_counts triggers keep for a table (bigint: pg answers it as a string). */
async function countedRows(dataSource: DataSource, table: string): Promise<number> {
  const rows: { n: string }[] = await poolOf(dataSource).query(COUNTED_ROWS, [table]);
  return Number(rows[0].n);
}

/** One page of a list: the total (-1 when not counted), the records, and the next cursor when keyset paging. */
export interface ListPage<T> {
  total: number;
  items: T[];
  /** The cursor of the page after this one (null: this is the last), when the query pages by cursor. */
  next?: string | null;
}

/**
 * Reads a page's records in one statement of the caller's own SQL (its record columns and read joins)
 * instead of TypeORM's entity hydration: `where` selects the page's rows by id (a subquery of the
 * filtered, ordered, limited ids, or an id list) with its positional `params`, `order` orders them;
 * with `page`, the statement ends in `LIMIT page.limit OFFSET page.offset` (integers).
 */
export type PageLoader<R> = (where: string, params: unknown[], order: string, page?: { limit: number; offset: number }) => Promise<R[]>;

/**
 * Up to this offset a page of a whole table in id order is read directly (the primary key's index in
 * order, LIMIT and OFFSET on the rows): cheaper for PostgreSQL to plan and run than finding the page's
 * ids first, which pays off only deeper, where the skipped rows would be read in full.
 */
const DIRECT_PAGE_MAX_OFFSET = 1_000;

/**
 * Runs a list: filters, total count, ordered page. The order is the requested column, ties broken
 * by id in the same direction, so that pages never overlap. NULL sort keys come last ascending and
 * first descending (PostgreSQL's default: NULL is greater than every value).
 */
export async function paginate<T extends ObjectLiteral, R = T>(
  qb: SelectQueryBuilder<T>,
  q: ListQuery,
  spec: ListSpec,
  /**
   * scoped: the caller narrowed the query itself (so the table's row count is not the total);
   * scopeCount: the exact total of that scope when no search or filter applies, if the caller can
   * count it more cheaply than by counting the rows (e.g. a campaign's members);
   * load: reads the page's records with the caller's SQL (without it, TypeORM entities, as R = T).
   */
  opts: { scoped?: boolean; scopeCount?: () => Promise<number>; load?: PageLoader<R> } = {},
): Promise<ListPage<R>> {
  applyListFilters(qb, q, spec);
  const idColumn = spec.idColumn ?? `${qb.alias}.id`;
  const unfiltered = !q.search && Object.keys(q.filters).length === 0 && !q.modifiedSince && !q.filter;
  const counted = q.count !== false;
  const orderExpr = spec.sortable[q.orderBy] ?? idColumn;
  if (counted && q.after === undefined && !(unfiltered && (opts.scoped ? opts.scopeCount : spec.countTable))) {
    const small = await smallResultPage(qb, q, orderExpr, idColumn, opts.load);
    if (small) return small;
  }
  const total = !counted
    ? -1
    : unfiltered && opts.scoped && opts.scopeCount
      ? await opts.scopeCount()
      : unfiltered && !opts.scoped && spec.countTable
        ? await countedRows(qb.dataSource, spec.countTable)
        : await qb.clone().orderBy().getCount();
  const nulls = q.orderByDir === 'ASC' ? 'NULLS LAST' : 'NULLS FIRST';
  if (q.after !== undefined || !counted) return keysetPage(qb, q, orderExpr, idColumn, total, opts.load);
  if (total === 0 || q.offset >= total) return { total, items: [] };
  // Deferred join: the page's ids are found on their own (an index-only scan on the ordering index,
  // however deep the page) and only those rows are read, in the same statement.
  const pageQb = qb.clone().select(idColumn).orderBy(orderExpr, q.orderByDir, nulls);
  if (orderExpr !== idColumn) pageQb.addOrderBy(idColumn, q.orderByDir);
  pageQb.offset(q.offset).limit(q.limit);
  if (opts.load) {
    const order = orderClause(orderExpr, idColumn, q.orderByDir);
    if (orderExpr === idColumn && q.offset <= DIRECT_PAGE_MAX_OFFSET && qb.expressionMap.wheres.length === 0) {
      return { total, items: await opts.load('TRUE', [], order, { limit: q.limit, offset: q.offset }) };
    }
    const [sql, params] = pageQb.getQueryAndParameters();
    // An array of the page's ids rather than IN (subquery): one table and an init plan, which PostgreSQL plans faster than a semi-join.
    return { total, items: await opts.load(`${idColumn} = ANY(ARRAY(${sql}))`, params, order) };
  }
  qb.andWhere(`${idColumn} IN (${pageQb.getQuery()})`).setParameters(pageQb.getParameters());
  qb.orderBy(orderExpr, q.orderByDir, nulls);
  if (orderExpr !== idColumn) qb.addOrderBy(idColumn, q.orderByDir);
  const items = (await qb.getMany()) as unknown as R[];
  return { total, items };
}

/**
 * A counted list whose total has to be counted (a search, a filter, a scope without a cheaper count)
 * matches few rows far more often than many. Up to SMALL_RESULT matching rows are read once, with
 * their sort keys: the total and the page's ids both come from that one scan, where counting and
 * paging separately scan the matches twice (bench row "search company …": two trigram index scans
 * per request, each about 25 ms at a million contacts). Null when more rows match: the caller then
 * counts and pages as before, which is cheaper than sorting a large result.
 */
const SMALL_RESULT = 10_000;

async function smallResultPage<T extends ObjectLiteral, R>(
  qb: SelectQueryBuilder<T>,
  q: ListQuery,
  orderExpr: string,
  idColumn: string,
  load: PageLoader<R> | undefined,
): Promise<ListPage<R> | null> {
  const byId = orderExpr === idColumn;
  const matchesQb = qb.clone().select(idColumn, '__id');
  if (!byId) matchesQb.addSelect(orderExpr, '__k');
  const [matches, params]: [string, unknown[]] = matchesQb
    .orderBy()
    .limit(SMALL_RESULT + 1)
    .getQueryAndParameters();
  const n = params.length;
  const rows: { __id: number | string; __n: string }[] = await qb.dataSource.query(
    `WITH m AS MATERIALIZED (${matches})
     SELECT __id, (SELECT count(*) FROM m) AS __n FROM m ORDER BY ${orderClause(byId ? '__id' : '__k', '__id', q.orderByDir)} LIMIT $${n + 1} OFFSET $${n + 2}`,
    [...params, q.limit, q.offset],
  );
  if (!rows.length) {
    if (q.offset === 0) return { total: 0, items: [] };
    return null; // past the end: the caller counts
  }
  const total = Number(rows[0].__n);
  if (total > SMALL_RESULT) return null;
  const pageIds = rows.map((r) => Number(r.__id));
  const order = orderClause(orderExpr, idColumn, q.orderByDir);
  if (load) return { total, items: await load(`${idColumn} = ANY($1)`, [pageIds], order) };
  const pageQb = qb.clone().andWhere(`${idColumn} = ANY(:__pageIds)`, { __pageIds: pageIds });
  pageQb.orderBy(orderExpr, q.orderByDir, q.orderByDir === 'ASC' ? 'NULLS LAST' : 'NULLS FIRST');
  if (orderExpr !== idColumn) pageQb.addOrderBy(idColumn, q.orderByDir);
  return { total, items: (await pageQb.getMany()) as unknown as R[] };
}

/** ORDER BY of a page's rows: the sort key (NULLs last ascending, first descending), then the id. */
function orderClause(orderExpr: string, idColumn: string, dir: 'ASC' | 'DESC'): string {
  const key = `${orderExpr} ${dir} ${dir === 'ASC' ? 'NULLS LAST' : 'NULLS FIRST'}`;
  return orderExpr === idColumn ? key : `${key}, ${idColumn} ${dir}`;
}

/**
 * A keyset page: the ids after the cursor's (sort key, id), read with a row comparison that the
 * (sort column, id) index answers directly, so a page deep in the list costs what the first does.
 * NULL keys sort as greater than every value, so the walk reads the non-NULL keys and the NULL keys
 * as two index ranges: ascending, the values then the NULLs; descending, the NULLs then the values.
 */
async function keysetPage<T extends ObjectLiteral, R>(
  qb: SelectQueryBuilder<T>,
  q: ListQuery,
  orderExpr: string,
  idColumn: string,
  total: number,
  load: PageLoader<R> | undefined,
): Promise<ListPage<R>> {
  const want = q.limit + 1;
  const asc = q.orderByDir === 'ASC';
  const byId = orderExpr === idColumn;
  const cmp = asc ? '>' : '<';
  type KeyRow = { id: number; k: string | null };
  const read = async (where: string | null, params: Record<string, unknown>, order: 'full' | 'id' | 'values', n: number, offset = 0): Promise<KeyRow[]> => {
    const idsQb = qb
      .clone()
      .select(idColumn, '__id')
      .addSelect(byId ? 'NULL::text' : `(${orderExpr})::text`, '__k');
    if (where) idsQb.andWhere(where, params);
    if (order === 'id') idsQb.orderBy(idColumn, q.orderByDir);
    else {
      idsQb.orderBy(orderExpr, q.orderByDir, order === 'full' ? (asc ? 'NULLS LAST' : 'NULLS FIRST') : undefined);
      if (!byId) idsQb.addOrderBy(idColumn, q.orderByDir);
    }
    if (offset) idsQb.offset(offset);
    const rows: { __id: number | string; __k: string | null }[] = await idsQb.limit(n).getRawMany();
    return rows.map((r) => ({ id: Number(r.__id), k: r.__k }));
  };
  let keys: KeyRow[];
  const pos = q.after ?? null;
  // No cursor: the first page of a walk, or with count=false the page `page` (its offset).
  if (!pos) keys = await read(null, {}, 'full', want, q.offset);
  else if (byId) keys = await read(`${idColumn} ${cmp} :__afterId`, { __afterId: pos.id }, 'id', want);
  else if (asc && pos.key !== null) {
    keys = await read(`(${orderExpr}, ${idColumn}) > (:__afterKey, :__afterId)`, { __afterKey: pos.key, __afterId: pos.id }, 'values', want);
    if (keys.length < want) keys = keys.concat(await read(`${orderExpr} IS NULL`, {}, 'id', want - keys.length));
  } else if (asc) {
    keys = await read(`${orderExpr} IS NULL AND ${idColumn} > :__afterId`, { __afterId: pos.id }, 'id', want);
  } else if (pos.key === null) {
    keys = await read(`${orderExpr} IS NULL AND ${idColumn} < :__afterId`, { __afterId: pos.id }, 'id', want);
    if (keys.length < want) keys = keys.concat(await read(`${orderExpr} IS NOT NULL`, {}, 'values', want - keys.length));
  } else {
    keys = await read(`(${orderExpr}, ${idColumn}) < (:__afterKey, :__afterId)`, { __afterKey: pos.key, __afterId: pos.id }, 'values', want);
  }
  const page = keys.slice(0, q.limit);
  const last = page[page.length - 1] as KeyRow | undefined;
  const next = keys.length > q.limit && last ? encodeCursor(q.list ?? '', q.binding ?? '', { key: byId ? null : last.k, id: last.id }) : null;
  if (!page.length) return { total, items: [], next };
  const pageIds = page.map((r) => r.id);
  if (load) return { total, items: await load(`${idColumn} = ANY($1)`, [pageIds], orderClause(orderExpr, idColumn, q.orderByDir)), next };
  const nulls = asc ? 'NULLS LAST' : 'NULLS FIRST';
  qb.andWhere(`${idColumn} = ANY(:__pageIds)`, { __pageIds: pageIds });
  qb.orderBy(orderExpr, q.orderByDir, nulls);
  if (!byId) qb.addOrderBy(idColumn, q.orderByDir);
  const items = (await qb.getMany()) as unknown as R[];
  return { total, items, next };
}

/**
 * The list envelope `{ total, <key>: records, next? }`: `next` when the query paged by cursor
 * (after= or count=false), and each record cut to the `fields=` selection (id always; `fields.<alias>`
 * keeps one custom value inside `fields`).
 */
export function listEnvelope<K extends string, R extends object>(q: ListQuery, key: K, page: { total: number; next?: string | null }, records: R[]) {
  const items = q.fields ? records.map((r) => sparse(r, q.fields ?? [])) : records;
  const envelope = { total: page.total, [key]: items } as { total: number; next?: string | null } & Record<K, R[]>;
  if (q.after !== undefined || q.count === false) envelope.next = page.next ?? null;
  return envelope;
}

function sparse<R extends object>(record: R, names: readonly string[]): R {
  const src = record as Record<string, unknown>;
  const out: Record<string, unknown> = { id: src.id };
  for (const name of names) {
    if (name.startsWith('fields.')) {
      const custom = (src.fields ?? {}) as Record<string, unknown>;
      const alias = name.slice('fields.'.length);
      const target = (out.fields ??= {}) as Record<string, unknown>;
      if (out.fields !== custom) target[alias] = custom[alias] ?? null;
    } else out[name] = src[name];
  }
  return out as R;
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
