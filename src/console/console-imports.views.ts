/** An import's page: status, a progress bar, the counts and the row errors (downloadable as CSV). */
import type { MappingForm } from './console-imports.service.js';
import { type Chrome, errorBox, h, layout, raw, when } from './console.views.js';

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

const fieldError = (id: string, message: string | undefined) => (message ? h`<p id="${id}-error" class="field-error">${message}</p>` : '');
const invalid = (id: string, message: string | undefined) => (message ? raw(` aria-invalid="true" aria-describedby="${id}-error"`) : '');
const options = (list: readonly string[], current: string) => list.map((o) => h`<option value="${o}"${o === current ? raw(' selected') : ''}>${o}</option>`);
/** The messages of the fields a form does not show (the rest of the API's details), or a pointer to the marked fields. */
const otherErrors = (err: Map<string, string>, shown: (k: string) => boolean) => {
  const other = [...err].filter(([k]) => !shown(k)).map(([, m]) => m);
  return errorBox(other.length ? other.join('; ') : err.size ? 'Correct the fields marked below.' : null);
};

/**
 * The imports page: the upload form (a CSV and what its rows become; its columns are mapped on the
 * next page) and the form that opens an import by its id. The CSRF token is the form's first field:
 * the server checks it before it stores a byte of the file.
 */
export function importsPage(
  chrome: Chrome,
  d: { mayWrite: boolean; objects: readonly string[]; maxBytes: number; object?: string; errors?: Map<string, string> },
): string {
  const err = d.errors ?? new Map<string, string>();
  const mib = Math.floor(d.maxBytes / (1024 * 1024));
  const limit = mib >= 1 ? `${mib.toLocaleString('en-US')} MiB` : `${d.maxBytes.toLocaleString('en-US')} bytes`;
  return layout(
    'Imports',
    h`${otherErrors(err, (k) => k === 'object' || k === 'file')}
${
  d.mayWrite
    ? h`<form method="post" action="/account/imports/upload" enctype="multipart/form-data" class="card form" aria-labelledby="upload-h">
  <input type="hidden" name="_csrf" value="${chrome.csrf}">
  <h2 id="upload-h">Import a CSV file</h2>
  <label for="object">Records</label>
  <select id="object" name="object"${invalid('object', err.get('object'))}>${options(d.objects, d.object ?? 'contacts')}</select>${fieldError('object', err.get('object'))}
  <label for="file">CSV file</label>
  <input id="file" name="file" type="file" accept=".csv,text/csv,text/plain" required aria-describedby="file-help${err.get('file') ? ' file-error' : ''}"${err.get('file') ? raw(' aria-invalid="true"') : ''}>
  <p id="file-help" class="help">UTF-8, a header line, <code>,</code> <code>;</code> or tab separated; at most ${limit}. You map its columns on the next page.</p>
  ${fieldError('file', err.get('file'))}
  <div class="actions"><button type="submit" class="btn btn-primary">Upload and map columns</button></div>
</form>`
    : h`<p class="card muted">Importing needs the permission <code>imports:write</code>.</p>`
}
<form method="get" action="/account/imports/open" class="card form narrow" aria-labelledby="open-h">
  <h2 id="open-h">Open an import</h2>
  <p class="help">Imports started with <code>POST /api/imports</code> are followed here by their id.</p>
  <label for="import-id">Import id</label>
  <input id="import-id" name="id" inputmode="numeric" pattern="[0-9]+" required maxlength="10">
  <div class="actions"><button type="submit" class="btn btn-primary">Open</button></div>
</form>`,
    { ...chrome, current: 'imports' },
  );
}

