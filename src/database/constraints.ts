/**
 * Database errors translated in one place. Each feature registers the constraints of its tables
 * beside its entity (`registerConstraints` in `<name>.entity.ts` or `<name>.constraints.ts`); the
 * global exception filter consults this registry for every PostgreSQL integrity error, so no
 * service catches a unique or foreign-key violation itself and no pre-check SELECT races with the
 * constraint.
 */
import { missingReferenceMessage } from '../common/documented-rules.js';
import { AppError, type ErrorDetail } from '../common/errors.js';

/** The part of a `pg` error the registry reads (TypeORM's QueryFailedError keeps it as driverError). */
export interface PgErrorInfo {
  code?: string;
  constraint?: string;
  detail?: string;
  table?: string;
}

export type ConstraintRule =
  | {
      /** A unique index or constraint: 409 naming the field and the existing record's id. */
      kind: 'unique';
      field: string;
      /** What the resource is called in the message ("A contact with the email x already exists"). */
      resource: string;
      /**
       * How to find the record that holds the value: the table and a WHERE clause over the key's
       * values as $1..$n, in the order PostgreSQL reports them in the error's detail.
       */
      existing?: { table: string; where: string };
    }
  | {
      /** A foreign key checked on insert/update: the referenced record does not exist (400 naming the field). */
      kind: 'reference';
      field: string;
      /** The referenced resource ("user", "contact"). */
      target: string;
      /** 404 when the missing record is the one the path names, 400 (default) when it is a body property. */
      status?: 400 | 404;
    }
  | {
      /** A foreign key refusing a delete (ON DELETE RESTRICT): 409. */
      kind: 'restrict';
      message: string;
    }
  | {
      /** A CHECK constraint: 400 naming the field. */
      kind: 'check';
      field: string;
      message: string;
    };

const registry = new Map<string, ConstraintRule>();

/** Registers a table's constraints by name. Registering one name twice with another rule is a bug. */
export function registerConstraints(rules: Record<string, ConstraintRule>): void {
  for (const [name, rule] of Object.entries(rules)) {
    const known = registry.get(name);
    if (known && JSON.stringify(known) !== JSON.stringify(rule)) throw new Error(`constraint ${name} registered twice with different rules`);
    registry.set(name, rule);
  }
}

export function constraintRule(name: string | undefined): ConstraintRule | undefined {
  return name === undefined ? undefined : registry.get(name);
}

/** The pg error behind an error thrown by TypeORM or pg, if it is one. */
export function pgErrorOf(e: unknown): PgErrorInfo | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const driver = (e as { driverError?: PgErrorInfo }).driverError;
  if (driver && typeof driver.code === 'string') return driver;
  const direct = e as PgErrorInfo;
  return typeof direct.code === 'string' && /^[0-9A-Z]{5}$/.test(direct.code) ? direct : undefined;
}

/** True when `e` is a unique violation of the named constraint (for generated values that retry). */
export function isUniqueViolation(e: unknown, constraint: string): boolean {
  const pg = pgErrorOf(e);
  return pg?.code === '23505' && pg.constraint === constraint;
}

/**
 * The key values in a unique or foreign-key violation's detail:
 * `Key (lower(email::text))=(a@b.c) already exists.` → ['a@b.c'];
 * `Key (object, alias)=(contact, plan) already exists.` → ['contact', 'plan'].
 */
export function keyValues(detail: string | undefined, columns: number): string[] | null {
  const m = /^Key \((.*)\)=\((.*)\) (?:already exists|is not present in table|is still referenced)/s.exec(detail ?? '');
  if (!m) return null;
  if (columns <= 1) return [m[2]];
  const parts = m[2].split(', ');
  if (parts.length < columns) return null;
  // A value holding ", " itself: keep the leading values single and join the rest into the last.
  return [...parts.slice(0, columns - 1), parts.slice(columns - 1).join(', ')];
}

/** Number of $n placeholders a WHERE clause uses. */
function placeholders(where: string): number {
  let n = 0;
  for (const m of where.matchAll(/\$(\d+)/g)) n = Math.max(n, Number(m[1]));
  return n;
}

/**
 * Translates a PostgreSQL integrity error into the AppError the client should see, or returns null
 * when it is not one the registry knows. `lookup` runs the query that finds an existing record
 * (the filter gives it the pool: the failed transaction is over by then).
 */
export async function translateConstraintError(e: unknown, lookup: (sql: string, params: string[]) => Promise<{ id: number }[]>): Promise<AppError | null> {
  const pg = pgErrorOf(e);
  if (!pg || !pg.code?.startsWith('23')) return null;
  const rule = constraintRule(pg.constraint);
  if (!rule) return null;
  switch (rule.kind) {
    case 'unique': {
      if (pg.code !== '23505') return null;
      let existingId: number | null = null;
      const n = rule.existing ? placeholders(rule.existing.where) : 0;
      const values = keyValues(pg.detail, n);
      if (rule.existing && values) {
        const rows = await lookup(`SELECT id FROM ${rule.existing.table} WHERE ${rule.existing.where} LIMIT 1`, values).catch(() => []);
        existingId = rows[0]?.id ?? null;
      }
      const value = values?.[values.length - 1];
      const detail: ErrorDetail = { field: rule.field, message: 'is already taken', existingId };
      const what = value !== undefined ? `the ${rule.field} ${value}` : `this ${rule.field}`;
      return new AppError('conflict', `A ${rule.resource} with ${what} already exists`, [detail]);
    }
    case 'reference': {
      if (pg.code !== '23503') return null;
      const value = keyValues(pg.detail, 1)?.[0];
      const message = value !== undefined ? missingReferenceMessage(rule.target, value) : `the ${rule.target} does not exist`;
      if (rule.status === 404) return new AppError('not_found', `${capitalize(rule.target)} ${value ?? ''} not found`.replace(/\s+not found$/, ' not found'));
      return new AppError('validation_failed', `${rule.field}: ${message}`, [{ field: rule.field, message }]);
    }
    case 'restrict':
      return pg.code === '23503' ? new AppError('conflict', rule.message) : null;
    case 'check':
      return pg.code === '23514' ? new AppError('validation_failed', `${rule.field}: ${rule.message}`, [{ field: rule.field, message: rule.message }]) : null;
  }
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
