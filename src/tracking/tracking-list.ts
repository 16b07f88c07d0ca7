import { type FilterRegistry, PATTERN_FIELDS } from '../lists/filter-sql.js';
import { defineList } from '../lists/list-spec.js';

/** `properties.<key>`: a top-level property of the event, compared as its JSON text. */
const PROPERTY = /^properties\.(.{1,255})$/s;

const fields: FilterRegistry = {
  id: { type: 'int', sql: 'e.id' },
  occurredAt: { type: 'datetime', sql: 'e.occurred_at', description: 'when the event happened (its timestamp, or the receive time)' },
  receivedAt: { type: 'datetime', sql: 'e.received_at' },
  type: { type: 'enum', sql: 'e.type', values: ['track', 'identify'] },
  name: { type: 'string', sql: 'e.name', description: 'the event name (track)' },
  contactId: { type: 'id', sql: 'e.contact_id' },
  'contact.id': { type: 'id', sql: 'e.contact_id', description: 'the contact the event is attributed to' },
  userId: { type: 'string', sql: 'e.user_id' },
  anonymousId: { type: 'string', sql: 'e.anonymous_id' },
  messageId: { type: 'string', sql: 'e.message_id' },
  [PATTERN_FIELDS]: {
    describe: 'properties.<key>: a top-level property of the event, compared as its JSON text (a string as itself, 12 as "12", true as "true")',
    resolve(name: string) {
      const m = PROPERTY.exec(name);
      if (!m) return null;
      const key = m[1];
      return { type: 'string', sql: '', bound: (bind) => `(e.properties ->> ${bind(key)})` };
    },
  },
};

/** GET /api/tracking/events: newest first by default; `filter` takes the fields below and `properties.<key>`. */
export const TRACKED_EVENT_LIST_SPEC = defineList({
  name: 'tracked events',
  defaultOrderByDir: 'DESC',
  fields,
  sortable: ['id', 'occurredAt', 'receivedAt', 'name'],
  properties: ['id', 'occurredAt', 'receivedAt', 'type', 'name', 'contactId', 'userId', 'anonymousId', 'messageId', 'properties', 'context', 'flags'],
  dynamicFilterDoc: '`properties.<key>`: a top-level property of the event, compared as its JSON text',
});
