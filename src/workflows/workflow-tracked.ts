/**
 * The filter of a tracked_event trigger and of an untilEvent wait on a tracked event: the contacts
 * filter language over the event's properties (`properties.<name>`, a top-level property), typed as
 * every tracked-event filter is (tracking's trackedPropertiesRegistry). Evaluated in SQL over
 * the events' properties as jsonb, many events in one statement.
 */
import { compileFilter, type CompiledFilter } from '../lists/filter-sql.js';
import { trackedPropertiesRegistry } from '../tracking/index.js';
import { type FilterNode, FilterSyntaxError, parseFilterText, readJsonFilter } from '../lists/filter-syntax.js';
import { AppError } from '../common/errors.js';

/** The jsonb expression the filters are compiled over. */
export const PROPERTIES_COLUMN = 'p.properties';

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
  return compileFilter(node, trackedPropertiesRegistry(node, PROPERTIES_COLUMN));
}
