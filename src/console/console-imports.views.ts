/** An import's page: status, a progress bar, the counts and the row errors (downloadable as CSV). */
import { type Chrome, h, layout, raw, when } from './console.views.js';

export interface ImportView {
  id: number;
  object: string;
  status: string;
  mode: string;
  source: string;
  fileName: string | null;
  counts: { total: number | null; processed: number; created: number; updated: number; skipped: number; failed: number };
  progress: number;
  error: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface ImportErrorView {
  row: number;
  column: string | null;
  code: string;
  message: string;
}

export function importLookupPage(chrome: Chrome): string {
  return layout(
    'Imports',
    h`<p>Start an import with <code>POST /api/imports</code> (a CSV upload or JSON rows); follow it here by its id.</p>
<form method="get" action="/account/imports/open" class="card form narrow">
  <label for="import-id">Import id</label>
  <input id="import-id" name="id" inputmode="numeric" pattern="[0-9]+" required maxlength="10">
  <div class="actions"><button type="submit" class="btn btn-primary">Open</button></div>
</form>`,
    { ...chrome, current: 'imports' },
  );
}

export function importPage(chrome: Chrome, d: { record: ImportView; errors: ImportErrorView[]; errorTotal: number }): string {
  const r = d.record;
  const c = r.counts;
  const running = r.status === 'queued' || r.status === 'running';
  const pct = Math.round(r.progress * 100);
  return layout(
    `Import ${r.id}`,
    h`<section class="card" aria-labelledby="import-h"${running ? raw(' data-refresh="1000"') : ''}>
  <h2 id="import-h">${r.object}, ${r.mode}${r.fileName ? h` from ${r.fileName}` : h` (${r.source})`}</h2>
  <p>Status: <span class="badge badge-${r.status === 'completed' ? 'succeeded' : r.status === 'failed' || r.status === 'cancelled' ? 'failed' : 'pending'}" id="import-state">${r.status}</span></p>
  <label for="import-progress">Progress</label>
  <progress id="import-progress" max="100" value="${pct}">${pct}%</progress>
  <p><span id="import-processed">${c.processed.toLocaleString('en-US')}</span> of ${c.total === null ? 'not yet counted' : c.total.toLocaleString('en-US')} rows · started ${when(r.createdAt)}${
    r.finishedAt ? h` · finished ${when(r.finishedAt)}` : ''
  }</p>
  <dl class="counts">
    <div><dt>Created</dt><dd id="count-created">${c.created}</dd></div>
    <div><dt>Updated</dt><dd id="count-updated">${c.updated}</dd></div>
    <div><dt>Skipped</dt><dd id="count-skipped">${c.skipped}</dd></div>
    <div><dt>Failed</dt><dd id="count-failed">${c.failed}</dd></div>
  </dl>
  ${r.error ? h`<div class="alert alert-error" role="alert">${r.error}</div>` : ''}
  ${running ? h`<p><a class="btn btn-ghost" href="/account/imports/${r.id}" id="refresh">Refresh</a></p>` : ''}
</section>
<h2>Row errors</h2>
${
  d.errorTotal
    ? h`<p><a class="btn btn-ghost" href="/account/imports/${r.id}/errors.csv" download>Download all ${d.errorTotal} errors as CSV</a></p>
<div class="table-wrap"><table>
<caption class="sr-only">Row errors${d.errorTotal > d.errors.length ? h` (the first ${d.errors.length} of ${d.errorTotal})` : ''}</caption>
<thead><tr><th scope="col">Row</th><th scope="col">Column</th><th scope="col">Code</th><th scope="col">Message</th></tr></thead>
<tbody>${d.errors.map(
        (e) =>
          h`<tr><th scope="row" data-label="Row">${e.row}</th><td data-label="Column">${e.column ?? ''}</td><td data-label="Code"><code>${e.code}</code></td><td data-label="Message">${e.message}</td></tr>`,
      )}</tbody></table></div>${d.errorTotal > d.errors.length ? h`<p class="muted">The first ${d.errors.length} of ${d.errorTotal}; the CSV has them all.</p>` : ''}`
    : h`<p class="card muted">No row errors.</p>`
}`,
    { ...chrome, current: 'imports' },
  );
}
