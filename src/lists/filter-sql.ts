/**
 * The filter language's checking and compiling: a parsed filter (filter-syntax.ts) is checked
 * against a list's registry of filterable fields and becomes SQL text built only from the registry
 * and fixed operators, with every value a bound parameter.
 */
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, type ErrorDetail } from '../common/errors.js';
import {
  FILTER_LIMITS,
  type FilterCondition,
  FilterSyntaxError,
  type FilterNode,
  type FilterOperator,
  parseFilterText,
  readJsonFilter,
} from './filter-syntax.js';

/**
 * The kinds of filterable field:
 * - string: exact text (eq/neq/in/nin, case-insensitive contains/startsWith/endsWith, ordering);
 * - int, number: numeric; id: a record id (1..2147483647), compared as an integer;
 * - boolean; datetime (ISO 8601 with offset, or now±N<unit>); date (YYYY-MM-DD, or now±N<unit>);
 * - enum: one of `values`;
 * - json-*: a contact custom value in the `fields` jsonb column (see contactCustomField);
 * - membership: the record is (or is not) in a set, through an EXISTS on a link table; the set's
 *   values are ids, or one of `values` when given (e.g. the statuses of a contact's deals).
 */
export type FilterFieldType =
  'string' | 'int' | 'number' | 'id' | 'boolean' | 'datetime' | 'date' | 'enum' | 'json-text' | 'json-scalar' | 'json-multi' | 'membership';

export interface FilterField {
  type: FilterFieldType;
  /**
   * SQL expression of the value (qualified with the list's alias). For json-* fields: the jsonb
   * column; for membership: unused.
   */
  sql: string;
  /** enum: the allowed values. json-scalar select: the allowed options (null: any). membership: the set's values when they are not ids. */
  values?: readonly string[] | null;
  /** json-*: the key inside the jsonb column, and the value type inside it. */
  json?: { key: string; valueType: 'string' | 'number' | 'boolean' | 'date' | 'datetime' | 'select' };
  /**
   * membership: EXISTS (SELECT 1 FROM <table> m WHERE m.<recordColumn> = <recordId> AND m.<setColumn> ...).
   * `match`, when given, is the condition tying a row `m` of the set table to the record instead of
   * `m.<recordColumn> = <recordId>` (a set defined by a range rather than a link row: point groups).
   */
  membership?: { table: string; recordColumn: string; recordId: string; setColumn: string; match?: string };
  /**
   * string: a trigram-indexed expression that holds this column's lower-cased text among other text
   * (contacts' search_text). contains, startsWith and endsWith also test it with a substring match,
   * which the column's own match implies, so that one index serves them instead of one per column.
   */
  textIndex?: string;
  /** Shown in the OpenAPI document. */
  description?: string;
  /**
   * The value's SQL built per condition, with values of its own bound as parameters (e.g. an event
   * name taken from the field's name) and the query's `now` (a time window): used instead of `sql`.
   */
  bound?: (bind: (value: unknown) => string, now: Date) => string;
}

/**
 * A registry's fields whose names follow a pattern rather than a list (contacts:
 * `events.<name>.count.7d`; tracked events: `properties.<key>`): kept under this symbol key, so
 * spreading a registry keeps it and listing its names does not show it.
 */
export const PATTERN_FIELDS = Symbol('filter pattern fields');

export interface PatternFields {
  /** The field of a name the pattern covers, or null. */
  resolve(name: string): FilterField | null;
  /** The patterns, for the error that names the allowed fields. */
  describe: string;
}

export type FilterRegistry = Record<string, FilterField> & { [PATTERN_FIELDS]?: PatternFields };

