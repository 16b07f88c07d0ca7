/**
 * Pure rules of import and export jobs: which properties an object imports and exports, how a CSV
 * header and a mapping become each row's record (with the values typed as the JSON routes take
 * them), and how a record becomes a CSV line.
 */
import { AppError, type ErrorDetail } from '../common/errors.js';
import type { WritableColumn } from '../database/column-map.js';
import { COMPANY_COLUMNS } from '../companies/company.columns.js';
import { CONTACT_COLUMNS } from '../contacts/contact.columns.js';

export const IMPORT_OBJECTS = ['contacts', 'companies', 'deals'] as const;
export type ImportObject = (typeof IMPORT_OBJECTS)[number];
export const IMPORT_MODES = ['create', 'update', 'upsert'] as const;
export type ImportMode = (typeof IMPORT_MODES)[number];
export const EMPTY_VALUES = ['ignore', 'clear'] as const;
export type EmptyValues = (typeof EMPTY_VALUES)[number];
export const IMPORT_STATUSES = ['queued', 'validating', 'running', 'completed', 'failed', 'canceled'] as const;
export type ImportStatus = (typeof IMPORT_STATUSES)[number];
export const OPEN_IMPORT_STATUSES: readonly ImportStatus[] = ['queued', 'validating', 'running'];
/**
 * Runs that may take up one import or export. Each death of its worker (a SIGKILL, an out-of-memory
 * kill, a file whose processing crashes the process) leads to another run, by BullMQ's stalled-job
 * check or by the recovery sweep; past this many the next run ends it `failed` instead of starting,
 * so a poison file is not run again every few seconds forever.
 */
export const MAX_JOB_RUNS = 5;

/** The reason an import or export ends with once MAX_JOB_RUNS runs did not finish it. */
export const RUNS_EXHAUSTED = `stopped after ${MAX_JOB_RUNS} attempts: the worker died each time`;