/** The mapping form of an uploaded CSV: a target per column (a property, a custom field or ignore), the mode, the id property and empty cells. */
export function mappingPage(chrome: Chrome, d: MappingForm, errors?: Map<string, string>): string {
  const err = errors ?? new Map<string, string>();
  const u = d.upload;
  const v = d.values;
  const shown = (k: string) => ['mode', 'idProperty', 'emptyValues'].includes(k) || /^col\d+$/.test(k);
  const targetOptions = (current: string) =>
    h`<option value="ignore"${current === 'ignore' ? raw(' selected') : ''}>(ignore this column)</option><optgroup label="Properties">${options(d.properties, current)}</optgroup>${
      d.fields.length ? h`<optgroup label="Custom fields">${options(d.fields, current)}</optgroup>` : ''
    }`;
  const rows = u.header.map((column, i) => {
    const id = `col${i}`;
    return h`<tr>
  <th scope="row" data-label="Column"><label for="${id}">${column === '' ? raw('<span class="muted">(no name)</span>') : column}</label></th>
  <td data-label="Maps to"><select id="${id}" name="${id}"${invalid(id, err.get(id))}>${targetOptions(v.targets[i] ?? 'ignore')}</select>${fieldError(id, err.get(id))}</td>
</tr>`;
  });
  const modes: [string, string][] = [
    ['create', 'Create: every row is a new record'],
    ['update', 'Update: rows name existing records (by the id property); unknown ones fail'],
    ['upsert', 'Upsert: update the record when it exists, else create it'],
  ];
  return layout(
    'Map the columns',
    h`${otherErrors(err, shown)}
<p>${u.fileName} · ${u.header.length} column${u.header.length === 1 ? '' : 's'} · ${u.fileSize.toLocaleString('en-US')} bytes, imported as <strong>${u.object}</strong>.</p>
<form method="post" action="/account/imports/uploads/${u.id}" class="card form">
  <input type="hidden" name="_csrf" value="${chrome.csrf}">
  <div class="table-wrap"><table class="mapping">
  <caption>Each column of the file's header, and the property it fills</caption>
  <thead><tr><th scope="col">Column</th><th scope="col">Maps to</th></tr></thead>
  <tbody>${rows}</tbody></table></div>
  <fieldset${err.get('mode') ? raw(' aria-describedby="mode-error"') : ''}><legend>Mode</legend>
    ${modes.map(([m, label]) => h`<label class="check"><input type="radio" name="mode" value="${m}"${v.mode === m ? raw(' checked') : ''}> ${label}</label><br>`)}
    ${fieldError('mode', err.get('mode'))}
  </fieldset>
  <label for="idProperty">Id property (update and upsert)</label>
  <select id="idProperty" name="idProperty" aria-describedby="idProperty-help${err.get('idProperty') ? ' idProperty-error' : ''}"${err.get('idProperty') ? raw(' aria-invalid="true"') : ''}>
    <option value=""${v.idProperty === '' ? raw(' selected') : ''}>(the default: ${u.object === 'contacts' ? 'email, or id to update' : 'id'})</option>${options(
      [...d.idProperties, ...(u.object === 'contacts' ? d.fields.map((f) => f.slice('fields.'.length)) : [])],
      v.idProperty,
    )}
  </select>
  <p id="idProperty-help" class="help">The property that names a row's existing record${u.object === 'contacts' ? ' (for contacts also a unique-identifier custom field)' : ''}.</p>
  ${fieldError('idProperty', err.get('idProperty'))}
  <label for="emptyValues">Empty cells</label>
  <select id="emptyValues" name="emptyValues"${invalid('emptyValues', err.get('emptyValues'))}>${options(['ignore', 'clear'], v.emptyValues)}</select>${fieldError(
    'emptyValues',
    err.get('emptyValues'),
  )}
  <div class="actions"><button type="submit" class="btn btn-primary">Start import</button> <a class="btn btn-ghost" href="/account/imports">Cancel</a></div>
</form>`,
    { ...chrome, current: 'imports' },
  );
}

/** Statuses of an import that has not ended (its page follows its progress). */
const OPEN = ['queued', 'validating', 'running'];

/**
 * An import's page. While it runs, the console script polls its progress (JSON) every `pollMs` and
 * moves the bar and the counts, then reloads the page once it has ended; without the script, the
 * Refresh link.
 */
export function importPage(chrome: Chrome, d: { record: ImportView; errors: ImportErrorView[]; errorTotal: number; pollMs: number }): string {
  const r = d.record;
  const c = r.counts;
  const running = OPEN.includes(r.status);
  const pct = Math.round(r.progress * 100);
  return layout(
    `Import ${r.id}`,
    h`<section class="card" aria-labelledby="import-h"${running ? h` data-progress="/account/imports/${r.id}/progress" data-interval="${d.pollMs}"` : ''}>
  <h2 id="import-h">${r.object}, ${r.mode}${r.fileName ? h` from ${r.fileName}` : h` (${r.source})`}</h2>
  <p>Status: <span class="badge badge-${r.status === 'completed' ? 'succeeded' : r.status === 'failed' || r.status === 'canceled' ? 'failed' : 'pending'}" id="import-state">${r.status}</span></p>
  <label for="import-progress">Progress</label>
  <progress id="import-progress" max="100" value="${pct}">${pct}%</progress>
  <p><span id="import-processed">${c.processed.toLocaleString('en-US')}</span> of <span id="import-total">${c.total === null ? 'not yet counted' : c.total.toLocaleString('en-US')}</span> rows · started ${when(r.createdAt)}${
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
