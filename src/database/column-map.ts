import { getMetadataArgsStorage } from 'typeorm';
import { iso } from '../common/dates.js';

/**
 * One definition per record: a feature declares, per table, which entity properties a record shows
 * and which a write sets (its column map), and everything that would otherwise repeat the property
 * names derives from it once, at module load: the SELECT list of a row, the INSERT and UPDATE
 * column lists and their parameters, the SQL that builds the API record as jsonb (the data of the
 * events a statement writes itself, see outbox.ts), and the TypeScript row, values and record types
 * with the mapper from a row to the record. Column names and types come from the entity's TypeORM
 * decorators (read from TypeORM's metadata storage, filled when the entity class is defined), so a
 * new column is named in the entity, the map, the DTO and the migration.
 */

/** The column types a map knows; each property's is read from its entity decorator. */
export type ColumnType = 'int' | 'text' | 'jsonb' | 'timestamptz' | 'boolean' | 'numeric' | 'uuid';

/** A stored property of the map: a column of the entity. */
export interface StoredProperty {
  /** Written by create and replace (the writable values, in map order); default false. */
  writable?: boolean;
  /** Shown in the API record (as stored; a timestamp as ISO 8601 text); default true. */
  record?: boolean;
  /** A jsonb object the record shows as `{}` when the column is null. */
  orEmpty?: boolean;
}

/**
 * A record property computed from the row: the same value in SQL (for events) and in TypeScript.
 * `value` reads only the map's stored properties and extras (what a row holds).
 */
export interface ComputedProperty<R, T> {
  /** SQL over the row's columns: `col('ownerId')` is the row column of that property (`r."ownerId"`). */
  sql: (col: (property: string) => string) => string;
  value: (row: R) => T;
}

type Spec<R> = Record<string, StoredProperty | ComputedProperty<R, unknown>>;

type IsComputed<P> = P extends { sql: unknown } ? true : false;
type StoredKeys<E, M> = { [K in keyof M]: IsComputed<M[K]> extends true ? never : K extends keyof E ? K : never }[keyof M];
type WritableKeys<E, M> = { [K in keyof M]: M[K] extends { writable: true } ? (K extends keyof E ? K : never) : never }[keyof M];
type RecordValue<V> = V extends Date ? string | null : V;

/** A row as the map's SELECT list answers it: the stored properties and the extras. */
export type RowOf<E, M, X> = Pick<E, StoredKeys<E, M>> & X;
/** The writable values of a record, as a write takes them. */
export type ValuesOf<E, M> = Pick<E, WritableKeys<E, M>>;
/** The API record: the stored properties shown (timestamps as ISO text) and the computed ones, in map order. */
export type RecordOf<E, M> = {
  -readonly [K in keyof M as M[K] extends { record: false } ? never : K]: M[K] extends ComputedProperty<never, infer T>
    ? T
    : K extends keyof E
      ? RecordValue<E[K]>
      : never;
};

/** A writable column: its property, column name and SQL type (for a cast or a recordset definition). */
export interface WritableColumn {
  property: string;
  column: string;
  type: ColumnType;
}

/** A column map with the SQL and the mapper derived from it (see {@link columnMap}). */
export interface ColumnMap<E, M, X> {
  /** The writable columns, in map order: the values' order in {@link ColumnMap.writeParams}. */
  readonly writable: readonly WritableColumn[];
  /** The SELECT list of a row from the table aliased `a`: every stored property (aliased by its name) and the extras. */
  selectList(a: string): string;
  /** The stored properties only of {@link ColumnMap.selectList}, for a statement that reads the extras its own way (e.g. by a join). */
  storedList(a: string): string;
  /** The API record as a jsonb expression over a relation `r` of {@link ColumnMap.selectList} columns. */
  recordJson(r: string): string;
  /** The row's writable values as query parameters, in map order (jsonb as JSON text). */
  writeParams(values: ValuesOf<E, M>): unknown[];
  /** The row's writable values as a jsonb_to_recordset element (keys are column names). */
  recordsetRow(values: ValuesOf<E, M>): Record<string, unknown>;
  /** The column definition list of jsonb_to_recordset for the writable columns. */
  readonly recordsetColumns: string;
  /** The writable values of a row (a copy). */
  valuesOf(row: RowOf<E, M, X>): ValuesOf<E, M>;
  /** The API record of a row. */
  toRecord(row: RowOf<E, M, X>): RecordOf<E, M>;
}

const CAST: Partial<Record<string, ColumnType>> = {
  int: 'int',
  integer: 'int',
  text: 'text',
  jsonb: 'jsonb',
  timestamptz: 'timestamptz',
  boolean: 'boolean',
  numeric: 'numeric',
};

/** Column name and type of each decorated property of `entity` (its base classes' included). */
function entityColumns(entity: abstract new () => object): Map<string, { column: string; type: ColumnType | undefined }> {
  const out = new Map<string, { column: string; type: ColumnType | undefined }>();
  const storage = getMetadataArgsStorage();
  for (let t: unknown = entity; typeof t === 'function' && t !== Function.prototype; t = Object.getPrototypeOf(t)) {
    for (const c of storage.columns) {
      if (c.target !== t || out.has(c.propertyName)) continue;
      const raw = c.options.type === Number ? 'int' : typeof c.options.type === 'string' ? c.options.type : '';
      out.set(c.propertyName, { column: c.options.name ?? c.propertyName, type: CAST[raw] });
    }
  }
  return out;
}

