/**
 * A list in SQL: a ListQuery's search and filters applied to a query builder, the total (counted,
 * or kept by the row_counts triggers), the page by offset or by keyset, and the answer's envelope.
 */
import type { DataSource, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { poolOf, prepared } from '../database/transactions.js';
import { encodeCursor } from './cursor.js';
import { changedExpression, type ListQuery, type ListSpec } from './list-spec.js';

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
