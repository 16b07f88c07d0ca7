/** The webhook pages of the console: list, create form, secret (shown once), a webhook with its delivery log, delete confirmation. */
import { type Chrome, errorBox, h, type Html, layout, pager, raw, when } from './console.views.js';
import type { WebhookFormValues } from './webhook-form.js';

export interface WebhookView {
  id: number;
  url: string;
  events: string[];
  description: string | null;
  isActive: boolean;
  disabledReason: string | null;
  lastSuccessAt: string | null;
  failingSince: string | null;
  previousSecretExpiresAt: string | null;
  createdAt?: string | null;
}

export interface WebhookSummaryView {
  attempts24h: number;
  successRate24h: number | null;
  lastDelivery: { status: string | null; code: number | null; at: string; error: string | null } | null;
}

export interface AttemptView {
  attempt: number;
  at: string;
  code: number | null;
  durationMs: number;
  error: string | null;
  response: string;
}

export interface DeliveryView {
  id: number;
  eventId: string;
  eventType: string;
  status: string;
  attemptCount: number;
  attempts: AttemptView[];
  nextAttemptAt: string | null;
  lastError: string | null;
  createdAt: string;
}

export interface TestResultView {
  success: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  response: string;
}

/** Messages of the actions that answer with a redirect (?done=...): a fixed list, nothing from the URL is echoed. */
export const WEBHOOK_NOTICES: Record<string, string> = {
  paused: 'The webhook is paused: no deliveries are sent until it is resumed.',
  resumed: 'The webhook is active again.',
  resent: 'The delivery is queued again and will be sent in a moment.',
  deleted: 'The webhook and its deliveries are deleted.',
};

const notice = (key: string | undefined) => (key && WEBHOOK_NOTICES[key] ? h`<div class="alert alert-ok" role="status">${WEBHOOK_NOTICES[key]}</div>` : '');
const state = (w: WebhookView) =>
  w.isActive ? h`<span class="badge badge-on">active</span>` : h`<span class="badge badge-off">${w.disabledReason ? 'disabled' : 'paused'}</span>`;
const events = (list: string[]) => h`<ul class="perms">${list.map((e) => h`<li><code>${e}</code></li>`)}</ul>`;
const csrfField = (chrome: Chrome) => h`<input type="hidden" name="_csrf" value="${chrome.csrf}">`;

function lastResult(s: WebhookSummaryView | undefined): Html {
  const d = s?.lastDelivery;
  if (!d) return raw('<span class="muted">none yet</span>');
  return h`<span class="badge badge-${d.code !== null && d.code >= 200 && d.code < 300 ? 'succeeded' : 'failed'}">${d.code ?? 'no answer'}</span> ${when(d.at)}${
    d.error ? h`<br><span class="muted">${d.error}</span>` : ''
  }`;
}

const rate = (s: WebhookSummaryView | undefined) =>
  s?.successRate24h === null || s === undefined ? raw('<span class="muted">no attempts</span>') : h`${Math.round(s.successRate24h * 100)}% of ${s.attempts24h}`;