const isoSql = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;
const quoted = (r: string) => (p: string) => `${r}."${p}"`;

/**
 * The row-to-record mapper, compiled once per map into one function with an object literal of the
 * record's properties, as a hand-written mapper would be. A generic loop over the properties cost
 * 50% more per row (property reads by a variable key are megamorphic), and the mapper runs for every
 * row of a list page (bench row "list contacts page 1 with total"). The source holds only the map's
 * property names (checked to be identifiers) and calls of the computed properties' functions.
 */
function compileMapper(
  name: string,
  shown: readonly ({ k: string; s: StoredProperty & WritableColumn; c?: undefined } | { k: string; s?: undefined; c: ComputedProperty<unknown, unknown> })[],
): (row: object) => object {
  const computed: ((row: unknown) => unknown)[] = [];
  const parts = shown.map(({ k, s, c }) => {
    if (!/^[A-Za-z_$][\w$]*$/.test(k)) throw new Error(`column map: ${name}.${k} is not an identifier`);
    if (c) return `${k}: c[${computed.push(c.value) - 1}](r)`;
    if (s.type === 'timestamptz') return `${k}: iso(r.${k})`;
    return s.orEmpty ? `${k}: r.${k} ?? {}` : `${k}: r.${k}`;
  });
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- generated from the map's own property names, once at module load
  const make = new Function('c', 'iso', `return (r) => ({ ${parts.join(', ')} });`) as (c: typeof computed, isoOf: typeof iso) => (row: object) => object;
  return make(computed, iso);
}

/**
 * A column map of `entity` (with extras: read-only row columns computed in SQL, e.g. a joined name,
 * each given as SQL over the table alias). Curried so the map's computed properties are typed
 * against the row: `columnMap<Contact, { ownerName: string | null }>(Contact, extras)({ ...map })`.
 */
export function columnMap<E extends object, X extends object>(entity: abstract new () => E, extras: { [K in keyof X]: (a: string) => string }) {
  return <const M extends Spec<E & X>>(spec: M): ColumnMap<E, M, X> => build<E, M, X>(entity, extras, spec);
}

function build<E extends object, M extends Spec<E & X>, X extends object>(
  entity: abstract new () => E,
  extras: { [K in keyof X]: (a: string) => string },
  spec: M,
): ColumnMap<E, M, X> {
  const columns = entityColumns(entity);
  const stored: (StoredProperty & WritableColumn)[] = [];
  // The record's properties in map order, each either stored or computed.
  const shown: ({ k: string; s: StoredProperty & WritableColumn; c?: undefined } | { k: string; s?: undefined; c: ComputedProperty<unknown, unknown> })[] = [];
  for (const [k, p] of Object.entries(spec)) {
    if ('sql' in p) {
      shown.push({ k, c: p as ComputedProperty<unknown, unknown> });
      continue;
    }
    const c = columns.get(k);
    if (!c) throw new Error(`column map: ${entity.name} has no column ${k}`);
    const type = c.type;
    if (!type) throw new Error(`column map: ${entity.name}.${k} has a column type the map does not know`);
    const s = { ...p, property: k, column: c.column, type };
    stored.push(s);
    if (p.record !== false) shown.push({ k, s });
  }
  const writable = stored.filter((s) => s.writable).map(({ property, column, type }) => ({ property, column, type }));
  const extraEntries: [string, (a: string) => string][] = Object.entries(extras);
  const emptyOf = (w: WritableColumn) => (w.type === 'jsonb' ? {} : null);

  const storedList = (a: string) => stored.map((s) => `${a}.${s.column}${s.column === s.property ? '' : ` AS "${s.property}"`}`).join(', ');

  const toRecord = compileMapper(entity.name, shown);

  return {
    writable,
    selectList: (a) => [storedList(a), ...extraEntries.map(([k, sql]) => `${sql(a)} AS "${k}"`)].join(', '),
    storedList,
    recordJson: (r) => {
      const col = quoted(r);
      const parts = shown.map(({ k, s, c }) => {
        if (c) return `'${k}', ${c.sql(col)}`;
        const v = col(k);
        return `'${k}', ${s.type === 'timestamptz' ? isoSql(v) : s.orEmpty ? `coalesce(${v}, '{}'::jsonb)` : v}`;
      });
      return `jsonb_build_object(${parts.join(', ')})`;
    },
    writeParams: (values) =>
      writable.map((w) => {
        const v = (values as Record<string, unknown>)[w.property];
        return w.type === 'jsonb' ? JSON.stringify(v ?? {}) : v;
      }),
    recordsetRow: (values) => Object.fromEntries(writable.map((w) => [w.column, (values as Record<string, unknown>)[w.property] ?? emptyOf(w)])),
    recordsetColumns: writable.map((w) => `${w.column} ${w.type}`).join(', '),
    valuesOf: (row) => Object.fromEntries(writable.map((w) => [w.property, (row as Record<string, unknown>)[w.property] ?? emptyOf(w)])) as ValuesOf<E, M>,
    toRecord: toRecord as (row: RowOf<E, M, X>) => RecordOf<E, M>,
  };
}
