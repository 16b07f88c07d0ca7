/**
 * The filter of a tracked_event trigger and of an untilEvent wait on a tracked event: the contacts
 * filter language over the event's properties (`properties.<name>`, a top-level property), typed as
 * scoring's tracked-event rules type them: a field compared by order (gt, lt, between) or with a
 * number is numeric, one compared with true/false boolean, any other text. Evaluated in SQL over
 * the events' properties as jsonb, many events in one statement.
 */
import { compileFilter, type CompiledFilter, type FilterField, type FilterRegistry } from '../lists/filter-sql.js';
import { type FilterNode, FilterSyntaxError, parseFilterText, readJsonFilter } from '../lists/filter-syntax.js';
import { AppError } from '../common/errors.js';

/** The jsonb expression the filters are compiled over. */
export const PROPERTIES_COLUMN = 'p.properties';
const PROPERTY_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** The registry of the `properties.<name>` fields a filter names. */
function propertiesRegistry(node: FilterNode): FilterRegistry {
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
      ? { type: 'json-scalar', sql: PROPERTIES_COLUMN, json: { key, valueType: 'number' } }
      : boolean
        ? { type: 'json-scalar', sql: PROPERTIES_COLUMN, json: { key, valueType: 'boolean' } }
        : { type: 'json-text', sql: PROPERTIES_COLUMN, json: { key, valueType: 'string' } };
    registry[n.field] = registry[n.field]?.type === 'json-scalar' ? registry[n.field] : field;
  };
  visit(node);
  return registry;
}

/**
 * A filter over a tracked event's properties compiled (a 400 naming `filter` when it does not:
 * only `properties.<name>` fields exist). Answers its JSON form and the SQL over PROPERTIES_COLUMN.
 */
export function compilePropertiesFilter(raw: unknown): { node: FilterNode; compiled: CompiledFilter } {
  let node: FilterNode;
  try {
    node = typeof raw === 'string' ? parseFilterText(raw) : readJsonFilter(raw);
  } catch (e) {
    if (e instanceof FilterSyntaxError) throw new AppError('validation_failed', `Invalid filter: ${e.message}`, [{ field: 'filter', message: e.message }]);
    throw e;
  }
  return compileFilter(node, propertiesRegistry(node));
}