export const EXPORT_FORMATS = ['csv', 'jsonl'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** A mapping target that drops the column. */
export const IGNORE = 'ignore';

/** A custom field as the import sees it: its alias and type (text, number, boolean, multiselect, ...). */
export interface CustomFieldType {
  alias: string;
  type: string;
}

type Kind = 'string' | 'integer' | 'number';

/** The writable columns of a column map but the custom fields, with the type a CSV cell is read as (in map order). */
function cellTypes(columns: readonly WritableColumn[]): Record<string, Kind> {
  return Object.fromEntries(columns.filter((w) => w.type !== 'jsonb').map((w) => [w.property, w.type === 'int' ? 'integer' : 'string']));
}

/** The writable properties of each object (the create body's), with the type a CSV cell is read as. */
export const WRITABLE: Record<ImportObject, Record<string, Kind>> = {
  contacts: cellTypes(CONTACT_COLUMNS.writable),
  companies: cellTypes(COMPANY_COLUMNS.writable),
  deals: {
    title: 'string',
    value: 'number',
    contact_id: 'integer',
    expected_close_date: 'string',
    company_id: 'integer',
    owner_id: 'integer',
    stage: 'string',
    probability: 'integer',
    status: 'string',
    product: 'string',
    quantity: 'integer',
    closed_at: 'string',
  },
};

/**
 * Properties an import sets that the object's write routes refuse, per object: a contact's `points`
 * (the lead score), which the import sets through the point ledger (a row `source: import` with the
 * difference), in the chunk's transaction. The runner takes them out of the record before the batch write.
 */
export const SET_BY_IMPORT: Partial<Record<ImportObject, Record<string, Kind>>> = { contacts: { points: 'integer' } };

/** Objects whose records carry custom fields (`fields.<alias>`), and the field object they use. */
export const FIELD_OBJECT: Partial<Record<ImportObject, 'contact' | 'company'>> = { contacts: 'contact', companies: 'company' };

/** The properties that may name a record (idProperty) per object; contacts also take a unique-identifier field's alias. */
export const ID_PROPERTIES: Record<ImportObject, readonly string[]> = { contacts: ['id', 'email'], companies: ['id'], deals: ['id'] };

/** The id property an import uses when none is given: contacts upsert by email, everything else by id. */
export function defaultIdProperty(object: ImportObject, mode: ImportMode): string {
  return object === 'contacts' && mode !== 'update' ? 'email' : 'id';
}

/** A column's target: a writable property, `id`, `fields.<alias>`, or null (ignored). */
export type Target = { kind: 'property'; name: string; type: Kind } | { kind: 'id' } | { kind: 'field'; alias: string; type: string } | null;

/**
 * The target a name stands for (`id`, a writable property of the object, `fields.<alias>` of one of
 * `fields`), or undefined. Names are looked up as own properties and in Maps only, so `constructor`,
 * `toString` or `__proto__` are never taken for a property through the object prototype.
 */
export function targetResolver(object: ImportObject, fields: readonly CustomFieldType[]): (name: string) => Target | undefined {
  const byAlias = new Map(fields.map((f) => [f.alias, f]));
  const writable = WRITABLE[object];
  return (name) => {
    if (name === 'id') return { kind: 'id' };
    if (Object.hasOwn(writable, name)) return { kind: 'property', name, type: writable[name] };
    const settable = SET_BY_IMPORT[object];
    if (settable && Object.hasOwn(settable, name)) return { kind: 'property', name, type: settable[name] };
    if (name.startsWith('fields.') && FIELD_OBJECT[object]) {
      const f = byAlias.get(name.slice('fields.'.length));
      if (f) return { kind: 'field', alias: f.alias, type: f.type };
    }
    return undefined;
  };
}

/** Why a mapping target cannot be used for the object (null: it can): `ignore`, `id`, a writable property or a published custom field. */
export function targetProblem(target: string, object: ImportObject, fields: readonly CustomFieldType[]): string | null {
  if (target === IGNORE || targetResolver(object, fields)(target) !== undefined) return null;
  return `"${target}" is not a writable property of ${object}, id, a published custom field (fields.<alias>) or ignore`;
}

/** How each column of a file is read: its index, header name and target. */
export interface ColumnPlan {
  index: number;
  column: string;
  target: Target;
}

/**
 * Resolves a header against the mapping: a mapped column takes its mapping (`ignore`, a writable
 * property, `id` or `fields.<alias>`); an unmapped column whose name is itself such a target takes
 * it (so a file exported from here imports back without a mapping); every other column is ignored.
 * A mapping naming a column the header lacks, or an unknown target, or two columns on one target, is a 400.
 */
export function planColumns(
  header: readonly string[],
  mapping: Readonly<Record<string, string>>,
  object: ImportObject,
  fields: readonly CustomFieldType[],
  idProperty: string,
): ColumnPlan[] {
  const problems: ErrorDetail[] = [];
  const resolve = targetResolver(object, fields);
  const present = new Set(header);
  for (const column of Object.keys(mapping)) {
    if (!present.has(column)) problems.push({ field: `mapping.${column}`, message: 'names a column the file does not have' });
  }
  const taken = new Map<string, string>();
  const plans = header.map((column, index): ColumnPlan => {
    const mapped = Object.hasOwn(mapping, column) ? mapping[column] : undefined;
    let target: Target;
    if (mapped === undefined) {
      target = resolve(column) ?? null;
      // A file's own `id` column only names records when records are named by id.
      if (target?.kind === 'id' && idProperty !== 'id') target = null;
    } else if (mapped === IGNORE) target = null;
    else {
      const t = resolve(mapped);
      if (t === undefined) {
        problems.push({ field: `mapping.${column}`, message: targetProblem(mapped, object, fields) ?? 'is not a target' });
        target = null;
      } else target = t;
    }
    if (target) {
      const key = target.kind === 'id' ? 'id' : target.kind === 'field' ? `fields.${target.alias}` : target.name;
      const first = taken.get(key);
      if (first !== undefined) problems.push({ field: `mapping.${column}`, message: `maps to ${key} as column "${first}" does` });
      else taken.set(key, column);
    }
    return { index, column, target };
  });
  if (problems.length)
    throw new AppError('validation_failed', `The mapping does not fit the file: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`, problems);
  if (!plans.some((p) => p.target))
    throw new AppError('validation_failed', 'No column of the file maps to a property', [{ field: 'mapping', message: 'maps no column' }]);
  return plans;
}

/** A CSV cell read as the type the JSON route takes (a value that does not parse is left as text, for the route's own 400). */
function typed(raw: string, kind: string): unknown {
  switch (kind) {
    case 'integer':
      return /^-?\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : raw;
    case 'number': {
      const n = raw.trim() === '' ? NaN : Number(raw.trim());
      return Number.isFinite(n) ? n : raw;
    }
    case 'boolean': {
      const v = raw.trim().toLowerCase();
      if (['true', '1', 'yes'].includes(v)) return true;
      if (['false', '0', 'no'].includes(v)) return false;
      return raw;
    }
    case 'multiselect':
      return raw
        .split('|')
        .map((s) => s.trim())
        .filter(Boolean);
    default:
      return raw;
  }
}

/** One row's record: the mapped cells, typed; an empty cell omitted (`ignore`) or null (`clear`). Null when every mapped cell is empty (skipped). */
export function rowRecord(cells: readonly unknown[], plans: readonly ColumnPlan[], emptyValues: EmptyValues, fromCsv: boolean): Record<string, unknown> | null {
  const record: Record<string, unknown> = {};
  let fields: Record<string, unknown> | null = null;
  let any = false;
  for (const p of plans) {
    if (!p.target) continue;
    const raw = cells[p.index];
    const empty = raw === undefined || raw === null || raw === '';
    if (!empty) any = true;
    if (empty && emptyValues === 'ignore') continue;
    let value: unknown = empty ? null : raw;
    if (!empty && fromCsv && typeof raw === 'string') {
      value = typed(raw, p.target.kind === 'id' ? 'integer' : p.target.kind === 'property' ? p.target.type : p.target.type);
    }
    if (p.target.kind === 'field') (fields ??= {})[p.target.alias] = value;
    else record[p.target.kind === 'id' ? 'id' : p.target.name] = value;
  }
  if (!any) return null;
  if (fields) record.fields = fields;
  return record;
}

/** The column of the file behind a batch error's field (`email`, `fields.score`, `body`...), or null. */
export function columnOf(field: string | undefined, plans: readonly ColumnPlan[]): string | null {
  if (!field) return null;
  for (const p of plans) {
    const t = p.target;
    if (!t) continue;
    const name = t.kind === 'id' ? 'id' : t.kind === 'field' ? `fields.${t.alias}` : t.name;
    if (field === name || field.startsWith(`${name}.`)) return p.column;
  }
  return null;
}

/** Column names of an export: the chosen properties (all when none), custom fields last as `fields.<alias>`. */
export function exportColumns(base: readonly string[], fields: readonly string[], chosen: readonly string[] | undefined): string[] {
  const all = [...base, ...fields.map((a) => `fields.${a}`)];
  if (!chosen?.length) return all;
  const known = new Set(all);
  const unknown = chosen.filter((c) => !known.has(c));
  if (unknown.length) {
    throw new AppError(
      'validation_failed',
      `fields: ${unknown.map((u) => `"${u}"`).join(', ')} is not an exported property; allowed: ${all.join(', ')}`,
      unknown.map((u) => ({ field: 'fields', message: `${u} is not an exported property` })),
    );
  }
  return all.filter((c) => chosen.includes(c));
}

/** `holder[name]` when `holder` is an object that has `name` as its own property; never a value inherited from its prototype. */
export function ownValue(holder: unknown, name: string): unknown {
  return typeof holder === 'object' && holder !== null && Object.hasOwn(holder, name) ? (holder as Record<string, unknown>)[name] : undefined;
}

/**
 * A record's CSV cell for a column: `fields.<alias>` from its custom values, arrays joined with `|`,
 * objects as JSON. With `escapeFormulas`, text that a spreadsheet would run as a formula is
 * neutralised (neutraliseFormula); numbers, booleans and dates are never formulas and stay as they are.
 */
export function csvCell(record: Record<string, unknown>, column: string, escapeFormulas = true): string {
  const v = column.startsWith('fields.') ? ownValue(record.fields, column.slice(7)) : ownValue(record, column);
  if (v === null || v === undefined) return '';
  const text = (t: string) => (escapeFormulas ? neutraliseFormula(t) : t);
  if (Array.isArray(v)) return text(v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join('|'));
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v);
  if (typeof v === 'string') return text(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return '';
}

/** The characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;
/** A cell that is only a number (`-3.5`, `1e3`, an E.164 phone number `+14155550100`): a spreadsheet reads it as that number, never as a formula. */
const PLAIN_NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A text cell made safe to open in a spreadsheet: one that begins with `=`, `+`, `-`, `@`, a tab or
 * a carriage return gets a leading `'`, so Excel, LibreOffice and Google Sheets show it as text
 * instead of evaluating it (OWASP's CSV injection advice). A cell that is only a number is left as
 * it is (it cannot call anything).
 */
export function neutraliseFormula(cell: string): string {
  return FORMULA_START.test(cell) && !PLAIN_NUMBER.test(cell) ? `'${cell}` : cell;
}

const NEEDS_QUOTES = /[",\r\n]/;

/**
 * One CSV line (RFC 4180: a cell holding `,` `"` or a line break is quoted, its quotes doubled),
 * for the export's hot path (bench row "export 1M contacts"; csv-stringify writes the header and the
 * error lists, where its generality costs nothing).
 */
export function csvLine(cells: readonly string[]): string {
  let line = '';
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i];
    if (i) line += ',';
    line += NEEDS_QUOTES.test(c) ? `"${c.replace(/"/g, '""')}"` : c;
  }
  return `${line}\n`;
}

/** The delimiter of a CSV file from its header line: whichever of `,` `;` and tab occurs most outside quotes (`,` on a tie). */
export function detectDelimiter(firstLine: string): ',' | ';' | '\t' {
  const counts = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (const ch of firstLine) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === ',' || ch === ';' || ch === '\t')) counts[ch]++;
  }
  if (counts[';'] > counts[','] && counts[';'] >= counts['\t']) return ';';
  if (counts['\t'] > counts[','] && counts['\t'] > counts[';']) return '\t';
  return ',';
}