/** Operators each type takes. */
export function operatorsOf(f: FilterField): readonly FilterOperator[] {
  switch (f.type) {
    case 'string':
      return ['eq', 'neq', 'in', 'nin', 'contains', 'startsWith', 'endsWith', 'gt', 'gte', 'lt', 'lte', 'between', 'isEmpty', 'isNotEmpty'];
    case 'int':
    case 'number':
    case 'id':
    case 'datetime':
    case 'date':
      return ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
    case 'boolean':
      return ['eq', 'neq', 'isEmpty', 'isNotEmpty'];
    case 'enum':
      return ['eq', 'neq', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
    case 'json-text':
      return ['eq', 'neq', 'in', 'nin', 'contains', 'startsWith', 'endsWith', 'isEmpty', 'isNotEmpty'];
    case 'json-scalar':
      if (f.json?.valueType === 'boolean' || f.json?.valueType === 'select') return ['eq', 'neq', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
      return ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
    case 'json-multi':
      return ['contains', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
    case 'membership':
      return ['eq', 'neq', 'in', 'nin', 'isEmpty', 'isNotEmpty'];
  }
}

export interface CompiledFilter {
  sql: string;
  params: Record<string, unknown>;
}

const RELATIVE = /^now(?:\s*([+-])\s*(\d{1,6})\s*([smhdwMy]))?$/;

/** `now`, `now-7d`, `now+2h` (s, m, h, d, w, M for months, y) at `now`. */
export function relativeDate(raw: string, now: Date): Date | null {
  const m = RELATIVE.exec(raw.trim());
  if (!m) return null;
  const d = new Date(now.getTime());
  if (!m[1]) return d;
  const n = Number(m[2]) * (m[1] === '-' ? -1 : 1);
  const unit = m[3];
  const ms: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
  if (unit in ms) d.setTime(d.getTime() + n * ms[unit]);
  else if (unit === 'M') d.setUTCMonth(d.getUTCMonth() + n);
  else d.setUTCFullYear(d.getUTCFullYear() + n);
  return Number.isNaN(d.getTime()) ? null : d;
}

class ValueError {
  constructor(readonly message: string) {}
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

class Compiler {
  private n = 0;
  readonly params: Record<string, unknown> = {};
  readonly errors: ErrorDetail[] = [];
  conditions = 0;

  constructor(
    private readonly registry: FilterRegistry,
    private readonly now: Date,
  ) {}

  private bind(value: unknown): string {
    const name = `__flt${this.n++}`;
    this.params[name] = value;
    return `:${name}`;
  }

  private problem(path: string, message: string): string {
    if (this.errors.length < 20) this.errors.push({ field: `filter${path}`, message });
    return 'FALSE';
  }

  node(n: FilterNode, path: string, depth: number): string {
    if ('and' in n || 'or' in n) {
      if (depth > FILTER_LIMITS.maxDepth) return this.problem(path, `nests deeper than ${FILTER_LIMITS.maxDepth} groups`);
      const kind = 'and' in n ? 'and' : 'or';
      const parts = ('and' in n ? n.and : n.or).map((c, i) => this.node(c, `${path}.${kind}[${i}]`, depth + 1));
      return `(${parts.join(kind === 'and' ? ' AND ' : ' OR ')})`;
    }
    if ('not' in n) {
      if (depth > FILTER_LIMITS.maxDepth) return this.problem(path, `nests deeper than ${FILTER_LIMITS.maxDepth} groups`);
      // A condition on an empty value is unknown (NULL) in SQL; not() answers the exact complement.
      return `(NOT COALESCE(${this.node(n.not, `${path}.not`, depth + 1)}, FALSE))`;
    }
    this.conditions++;
    if (this.conditions === FILTER_LIMITS.maxConditions + 1) this.problem('', `has more than ${FILTER_LIMITS.maxConditions} conditions`);
    return this.condition(n, path);
  }

  private condition(c: FilterCondition, path: string): string {
    const patterns = this.registry[PATTERN_FIELDS];
    let f = Object.prototype.hasOwnProperty.call(this.registry, c.field) ? this.registry[c.field] : (patterns?.resolve(c.field) ?? null);
    if (!f) {
      const names = Object.keys(this.registry);
      const custom = names.some((k) => k.startsWith('fields.')) || c.field.startsWith('fields.');
      return this.problem(
        `${path}.field`,
        `"${c.field.slice(0, 60)}" is not a filterable field; allowed: ${names.join(', ')}${custom ? ' (custom fields: fields.<alias> of a published custom field of these records)' : ''}${patterns ? `; ${patterns.describe}` : ''}`,
      );
    }
    if (f.bound) f = { ...f, sql: f.bound((v) => this.bind(v), this.now) };
    const ops = operatorsOf(f);
    if (!(ops as readonly string[]).includes(c.op)) {
      return this.problem(`${path}.op`, `"${c.op.slice(0, 30)}" is not an operator of ${c.field}; allowed: ${ops.join(', ')}`);
    }
    const op = c.op as FilterOperator;
    const at = `${path}.value`;
    if (op === 'isEmpty' || op === 'isNotEmpty') {
      if (c.value !== undefined && c.value !== true && c.value !== 'true' && c.value !== '') {
        return this.problem(at, `${op} takes no value`);
      }
      return this.empty(f, op === 'isEmpty');
    }
    if (c.value === undefined) return this.problem(at, `${op} needs a value`);
    const list = op === 'in' || op === 'nin' || op === 'between';
    if (list !== Array.isArray(c.value)) {
      return this.problem(at, list ? `${op} takes a list: [a,b${op === 'between' ? '' : ',...'}]` : `${op} takes one value, not a list`);
    }
    if (op === 'between' && (c.value as unknown[]).length !== 2) return this.problem(at, 'between takes exactly two values: [low,high]');
    if ((op === 'in' || op === 'nin') && (c.value as unknown[]).length === 0) return this.problem(at, `${op} takes at least one value`);
    const raw = Array.isArray(c.value) ? c.value : [c.value];
    const values: unknown[] = [];
    for (const v of raw) {
      const parsed = this.value(f, op, v);
      if (parsed instanceof ValueError) return this.problem(at, parsed.message);
      values.push(parsed);
    }
    return this.compare(f, op, values);
  }

  /** One value checked and converted for the field; `{ error }` when it does not fit. */
  private value(f: FilterField, op: FilterOperator, v: string | number | boolean | null): unknown {
    const err = (message: string) => new ValueError(message);
    const type =
      f.type === 'json-scalar' || f.type === 'json-text' || f.type === 'json-multi'
        ? (f.json?.valueType ?? 'string')
        : f.type === 'membership'
          ? f.values
            ? 'enum'
            : 'id'
          : f.type;
    if (v === null) return err('must not be null (use isEmpty / isNotEmpty)');
    const text = typeof v === 'string' ? v : null;
    if (text !== null && text.length > FILTER_LIMITS.maxValueLength) return err(`must be at most ${FILTER_LIMITS.maxValueLength} characters`);
    const textOps = op === 'contains' || op === 'startsWith' || op === 'endsWith';
    switch (type) {
      case 'string':
      case 'select':
        if (typeof v !== 'string' && typeof v !== 'number') return err('must be a string');
        if (f.values && !(textOps && f.type !== 'json-multi') && !f.values.includes(String(v)))
          return err(`must be one of: ${f.values.slice(0, 50).join(', ')}`);
        return String(v);
      case 'enum':
        if (!f.values?.includes(String(v))) return err(`must be one of: ${(f.values ?? []).join(', ')}`);
        return String(v);
      case 'int':
      case 'id': {
        const s = String(v).trim();
        if (!/^-?\d{1,10}$/.test(s)) return err(type === 'id' ? 'must be an id (a whole number from 1 to 2147483647)' : 'must be a whole number');
        const n = Number(s);
        if (type === 'id' ? n < 1 || n > 2147483647 : n < -2147483648 || n > 2147483647) return err('is out of range');
        return n;
      }
      case 'number': {
        if (typeof v === 'boolean') return err('must be a number');
        const s = String(v).trim();
        if (!/^-?(\d{1,15})(\.\d{1,10})?$/.test(s)) return err('must be a decimal number, e.g. 12.5');
        return Number(s);
      }
      case 'boolean':
        if (v === true || v === 'true' || v === '1' || v === 1) return true;
        if (v === false || v === 'false' || v === '0' || v === 0) return false;
        return err('must be true or false');
      case 'datetime': {
        if (typeof v !== 'string') return err('must be an ISO 8601 date-time with an offset, or now / now-7d / now+2h');
        const d = relativeDate(v, this.now) ?? parseIsoWithOffset(v.trim());
        if (!d) return err('must be an ISO 8601 date-time with an offset (e.g. 2026-01-31T12:00:00Z), or now / now-7d / now+2h (units s, m, h, d, w, M, y)');
        return d;
      }
      case 'date': {
        if (typeof v !== 'string') return err('must be a date YYYY-MM-DD, or now / now-7d');
        const rel = relativeDate(v, this.now);
        if (rel) return rel.toISOString().slice(0, 10);
        const m = DATE_ONLY.exec(v.trim());
        const d = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : null;
        if (!m || !d || d.toISOString().slice(0, 10) !== v.trim())
          return err('must be a date YYYY-MM-DD (a real calendar day), or now / now-7d (units d, w, M, y)');
        return v.trim();
      }
    }
  }

  private empty(f: FilterField, isEmpty: boolean): string {
    if (f.type === 'membership' && f.membership) {
      const m = f.membership;
      return `(${isEmpty ? 'NOT ' : ''}EXISTS (SELECT 1 FROM ${m.table} m WHERE ${m.match ?? `m.${m.recordColumn} = ${m.recordId}`}))`;
    }
    if (f.type.startsWith('json-') && f.json) {
      const v = `(${f.sql} -> '${jsonKey(f)}')`;
      const emptyJson =
        f.type === 'json-multi'
          ? `(${v} IS NULL OR jsonb_typeof(${v}) = 'null' OR ${v} = '[]'::jsonb)`
          : `(${v} IS NULL OR jsonb_typeof(${v}) = 'null' OR ${v} = '""'::jsonb)`;
      return isEmpty ? emptyJson : `(NOT ${emptyJson})`;
    }
    if (f.type === 'string') return isEmpty ? `(${f.sql} IS NULL OR ${f.sql} = '')` : `(${f.sql} IS NOT NULL AND ${f.sql} <> '')`;
    return isEmpty ? `(${f.sql} IS NULL)` : `(${f.sql} IS NOT NULL)`;
  }

  private compare(f: FilterField, op: FilterOperator, values: unknown[]): string {
    if (f.type === 'membership' && f.membership) {
      const m = f.membership;
      const tie = m.match ?? `m.${m.recordColumn} = ${m.recordId}`;
      const exists = (cond: string) => `EXISTS (SELECT 1 FROM ${m.table} m WHERE ${tie} AND m.${m.setColumn} ${cond})`;
      if (op === 'eq') return `(${exists(`= ${this.bind(values[0])}`)})`;
      if (op === 'neq') return `(NOT ${exists(`= ${this.bind(values[0])}`)})`;
      if (op === 'in') return `(${exists(`= ANY(${this.bind(values)})`)})`;
      return `(NOT ${exists(`= ANY(${this.bind(values)})`)})`;
    }
    if (f.type === 'json-scalar' || f.type === 'json-text' || f.type === 'json-multi') return this.compareJson(f, op, values);
    const col = f.sql;
    const textual = f.type === 'string';
    switch (op) {
      case 'eq':
        return `(${col} = ${this.bind(values[0])})`;
      case 'neq':
        return `(${col} IS DISTINCT FROM ${this.bind(values[0])})`;
      case 'gt':
        return `(${col} > ${this.bind(values[0])})`;
      case 'gte':
        return `(${col} >= ${this.bind(values[0])})`;
      case 'lt':
        return `(${col} < ${this.bind(values[0])})`;
      case 'lte':
        return `(${col} <= ${this.bind(values[0])})`;
      case 'between':
        return `(${col} BETWEEN ${this.bind(values[0])} AND ${this.bind(values[1])})`;
      case 'in':
        return `(${col} = ANY(${this.bind(values)}))`;
      case 'nin':
        return `(${col} IS NULL OR NOT (${col} = ANY(${this.bind(values)})))`;
      case 'contains':
      case 'startsWith':
      case 'endsWith':
        if (!textual) return 'FALSE';
        if (f.textIndex)
          return `(${f.textIndex} LIKE ${this.bind(likeOf(String(values[0]), 'contains'))} AND lower(${col}) LIKE ${this.bind(likeOf(String(values[0]), op))})`;
        return `(lower(${col}) LIKE ${this.bind(likeOf(String(values[0]), op))})`;
      default:
        return 'FALSE';
    }
  }

  private compareJson(f: FilterField, op: FilterOperator, values: unknown[]): string {
    const key = jsonKey(f);
    const col = f.sql;
    const vt = f.json?.valueType ?? 'string';
    // eq / in: containment, which the GIN index on the jsonb column serves.
    const contains = (v: unknown) => `(${col} @> CAST(${this.bind(JSON.stringify({ [key]: f.type === 'json-multi' ? [v] : v }))} AS jsonb))`;
    const anyOf = (vs: unknown[]) => `(${vs.map(contains).join(' OR ')})`;
    const jsonValue = (v: unknown) => `CAST(${this.bind(JSON.stringify(v instanceof Date ? isoSeconds(v) : v))} AS jsonb)`;
    const value = `(${col} -> '${key}')`;
    const text = `(${col} ->> '${key}')`;
    const typed = (v: unknown) => (vt === 'datetime' && v instanceof Date ? isoSeconds(v) : v);
    if (f.type === 'json-multi') {
      if (op === 'contains') return contains(values[0]);
      if (op === 'in') return anyOf(values);
      return `(NOT ${anyOf(values)})`;
    }
    switch (op) {
      case 'eq':
        return contains(typed(values[0]));
      case 'in':
        return anyOf(values.map(typed));
      case 'neq':
        return `(NOT ${contains(typed(values[0]))})`;
      case 'nin':
        return `(NOT ${anyOf(values.map(typed))})`;
      case 'contains':
      case 'startsWith':
      case 'endsWith':
        return `(jsonb_typeof(${value}) = 'string' AND lower(${text}) LIKE ${this.bind(likeOf(String(values[0]), op))})`;
      default: {
        // Ordering: numbers compare as jsonb numbers (numerically); dates and date-times as their
        // stored ISO text (UTC, fixed width), so that no stored value can make the cast fail.
        const sym = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as Record<string, string>;
        const sameType = vt === 'number' ? `jsonb_typeof(${value}) = 'number'` : `jsonb_typeof(${value}) = 'string'`;
        if (op === 'between') return `(${sameType} AND ${value} BETWEEN ${jsonValue(values[0])} AND ${jsonValue(values[1])})`;
        return `(${sameType} AND ${value} ${sym[op]} ${jsonValue(values[0])})`;
      }
    }
  }
}

function isoSeconds(d: Date): string {
  return d.toISOString().slice(0, 19) + '+00:00';
}

function jsonKey(f: FilterField): string {
  const key = f.json?.key ?? '';
  // Registry keys come from field aliases (^[a-z][a-z0-9_]*$); anything else never reaches SQL.
  if (!/^[a-z][a-z0-9_]*$/.test(key)) throw new Error(`filter registry: bad json key ${JSON.stringify(key)}`);
  return key;
}

function likeOf(term: string, op: 'contains' | 'startsWith' | 'endsWith'): string {
  const escaped = term.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c);
  return op === 'contains' ? `%${escaped}%` : op === 'startsWith' ? `${escaped}%` : `%${escaped}`;
}

/**
 * Reads a filter (JSON object, or text in the query-string or JSON form) and compiles it against a
 * registry: SQL text built only from the registry and fixed operators, with every value a named
 * parameter (`:__fltN`). A 400 (validation_failed) names every problem and the allowed fields or
 * operators.
 */
export function compileFilter(raw: unknown, registry: FilterRegistry, now = new Date()): { node: FilterNode; compiled: CompiledFilter } {
  let node: FilterNode;
  try {
    node = typeof raw === 'string' ? parseFilterText(raw) : readJsonFilter(raw);
  } catch (e) {
    if (e instanceof FilterSyntaxError) throw new AppError('validation_failed', `Invalid filter: ${e.message}`, [{ field: 'filter', message: e.message }]);
    throw e;
  }
  const c = new Compiler(registry, now);
  const sql = c.node(node, '', 1);
  if (c.errors.length) {
    throw new AppError('validation_failed', `Invalid filter: ${c.errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, c.errors);
  }
  return { node, compiled: { sql, params: c.params } };
}

/** The filter's problems as details without throwing (for parseListQuery, which reports all at once). */
export function filterProblems(e: unknown): ErrorDetail[] | null {
  if (e instanceof AppError && e.code === 'validation_failed' && e.message.startsWith('Invalid filter'))
    return e.details ?? [{ field: 'filter', message: e.message }];
  return null;
}

/** A short text of the registry for the OpenAPI document: each field with its type and operators. */
export function describeRegistry(registry: FilterRegistry): string {
  return Object.entries(registry)
    .map(([name, f]) => {
      const kind = f.type === 'enum' ? `enum (${(f.values ?? []).join(', ')})` : f.type;
      return `\`${name}\` ${kind}: ${operatorsOf(f).join(', ')}`;
    })
    .join('; ');
}
