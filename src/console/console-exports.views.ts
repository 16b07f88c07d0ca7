/** The export pages: the form that starts one, and an export's page (status, counts, download when done). */
import { type Chrome, errorBox, h, layout, raw, when } from './console.views.js';

export interface ExportFormValues {
  object: string;
  format: string;
  filter: string;
}

export interface ExportView {
  id: number;
  object: string;
  format: string;
  status: string;
  rows: number | null;
  size: number | null;
  error: string | null;
  download: { url: string; expiresAt: string } | null;
  createdAt: string;
  finishedAt: string | null;
}

const fieldError = (id: string, message: string | undefined) => (message ? h`<p id="${id}-error" class="field-error">${message}</p>` : '');
const invalid = (id: string, message: string | undefined) => (message ? raw(` aria-invalid="true" aria-describedby="${id}-error"`) : '');

export function newExportPage(
  chrome: Chrome,
  d: { objects: readonly string[]; formats: readonly string[]; values?: ExportFormValues; errors?: Map<string, string> },
): string {
  const v = d.values ?? { object: 'contacts', format: 'csv', filter: '' };
  const err = d.errors ?? new Map<string, string>();
  const other = [...err].filter(([k]) => !['object', 'format', 'filter'].includes(k)).map(([, m]) => m);
  const options = (list: readonly string[], current: string) => list.map((o) => h`<option value="${o}"${o === current ? raw(' selected') : ''}>${o}</option>`);
  return layout(
    'Start an export',
    h`${errorBox(other.length ? other.join('; ') : err.size ? 'Correct the fields marked below.' : null)}
<form method="post" action="/account/exports" class="card form">
  <input type="hidden" name="_csrf" value="${chrome.csrf}">
  <label for="object">Records</label>
  <select id="object" name="object"${invalid('object', err.get('object'))}>${options(d.objects, v.object)}</select>${fieldError('object', err.get('object'))}
  <label for="format">Format</label>
  <select id="format" name="format"${invalid('format', err.get('format'))}>${options(d.formats, v.format)}</select>${fieldError('format', err.get('format'))}
  <label for="filter">Filter (optional)</label>
  <input id="filter" name="filter" maxlength="10000" value="${v.filter}" aria-describedby="filter-help${err.get('filter') ? ' filter-error' : ''}"${err.get('filter') ? raw(' aria-invalid="true"') : ''}>
  <p id="filter-help" class="help">In the list filter language, e.g. <code>email ~ "@example.com"</code>. Empty: every record.</p>
  ${fieldError('filter', err.get('filter'))}
  <div class="actions"><button type="submit" class="btn btn-primary">Start export</button></div>
</form>`,
    { ...chrome, current: 'exports' },
  );
}

export function exportPage(chrome: Chrome, e: ExportView): string {
  const running = e.status === 'queued' || e.status === 'running';
  return layout(
    `Export ${e.id}`,
    h`<section class="card" aria-labelledby="export-h"${running ? raw(' data-refresh="2000"') : ''} id="export-status">
  <h2 id="export-h">${e.object} as ${e.format}</h2>
  <p>Status: <span class="badge badge-${e.status === 'completed' ? 'succeeded' : e.status === 'failed' ? 'failed' : 'pending'}" id="export-state">${e.status}</span></p>
  ${running ? h`<progress id="export-progress" aria-label="Export progress"></progress>` : ''}
  <p>${e.rows === null ? raw('<span class="muted">no rows written yet</span>') : h`${e.rows.toLocaleString('en-US')} rows`}${
    e.size === null ? '' : h`, ${e.size.toLocaleString('en-US')} bytes`
  } · started ${when(e.createdAt)}${e.finishedAt ? h` · finished ${when(e.finishedAt)}` : ''}</p>
  ${e.error ? h`<div class="alert alert-error" role="alert">${e.error}</div>` : ''}
  <div class="actions">
    ${e.download ? h`<a class="btn btn-primary" href="${e.download.url}" download>Download</a> <span class="muted">link valid until ${when(e.download.expiresAt)}</span>` : ''}
    ${running ? h`<a class="btn btn-ghost" href="/account/exports/${e.id}" id="refresh">Refresh</a>` : ''}
    <a class="btn btn-ghost" href="/account/exports/new">Start another export</a>
  </div>
</section>`,
    { ...chrome, current: 'exports' },
  );
}
