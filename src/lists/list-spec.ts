/**
 * What a list is: the ListSpec a resource declares (its sortable columns, search expression, exact-match
 * filters, filterable fields and properties) and the ListQuery that parseListQuery (list-query.ts) makes
 * of a request against it. Resources declare a ListSpec; nothing else parses list parameters.
 */
import type { CompiledFilter, FilterRegistry } from './filter-sql.js';

export const DEFAULT_LIMIT = 30;
export const MAX_LIMIT = 200;
export const MAX_PAGE = 1_000_000;
export const MAX_SEARCH = 200;

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
   * SQL expression of a record's last change time, which `modifiedSince` compares with (incremental
   * sync). Default: COALESCE of the columns behind the sortable modifiedAt (or
   * dateModified) and createdAt (or dateAdded), so a record never changed since its creation counts
   * as changed when it was created. A list without those columns takes no modifiedSince.
   */
  changedExpression?: string;
  /**
   * The fields `filter` takes: API name → type and SQL expression. Adding a filterable
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
  /** The instant relative filter values and time windows are resolved at (default: the process clock). */
  now?: Date;
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

/** Route metadata key of a list route's ListSpec (set by ApiListQuery in list.openapi.ts). */
export const LIST_SPEC_KEY = 'sf:list-spec';

/** Who created and last changed a record: properties of every audited record, after its own. */
export const AUDIT_PROPERTIES = ['createdBy', 'createdByUser', 'modifiedBy', 'modifiedByUser'] as const;

/** A list described by its fields: what a resource states once, from which defineList derives its ListSpec. */
export interface ListDefinition extends Omit<ListSpec, 'sortable' | 'filterable' | 'properties'> {
  /**
   * The record's fields in the order the document lists them: API name → type and SQL expression
   * (qualified with the query's alias). `filter` takes each of them; a dotted name (`owner.id`) is
   * another name for a field, not a property of the record.
   */
  fields: FilterRegistry;
  /** The fields orderBy takes, in the document's order (each sorts by its field's SQL); default: every field but the dotted names. */
  sortable?: readonly string[];
  /** The properties `fields=` may select; default: every field but the dotted names, then AUDIT_PROPERTIES. */
  properties?: readonly string[];
}

/** The ListSpec of a list described by its fields: sortable columns and properties come from the same field table. */
export function defineList(def: ListDefinition): ListSpec {
  const { fields, sortable, properties, ...rest } = def;
  const own = Object.keys(fields).filter((name) => !name.includes('.'));
  const sortColumns: Record<string, string> = {};
  for (const name of sortable ?? own) {
    const field = fields[name] as FilterRegistry[string] | undefined;
    if (!field) throw new Error(`list ${def.name}: sortable ${name} is not one of its fields`);
    sortColumns[name] = field.sql;
  }
  return { ...rest, sortable: sortColumns, filterable: fields, properties: properties ?? [...own, ...AUDIT_PROPERTIES] };
}

/** The createdAt and modifiedAt fields of an audited table queried as `alias`. */
export function auditFields(alias: string): FilterRegistry {
  return { createdAt: { type: 'datetime', sql: `${alias}.created_at` }, modifiedAt: { type: 'datetime', sql: `${alias}.modified_at` } };
}