export function webhooksPage(
  chrome: Chrome,
  d: { webhooks: WebhookView[]; summaries: Map<number, WebhookSummaryView>; total: number; page: number; pageSize: number; done?: string; mayWrite: boolean },
): string {
  const rows = d.webhooks.map(
    (w) => h`<tr>
  <th scope="row" class="breakable"><a href="/account/webhooks/${w.id}">${w.url}</a>${w.description ? h`<br><span class="muted">${w.description}</span>` : ''}</th>
  <td data-label="Events">${events(w.events)}</td>
  <td data-label="Status">${state(w)}</td>
  <td data-label="Last delivery">${lastResult(d.summaries.get(w.id))}</td>
  <td data-label="Success (24 h)">${rate(d.summaries.get(w.id))}</td>
</tr>`,
  );
  return layout(
    'Webhooks',
    h`${notice(d.done)}
<div class="lead"><p>Webhooks send every change of the subscribed types to your URL, signed, and retry for 72 h.</p>${
      d.mayWrite ? h`<a class="btn btn-primary" href="/account/webhooks/new">Add a webhook</a>` : ''
    }</div>
${
  d.webhooks.length
    ? h`<div class="table-wrap"><table>
<caption class="sr-only">Webhooks</caption>
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Last delivery</th><th scope="col">Success (24 h)</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : h`<p class="card muted">No webhooks yet.</p>`
}
${pager('Webhooks', d.page, d.pageSize, d.total, (n) => `/account/webhooks?page=${n}`)}`,
    { ...chrome, current: 'webhooks' },
  );
}

const fieldError = (id: string, message: string | undefined) => (message ? h`<p id="${id}-error" class="field-error">${message}</p>` : '');
const describedBy = (id: string, message: string | undefined, help?: string) => {
  const ids = [help, message ? `${id}-error` : null].filter(Boolean).join(' ');
  return ids ? h` aria-describedby="${ids}"${message ? raw(' aria-invalid="true"') : ''}` : '';
};

export function newWebhookPage(chrome: Chrome, d: { types: string[]; values?: WebhookFormValues; errors?: Map<string, string> }): string {
  const v = d.values ?? { url: '', events: [], description: '' };
  const err = d.errors ?? new Map<string, string>();
  const checked = new Set(v.events);
  const known = new Set(['url', 'events', 'description']);
  const other = [...err].filter(([k]) => !known.has(k)).map(([, m]) => m);
  const groups = new Map<string, string[]>();
  for (const t of d.types) {
    const g = t.split('.')[0];
    groups.set(g, [...(groups.get(g) ?? []), t]);
  }
  return layout(
    'Add a webhook',
    h`${errorBox(other.length ? other.join('; ') : err.size ? 'Correct the fields marked below.' : null)}
<form method="post" action="/account/webhooks" class="card form" novalidate>
  ${csrfField(chrome)}
  <label for="url">URL</label>
  <input id="url" name="url" type="url" required maxlength="2048" value="${v.url}"${describedBy('url', err.get('url'), 'url-help')} autofocus>
  <p id="url-help" class="help">Where the events are posted: an https URL.</p>
  ${fieldError('url', err.get('url'))}
  <fieldset aria-describedby="events-help${err.get('events') ? ' events-error' : ''}"><legend>Events</legend>
    <p id="events-help" class="help">Only the types whose records you may read are offered.</p>
    ${fieldError('events', err.get('events'))}
    <label class="check star"><input type="checkbox" name="events" value="*"${checked.has('*') ? raw(' checked') : ''}> <code>*</code> every event type</label>
    <div class="perm-grid">${[...groups].map(
      ([g, types]) =>
        h`<fieldset class="perm-group"><legend>${g}</legend>${types.map(
          (t) => h`<label class="check"><input type="checkbox" name="events" value="${t}"${checked.has(t) ? raw(' checked') : ''}> ${t}</label>`,
        )}</fieldset>`,
    )}</div>
  </fieldset>
  <label for="description">Description (optional)</label>
  <textarea id="description" name="description" rows="2" maxlength="65535"${describedBy('description', err.get('description'))}>${v.description}</textarea>
  ${fieldError('description', err.get('description'))}
  <div class="actions"><button type="submit" class="btn btn-primary">Add webhook</button> <a href="/account/webhooks" class="btn btn-ghost">Cancel</a></div>
</form>`,
    { ...chrome, current: 'webhooks' },
  );
}

/** The signing secret, after creation or rotation: the only time it is shown. */
export function webhookSecretPage(chrome: Chrome, w: WebhookView & { secret: string }, rotated: boolean): string {
  return layout(
    rotated ? 'New signing secret' : 'Your new webhook',
    h`<div class="alert alert-warn" role="status">Copy the signing secret now: it is shown this once and cannot be shown again.${
      rotated ? ' The previous secret keeps signing beside it for 24 hours.' : ''
    }</div>
<section class="card">
  <h2 class="breakable">${w.url}</h2>
  <label for="secret">Signing secret</label>
  <div class="copy-row">
    <input id="secret" class="secret" type="text" readonly value="${w.secret}" autocomplete="off" spellcheck="false">
    <button type="button" class="btn btn-primary" data-copy="secret" data-status="copy-status" hidden>Copy</button>
  </div>
  <p id="copy-status" class="help" role="status" aria-live="polite"></p>
  <p>Verify the <code>Webhook-Signature</code> header of each delivery with it (see the API reference).</p>
  <p><a class="btn btn-ghost" href="/account/webhooks/${w.id}">Done</a></p>
</section>`,
    { ...chrome, current: 'webhooks' },
  );
}

function attemptsTable(d: DeliveryView): Html {
  if (!d.attempts.length) return raw('<p class="muted">No attempt yet.</p>');
  return h`<table class="attempts">
<caption class="sr-only">Attempts of delivery ${d.id}</caption>
<thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Duration</th><th scope="col">Response status</th><th scope="col">Response (first 4 KiB)</th></tr></thead>
<tbody>${[...d.attempts].reverse().map(
    (a) => h`<tr class="attempt">
  <th scope="row">#${a.attempt}</th>
  <td data-label="Time">${when(a.at)}</td>
  <td data-label="Duration">${a.durationMs} ms</td>
  <td data-label="Response status"><span class="badge badge-${a.code !== null && a.code >= 200 && a.code < 300 ? 'succeeded' : 'failed'}">${a.code ?? 'no answer'}</span>${
    a.error ? h`<br><span class="muted">${a.error}</span>` : ''
  }</td>
  <td data-label="Response">${a.response ? h`<pre class="response" tabindex="0">${a.response}</pre>` : raw('<span class="muted">empty</span>')}</td>
</tr>`,
  )}</tbody></table>`;
}

export function webhookPage(
  chrome: Chrome,
  d: {
    webhook: WebhookView;
    deliveries: DeliveryView[];
    total: number;
    page: number;
    pageSize: number;
    done?: string;
    test?: TestResultView | null;
    mayWrite: boolean;
    mayDelete: boolean;
  },
): string {
  const w = d.webhook;
  const post = (action: string, label: Html | string, cls = 'btn-ghost', extra: Html | string = '') =>
    h`<form method="post" action="/account/webhooks/${w.id}/${action}" class="inline">${csrfField(chrome)}${extra}<button type="submit" class="btn ${cls}">${label}</button></form>`;
  const t = d.test;
  const deliveries = d.deliveries.map(
    (x) => h`<li class="card delivery" id="delivery-${x.id}">
  <div class="delivery-head"><span class="badge badge-${x.status}">${x.status}</span> <strong>${x.eventType}</strong> <code class="breakable">${x.eventId}</code></div>
  <p class="muted">Delivery ${x.id} · created ${when(x.createdAt)} · ${x.attemptCount} attempt${x.attemptCount === 1 ? '' : 's'}${
    x.nextAttemptAt ? h` · next attempt ${when(x.nextAttemptAt)}` : ''
  }</p>
  <details${x.attempts.length ? raw(' open') : ''}><summary>Attempts</summary>${attemptsTable(x)}</details>
  ${
    d.mayWrite && w.isActive
      ? h`<form method="post" action="/account/webhooks/${w.id}/deliveries/${x.id}/resend" class="inline">${csrfField(chrome)}<button type="submit" class="btn btn-ghost">Resend<span class="sr-only"> delivery ${x.id}</span></button></form>`
      : ''
  }
</li>`,
  );
  return layout(
    'Webhook',
    h`${notice(d.done)}${
      t
        ? h`<div class="alert ${t.success ? 'alert-ok' : 'alert-error'}" role="status" id="test-result">Test event: ${
            t.statusCode === null ? 'no answer' : h`response status ${t.statusCode}`
          } in ${t.durationMs} ms${t.error ? h` (${t.error})` : ''}.${t.response ? h`<pre class="response" tabindex="0">${t.response}</pre>` : ''}</div>`
        : ''
    }
<section class="card" aria-labelledby="wh-url">
  <h2 id="wh-url" class="breakable">${w.url}</h2>
  <p>${state(w)}${w.disabledReason ? h` <span class="muted">${w.disabledReason}</span>` : ''}</p>
  ${w.description ? h`<p>${w.description}</p>` : ''}
  <p>Events:</p>${events(w.events)}
  <p class="muted">Last success: ${when(w.lastSuccessAt)}${w.failingSince ? h` · failing since ${when(w.failingSince)}` : ''}${
    w.previousSecretExpiresAt ? h` · previous secret signs until ${when(w.previousSecretExpiresAt)}` : ''
  }</p>
  <div class="actions">
    ${d.mayWrite ? post('test', 'Send a test event', 'btn-primary') : ''}
    ${
      d.mayWrite
        ? w.isActive
          ? post('pause', 'Pause')
          : post(
              'resume',
              'Resume',
              'btn-ghost',
              h`<label class="check"><input type="checkbox" name="requeueDead" value="true"> also send the dead deliveries again</label>`,
            )
        : ''
    }
    ${d.mayWrite ? post('rotate', 'Rotate the secret') : ''}
    ${d.mayDelete ? h`<a class="btn btn-danger-ghost" href="/account/webhooks/${w.id}/delete">Delete</a>` : ''}
  </div>
</section>
<h2>Deliveries</h2>
${deliveries.length ? h`<ol class="deliveries plain-list">${deliveries}</ol>` : h`<p class="card muted">No deliveries yet.</p>`}
${pager('Deliveries', d.page, d.pageSize, d.total, (n) => `/account/webhooks/${w.id}?page=${n}`)}`,
    { ...chrome, current: 'webhooks' },
  );
}

export function deleteWebhookPage(chrome: Chrome, w: WebhookView): string {
  return layout(
    'Delete a webhook',
    h`<section class="card narrow">
  <p>Delete the webhook to <strong class="breakable">${w.url}</strong> and its whole delivery log? Nothing more is sent to it. This cannot be undone.</p>
  <form method="post" action="/account/webhooks/${w.id}/delete" class="actions">
    ${csrfField(chrome)}
    <button type="submit" class="btn btn-danger">Delete webhook</button>
    <a href="/account/webhooks/${w.id}" class="btn btn-ghost">Cancel</a>
  </form>
</section>`,
    { ...chrome, current: 'webhooks' },
  );
}
