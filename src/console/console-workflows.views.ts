/** The workflow pages of the console: the list (status, counts) and a workflow's page (its step graph with counts, pause and resume). */
import { type Chrome, h, layout, pager, when } from './console.views.js';
import { type GraphStep, workflowGraph } from './workflow-graph.js';

export interface WorkflowStatsView {
  entered: number;
  active: number;
  completed: number;
  converted: number;
  exited: number;
  failed: number;
}

export interface WorkflowView {
  id: number;
  name: string;
  description: string | null;
  status: string;
  version: number;
  trigger: Record<string, unknown>;
  stats: WorkflowStatsView;
  modifiedAt?: string | null;
}

const badge = (status: string) => h`<span class="badge badge-${status === 'active' ? 'on' : status === 'paused' ? 'off' : 'pending'}">${status}</span>`;
const triggerOf = (t: Record<string, unknown>) => (typeof t.type === 'string' ? t.type.replace(/_/g, ' ') : '');

/** Messages of the actions that answer with a redirect (?done=...): a fixed list, nothing from the URL is echoed. */
const DONE: Record<string, string> = {
  paused: 'The workflow is paused: no step runs and no contact enters until it is resumed.',
  resumed: 'The workflow is active again.',
};

export function workflowsPage(chrome: Chrome, d: { workflows: WorkflowView[]; total: number; page: number; pageSize: number }): string {
  const rows = d.workflows.map(
    (w) => h`<tr>
  <th scope="row" data-label="Workflow"><a href="/account/workflows/${w.id}">${w.name}</a></th>
  <td data-label="Status">${badge(w.status)}</td>
  <td data-label="Trigger">${triggerOf(w.trigger)}</td>
  <td data-label="Entered">${w.stats.entered}</td>
  <td data-label="In progress">${w.stats.active}</td>
  <td data-label="Completed">${w.stats.completed}</td>
  <td data-label="Converted">${w.stats.converted}</td>
  <td data-label="Failed">${w.stats.failed}</td>
</tr>`,
  );
  return layout(
    'Workflows',
    h`<p>Automations that move contacts through steps. Define them with <code>POST /api/workflows</code>; follow and pause them here.</p>
${
  d.workflows.length
    ? h`<div class="table-wrap"><table>
<caption class="sr-only">Workflows (${d.total})</caption>
<thead><tr><th scope="col">Workflow</th><th scope="col">Status</th><th scope="col">Trigger</th><th scope="col">Entered</th><th scope="col">In progress</th><th scope="col">Completed</th><th scope="col">Converted</th><th scope="col">Failed</th></tr></thead>
<tbody>${rows}</tbody></table></div>
${pager('Workflows', d.page, d.pageSize, d.total, (n) => `/account/workflows?page=${n}`)}`
    : h`<p class="card muted">No workflows yet.</p>`
}`,
    { ...chrome, current: 'workflows' },
  );
}

export function workflowPage(chrome: Chrome, d: { workflow: WorkflowView; steps: GraphStep[]; mayWrite: boolean; done?: string }): string {
  const w = d.workflow;
  const s = w.stats;
  const action = (verb: 'pause' | 'resume', label: string) =>
    h`<form method="post" action="/account/workflows/${w.id}/${verb}" class="inline"><input type="hidden" name="_csrf" value="${chrome.csrf}"><button type="submit" class="btn ${verb === 'pause' ? 'btn-ghost' : 'btn-primary'}">${label}</button></form>`;
  const notice = d.done && Object.hasOwn(DONE, d.done) ? DONE[d.done] : null;
  return layout(
    w.name,
    h`${notice ? h`<div class="alert alert-ok" role="status">${notice}</div>` : ''}
<section class="card" aria-labelledby="wf-h">
  <h2 id="wf-h">Status ${badge(w.status)} <span class="muted">version ${w.version} · trigger ${triggerOf(w.trigger)}${w.modifiedAt ? h` · changed ${when(w.modifiedAt)}` : ''}</span></h2>
  ${w.description ? h`<p>${w.description}</p>` : ''}
  <dl class="counts">
    <div><dt>Entered</dt><dd id="wf-entered">${s.entered}</dd></div>
    <div><dt>In progress</dt><dd id="wf-active">${s.active}</dd></div>
    <div><dt>Completed</dt><dd id="wf-completed">${s.completed}</dd></div>
    <div><dt>Converted</dt><dd id="wf-converted">${s.converted}</dd></div>
    <div><dt>Exited</dt><dd>${s.exited}</dd></div>
    <div><dt>Failed</dt><dd>${s.failed}</dd></div>
  </dl>
  ${
    d.mayWrite && (w.status === 'active' || w.status === 'paused')
      ? h`<div class="actions">${w.status === 'active' ? action('pause', 'Pause') : action('resume', 'Resume')}</div>`
      : ''
  }
</section>
<h2>Steps</h2>
<div class="graph-wrap">${workflowGraph(d.steps, { title: `The steps of ${w.name}, with the contacts waiting at each and done with it` })}</div>
<div class="table-wrap"><table class="steps">
<caption class="sr-only">Each step with its contacts</caption>
<thead><tr><th scope="col">Step</th><th scope="col">Type</th><th scope="col">Waiting there</th><th scope="col">Completed</th><th scope="col">Failed</th></tr></thead>
<tbody>${d.steps.map(
      (st) =>
        h`<tr data-step="${st.key}"><th scope="row" data-label="Step">${st.name ?? st.key}${st.name ? h` <code class="muted">${st.key}</code>` : ''}</th><td data-label="Type">${st.type.replace(/_/g, ' ')}</td><td data-label="Waiting there">${st.waiting}</td><td data-label="Completed">${st.completed}</td><td data-label="Failed">${st.failed}</td></tr>`,
    )}</tbody></table></div>
<p><a href="/account/workflows">All workflows</a></p>`,
    { ...chrome, current: 'workflows' },
  );
}
