/**
 * What other features take from tracking without depending on its services: the behavioural
 * fields of the contacts filter language, compiled to SQL over the per-contact, per-name, per-day
 * counts (`tracked_event_daily`), never over the raw events.
 *
 * - `events.<name>.count`: the contact's events of that name (all kept time);
 * - `events.<name>.count.<1d|7d|30d|90d>`: those on the last N UTC days, today included, at the
 *   query's `now` (the injected clock's time): an event of day D counts until day D+N begins;
 * - `events.<name>.firstAt` / `.lastAt`: the first and last time, empty (isEmpty) for never.
 */
import type { FilterNode } from '../lists/filter-syntax.js';
import type { FilterField, FilterRegistry, PatternFields } from '../lists/filter-sql.js';

export const BEHAVIOUR_WINDOWS = { '1d': 1, '7d': 7, '30d': 30, '90d': 90 } as const;
export type BehaviourWindow = keyof typeof BEHAVIOUR_WINDOWS;

const FIELD = /^events\.(.+)\.(count(?:\.(1d|7d|30d|90d))?|firstAt|lastAt)$/;

/** The parts of a behavioural field name, or null. */
export function behaviourField(name: string): { event: string; measure: 'count' | 'firstAt' | 'lastAt'; window: BehaviourWindow | null } | null {
  const m = FIELD.exec(name);
  if (!m || m[1].length > 255) return null;
  const measure = m[2].startsWith('count') ? 'count' : (m[2] as 'firstAt' | 'lastAt');
  return { event: m[1], measure, window: (m[3] as BehaviourWindow | undefined) ?? null };
}

/** The first UTC day (YYYY-MM-DD) a window of `days` days ending today (at `now`) holds. */
export function windowStartDay(now: Date, days: number): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1))).toISOString().slice(0, 10);
}

/** The behavioural fields over contacts aliased `contactAlias` (the filter registry's pattern fields). */
export function behaviourFields(contactAlias = 'c'): PatternFields {
  return {
    describe:
      'behavioural fields: events.<name>.count, events.<name>.count.<1d|7d|30d|90d> (whole numbers), events.<name>.firstAt and events.<name>.lastAt (date-times; isEmpty for never)',
    resolve(name: string): FilterField | null {
      const f = behaviourField(name);
      if (!f) return null;
      const of = (bind: (v: unknown) => string) => `d.contact_id = ${contactAlias}.id AND d.name = ${bind(f.event)}`;
      if (f.measure === 'count') {
        const window = f.window;
        return {
          type: 'int',
          sql: '',
          description: 'tracked events of that name',
          bound: (bind, now) =>
            `COALESCE((SELECT sum(d.count) FROM tracked_event_daily d WHERE ${of(bind)}${
              window ? ` AND d.day >= CAST(${bind(windowStartDay(now, BEHAVIOUR_WINDOWS[window]))} AS date)` : ''
            }), 0)`,
        };
      }
      const agg = f.measure === 'firstAt' ? 'min(d.first_at)' : 'max(d.last_at)';
      return { type: 'datetime', sql: '', bound: (bind) => `(SELECT ${agg} FROM tracked_event_daily d WHERE ${of(bind)})` };
    },
  };
}

/**
 * Whether a filter's result can change with time alone: it names a windowed count, or compares
 * with a relative date (`now-7d`). Such a segment is re-evaluated as a whole periodically.
 */
export function dependsOnTime(node: FilterNode | null | undefined): boolean {
  if (!node) return false;
  if ('and' in node) return node.and.some(dependsOnTime);
  if ('or' in node) return node.or.some(dependsOnTime);
  if ('not' in node) return dependsOnTime(node.not);
  if (behaviourField(node.field)?.window) return true;
  const values = Array.isArray(node.value) ? node.value : [node.value];
  return values.some((v) => typeof v === 'string' && /^\s*now/.test(v));
}

/** Whether a filter names a behavioural field (its segments are re-evaluated when a contact's tracked events change). */
export function namesBehaviour(node: FilterNode | null | undefined): boolean {
  if (!node) return false;
  if ('and' in node) return node.and.some(namesBehaviour);
  if ('or' in node) return node.or.some(namesBehaviour);
  if ('not' in node) return namesBehaviour(node.not);
  return behaviourField(node.field) !== null;
}

/**
 * A tracked event's property name a filter may name: a top-level key of lower-case letters, digits
 * and `_` (the filter compiler writes JSON keys into the SQL text and accepts only these).
 */
const PROPERTY_NAME = /^[a-z][a-z0-9_]{0,127}$/;

/**
 * The filter registry over a tracked event's properties (`properties.<name>`), over the jsonb
 * expression `column`, for every feature that filters tracked events (scoring's trackedEvent rules,
 * workflows' tracked_event triggers and untilEvent waits). A field compared by order (gt, lt, between)
 * or with a number is numeric, one compared with true/false boolean, any other text. Fields that are
 * not `properties.<name>` are left out, so the filter fails to compile naming them.
 */
export function trackedPropertiesRegistry(node: FilterNode, column: string): FilterRegistry {
  const registry: FilterRegistry = {};
  const visit = (n: FilterNode) => {
    if ('and' in n || 'or' in n) {
      ('and' in n ? n.and : n.or).forEach(visit);
      return;
    }
    if ('not' in n) {
      visit(n.not);
      return;
    }
    if (!n.field.startsWith('properties.')) return;
    const key = n.field.slice('properties.'.length);
    if (!PROPERTY_NAME.test(key)) return;
    const values = Array.isArray(n.value) ? n.value : [n.value];
    const numeric = ['gt', 'gte', 'lt', 'lte', 'between'].includes(n.op) || values.some((v) => typeof v === 'number');
    const boolean = values.some((v) => typeof v === 'boolean');
    const field: FilterField = numeric
      ? { type: 'json-scalar', sql: column, json: { key, valueType: 'number' } }
      : boolean
        ? { type: 'json-scalar', sql: column, json: { key, valueType: 'boolean' } }
        : { type: 'json-text', sql: column, json: { key, valueType: 'string' } };
    registry[n.field] = registry[n.field]?.type === 'json-scalar' ? registry[n.field] : field;
  };
  visit(node);
  return registry;
}
