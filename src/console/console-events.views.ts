/** The event feed page: newest first, filtered by type and record, each event's JSON viewable, and a follow mode. */
import { type Chrome, h, type Html, layout, raw, when } from './console.views.js';

export interface EventView {
  id: string;
  type: string;
  occurredAt: string;
  sequence: number;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

export interface EventFilter {
  type?: string;
  record?: string;
}

/** The query string of a filter (and cursor), for links. */
export function eventsQuery(f: EventFilter, extra: Record<string, string | number> = {}): string {
  const q = new URLSearchParams();
  if (f.type) q.set('type', f.type);
  if (f.record) q.set('record', f.record);
  for (const [k, v] of Object.entries(extra)) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

const recordId = (e: EventView) => (e.data && (typeof e.data.id === 'number' || typeof e.data.id === 'string') ? String(e.data.id) : '');

/** The table rows of events (also answered alone to the follow script, which puts them on top). */
export function eventRows(events: EventView[], f: EventFilter): Html {
  return h`${events.map((e) => {
    const id = recordId(e);
    return h`<tr data-sequence="${e.sequence}">
  <td data-label="Sequence">${e.sequence}</td>
  <td data-label="Time">${when(e.occurredAt)}</td>
  <th scope="row" data-label="Type"><a href="/account/events${eventsQuery({ ...f, type: e.type })}">${e.type}</a></th>
  <td data-label="Record">${id ? h`<a href="/account/events${eventsQuery({ ...f, record: id })}">${id}</a>` : raw('<span class="muted">none</span>')}</td>
  <td data-label="JSON"><details><summary>JSON<span class="sr-only"> of event ${e.sequence}</span></summary><pre class="json" tabindex="0">${JSON.stringify(e, null, 2)}</pre></details></td>
</tr>`;
  })}`;
}

export function eventsPage(
  chrome: Chrome,
  d: { events: EventView[]; filter: EventFilter; types: string[]; before?: number; pageSize: number; error?: { field: string; message: string } | null },
): string {
  const f = d.filter;
  const newest = d.events[0]?.sequence ?? 0;
  const oldest = d.events[d.events.length - 1]?.sequence;
  const err = (field: string) => (d.error?.field === field ? h`<p id="${field}-error" class="field-error">${d.error.message}</p>` : '');
  const invalid = (field: string) => (d.error?.field === field ? raw(` aria-invalid="true" aria-describedby="${field}-error"`) : '');
  return layout(
    'Events',
    h`<form method="get" action="/account/events" class="card form filters" role="search" aria-label="Filter events">
  <div><label for="type">Type</label>
  <select id="type" name="type"${invalid('type')}><option value="">All types</option>${d.types.map(
    (t) => h`<option value="${t}"${t === f.type ? raw(' selected') : ''}>${t}</option>`,
  )}</select>${err('type')}</div>
  <div><label for="record">Record id</label>
  <input id="record" name="record" value="${f.record ?? ''}" maxlength="100" inputmode="text"${invalid('record')}>${err('record')}</div>
  <div class="actions"><button type="submit" class="btn btn-primary">Filter</button> <a class="btn btn-ghost" href="/account/events">Clear</a></div>
</form>
<div class="lead">
  <p>The change feed, newest first: every committed change, once. The API reads it in order with <code>GET /api/events</code>.</p>
  ${
    d.before === undefined
      ? h`<div class="actions" id="follow" data-rows="/account/events/rows${eventsQuery(f)}" data-after="${newest}">
    <button type="button" class="btn btn-primary" id="follow-toggle" aria-pressed="false" hidden>Follow new events</button>
    <a class="btn btn-ghost" href="/account/events${eventsQuery(f)}">Refresh</a>
    <span id="follow-status" class="help" role="status" aria-live="polite"></span>
  </div>`
      : h`<a class="btn btn-ghost" href="/account/events${eventsQuery(f)}">Newest events</a>`
  }
</div>
${
  d.events.length || d.before === undefined
    ? h`<div class="table-wrap"><table class="events">
<caption class="sr-only">Events, newest first</caption>
<thead><tr><th scope="col">Sequence</th><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Record</th><th scope="col">JSON</th></tr></thead>
<tbody id="event-rows">${eventRows(d.events, f)}</tbody></table></div>${d.events.length ? '' : h`<p class="card muted" id="no-events">No events yet.</p>`}`
    : h`<p class="card muted">No older events.</p>`
}
${
  d.events.length === d.pageSize && oldest !== undefined
    ? h`<nav class="pager" aria-label="Events pages"><a class="btn btn-ghost" rel="next" href="/account/events${eventsQuery(f, { before: oldest })}">Older events</a></nav>`
    : ''
}`,
    { ...chrome, current: 'events' },
  );
}
