/**
 * Server-rendered pages of the account console: plain HTML, one stylesheet and one small script
 * (both served by the app), no inline script or style (the CSP forbids them). Every value is escaped.
 */
import { permissionGroups } from './token-form.js';
import type { AccountTokenRecord } from '../auth/api-tokens.service.js';
import type { NotificationRecord } from '../notifications/notifications.service.js';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
// eslint-disable-next-line @typescript-eslint/no-base-to-string -- page values are strings, numbers and Dates, whose String() is their text; render() unwraps Html and arrays first
export const esc = (v: unknown): string => String(v ?? '').replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);

export type Html = { html: string };
export const raw = (html: string): Html => ({ html });
export const h = (strings: TemplateStringsArray, ...values: unknown[]): Html =>
  raw(strings.reduce((out, s, i) => out + s + (i < values.length ? render(values[i]) : ''), ''));
function render(v: unknown): string {
  if (Array.isArray(v)) return v.map(render).join('');
  if (v && typeof v === 'object' && 'html' in v) return (v as Html).html;
  if (v === null || v === undefined || v === false) return '';
  return esc(v);
}

export interface Chrome {
  /** The signed-in user's name (shows the navigation and the sign-out button). */
  user?: { name: string; email: string };
  csrf?: string;
  /** Which navigation entry is current. */
  current?: 'overview' | 'tokens' | 'notifications' | 'usage' | 'webhooks' | 'events' | 'exports' | 'imports' | 'workflows';
}

export const when = (iso: string | null) =>
  iso ? h`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>` : raw('<span class="muted">never</span>');

export function layout(title: string, body: Html, chrome: Chrome = {}): string {
  const nav = (key: Chrome['current'], href: string, label: string) =>
    h`<a href="${href}"${key === chrome.current ? raw(' aria-current="page"') : ''}>${label}</a>`;
  return h`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · SalesFlow account</title>
<link rel="stylesheet" href="/account/assets/account.css">
<script src="/account/assets/account.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="topbar">
  <div class="wrap topbar-inner">
    <a class="brand" href="/account">SalesFlow <span>account</span></a>
    ${
      chrome.user
        ? h`<nav aria-label="Account">${nav('overview', '/account', 'Overview')}${nav('tokens', '/account/tokens', 'API tokens')}${nav('webhooks', '/account/webhooks', 'Webhooks')}${nav('events', '/account/events', 'Events')}${nav('imports', '/account/imports', 'Imports')}${nav('exports', '/account/exports/new', 'Exports')}${nav('workflows', '/account/workflows', 'Workflows')}${nav('usage', '/account/usage', 'Usage')}${nav('notifications', '/account/notifications', 'Notifications')}<a href="/api/docs/">API reference</a></nav>
    <form method="post" action="/account/logout" class="signout"><input type="hidden" name="_csrf" value="${chrome.csrf}"><button type="submit" class="btn btn-ghost">Sign out <span class="sr-only">${chrome.user.email}</span></button></form>`
        : h`<nav aria-label="Links"><a href="/api/docs/">API reference</a></nav>`
    }
  </div>
</header>
<main id="main" class="wrap">
<h1>${title}</h1>
${body}
</main>
</body>
</html>`.html;
}

export const errorBox = (message: string | null) => (message ? h`<div class="alert alert-error" role="alert">${message}</div>` : raw(''));

export function loginPage(opts: { csrf: string; email?: string; error?: string | null; notice?: string | null }): string {
  return layout(
    'Sign in',
    h`${errorBox(opts.error ?? null)}${opts.notice ? h`<div class="alert alert-ok" role="status">${opts.notice}</div>` : ''}
<form method="post" action="/account/login" class="card form narrow">
  <input type="hidden" name="_csrf" value="${opts.csrf}">
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" required maxlength="320" value="${opts.email ?? ''}" autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
  <button type="submit" class="btn btn-primary">Sign in</button>
</form>
<p class="muted narrow">No password yet? Ask an administrator for an invitation link (<code>cli user:invite</code>).</p>`,
  );
}

export function invitationPage(opts: { csrf: string; token?: string; error?: string | null }): string {
  return layout(
    'Choose your password',
    h`${errorBox(opts.error ?? null)}
<form method="post" action="/account/invitation" class="card form narrow">
  <input type="hidden" name="_csrf" value="${opts.csrf}">
  <input type="hidden" name="token" id="invitation-token" value="${opts.token ?? ''}">
  <noscript><p class="alert alert-error">This page reads the invitation from the link with a small script; enable JavaScript for this site.</p></noscript>
  <label for="password">New password</label>
  <input id="password" name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="256" aria-describedby="pw-help">
  <p id="pw-help" class="help">At least 12 characters, not containing your email address.</p>
  <label for="confirm">Repeat the password</label>
  <input id="confirm" name="confirm" type="password" autocomplete="new-password" required minlength="12" maxlength="256">
  <button type="submit" class="btn btn-primary">Set password and sign in</button>
</form>`,
  );
}

export interface UsageView {
  plan: string;
  limit: number;
  used: number;
  remaining: number;
  windowSeconds: number;
  resetSeconds: number;
}

export function overviewPage(
  chrome: Chrome,
  opts: { user: { name: string; email: string; team: string | null }; usage: UsageView; unread: number; tokens: number; notice?: string | null },
): string {
  const u = opts.usage;
  const pct = u.limit > 0 ? Math.min(100, Math.round((u.used / u.limit) * 100)) : 0;
  return layout(
    'Overview',
    h`${opts.notice ? h`<div class="alert alert-ok" role="status">${opts.notice}</div>` : ''}
<div class="grid">
  <section class="card" aria-labelledby="who">
    <h2 id="who">Signed in as</h2>
    <p><strong>${opts.user.name}</strong><br>${opts.user.email}${opts.user.team ? h`<br>Team ${opts.user.team}` : ''}</p>
  </section>
  <section class="card" aria-labelledby="plan">
    <h2 id="plan">Plan and rate limit</h2>
    <p><span class="badge badge-plan">${u.plan}</span> ${u.limit.toLocaleString('en-US')} requests per ${u.windowSeconds === 3600 ? 'hour' : `${u.windowSeconds} s`}</p>
    <p><label for="usage-meter">Used in this window</label>
      <meter id="usage-meter" min="0" max="${u.limit}" value="${u.used}" low="${Math.round(u.limit * 0.7)}" high="${Math.round(u.limit * 0.9)}" optimum="0">${pct}%</meter>
      <span class="usage"><strong>${u.used.toLocaleString('en-US')}</strong> used, <strong>${u.remaining.toLocaleString('en-US')}</strong> left${u.resetSeconds > 0 ? h`, resets in ${Math.ceil(u.resetSeconds / 60)} min` : ''}</span></p>
  </section>
  <section class="card" aria-labelledby="links">
    <h2 id="links">Your account</h2>
    <ul class="plain">
      <li><a href="/account/tokens">${opts.tokens} API token${opts.tokens === 1 ? '' : 's'}</a></li>
      <li><a href="/account/notifications">${opts.unread} unread notification${opts.unread === 1 ? '' : 's'}</a></li>
    </ul>
    <form method="post" action="/account/sessions/revoke-all"><input type="hidden" name="_csrf" value="${chrome.csrf}"><button class="btn btn-ghost" type="submit">Sign out everywhere</button></form>
  </section>
</div>`,
    { ...chrome, current: 'overview' },
  );
}

const permissionList = (perms: string[]) => h`<ul class="perms">${perms.map((p) => h`<li><code>${p}</code></li>`)}</ul>`;

export function tokensPage(chrome: Chrome, opts: { tokens: AccountTokenRecord[]; notice?: string | null }): string {
  const rows = opts.tokens.map(
    (t) => h`<tr>
  <th scope="row">${t.name}<br><code class="muted">${t.prefix}…</code></th>
  <td data-label="Permissions">${permissionList(t.permissions)}</td>
  <td data-label="Created">${when(t.createdAt)}</td>
  <td data-label="Last used">${when(t.lastUsedAt)}</td>
  <td data-label="Expires">${t.expiresAt ? when(t.expiresAt) : raw('<span class="muted">never</span>')}</td>
  <td data-label="Status"><span class="badge badge-${t.state}">${t.state}</span></td>
  <td>${t.state === 'revoked' ? '' : h`<a class="btn btn-danger-ghost" href="/account/tokens/${t.id}/revoke">Revoke<span class="sr-only"> ${t.name}</span></a>`}</td>
</tr>`,
  );
  return layout(
    'API tokens',
    h`${opts.notice ? h`<div class="alert alert-ok" role="status">${opts.notice}</div>` : ''}
<div class="lead"><p>Tokens let programs call the API as you: send <code>Authorization: Bearer &lt;token&gt;</code>.</p><a class="btn btn-primary" href="/account/tokens/new">Generate a new token</a></div>
${
  opts.tokens.length
    ? h`<div class="table-wrap"><table class="tokens">
<caption class="sr-only">Your API tokens</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Permissions</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Status</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : h`<p class="card muted">You have no API tokens yet.</p>`
}`,
    { ...chrome, current: 'tokens' },
  );
}

export function newTokenPage(
  chrome: Chrome,
  opts: {
    mayGrantAll: boolean;
    granted: ReadonlySet<string>;
    /** The clock's time (the Clock, not Date.now()): the earliest expiry offered is the next day. */
    nowMs: number;
    values?: { name?: string; permissions?: string[]; expires?: string };
    error?: string | null;
  },
): string {
  const checked = new Set(opts.values?.permissions ?? []);
  const label = (r: string) => r.replace(/([A-Z])/g, ' $1').replace(/^./, (c) => c.toUpperCase());
  const groups = permissionGroups(opts.granted).map(
    (g) =>
      h`<fieldset class="perm-group"><legend>${label(g.resource)}</legend>${g.permissions.map(
        (p) =>
          h`<label class="check"><input type="checkbox" name="permissions" value="${p.value}"${checked.has(p.value) ? raw(' checked') : ''}> ${p.action}</label>`,
      )}</fieldset>`,
  );
  const tomorrow = new Date(opts.nowMs + 86_400_000).toISOString().slice(0, 10);
  return layout(
    'Generate an API token',
    h`${errorBox(opts.error ?? null)}
<form method="post" action="/account/tokens" class="card form">
  <input type="hidden" name="_csrf" value="${chrome.csrf}">
  <label for="name">Name</label>
  <input id="name" name="name" required maxlength="255" value="${opts.values?.name ?? ''}" aria-describedby="name-help" autofocus>
  <p id="name-help" class="help">What uses the token, e.g. “CRM sync”.</p>
  <fieldset class="perms-all"><legend>Permissions</legend>
    ${opts.mayGrantAll ? h`<label class="check star"><input type="checkbox" name="permissions" value="*"${checked.has('*') ? raw(' checked') : ''}> <code>*</code> everything (every present and future permission)</label>` : ''}
    <div class="perm-grid">${groups}</div>
  </fieldset>
  <label for="expires">Expires (optional)</label>
  <input id="expires" name="expires" type="date" min="${tomorrow}" value="${opts.values?.expires ?? ''}" aria-describedby="expires-help">
  <p id="expires-help" class="help">The token stops working at the end of this day (UTC). Leave empty for no expiry.</p>
  <div class="actions"><button type="submit" class="btn btn-primary">Generate token</button> <a href="/account/tokens" class="btn btn-ghost">Cancel</a></div>
</form>`,
    { ...chrome, current: 'tokens' },
  );
}

export function secretPage(chrome: Chrome, token: AccountTokenRecord & { secret: string }): string {
  return layout(
    'Your new API token',
    h`<div class="alert alert-warn" role="status">Copy the token now: it is shown this once and cannot be shown again. Only a hash of it is stored.</div>
<section class="card">
  <h2>${token.name}</h2>
  <label for="secret">Token</label>
  <div class="copy-row">
    <input id="secret" class="secret" type="text" readonly value="${token.secret}" autocomplete="off" spellcheck="false">
    <button type="button" class="btn btn-primary" data-copy="secret" data-status="copy-status" hidden>Copy</button>
  </div>
  <p id="copy-status" class="help" role="status" aria-live="polite"></p>
  <p>Permissions:</p>${permissionList(token.permissions)}
  <p>Expires: ${token.expiresAt ? when(token.expiresAt) : 'never'}. Token id (OAuth2 client id): <code>${token.id}</code></p>
  <p><a class="btn btn-ghost" href="/account/tokens">Done</a></p>
</section>`,
    { ...chrome, current: 'tokens' },
  );
}

export function revokePage(chrome: Chrome, token: AccountTokenRecord): string {
  return layout(
    'Revoke a token',
    h`<section class="card narrow">
  <p>Revoke <strong>${token.name}</strong> (<code>${token.prefix}…</code>)? Every program using it, and every OAuth access token issued from it, is refused at once. This cannot be undone.</p>
  <form method="post" action="/account/tokens/${token.id}/revoke" class="actions">
    <input type="hidden" name="_csrf" value="${chrome.csrf}">
    <button type="submit" class="btn btn-danger">Revoke token</button>
    <a href="/account/tokens" class="btn btn-ghost">Cancel</a>
  </form>
</section>`,
    { ...chrome, current: 'tokens' },
  );
}

export function notificationsPage(chrome: Chrome, opts: { notifications: NotificationRecord[]; total: number }): string {
  const unread = opts.notifications.filter((n) => !n.isRead).length;
  return layout(
    'Notifications',
    h`${
      unread
        ? h`<form method="post" action="/account/notifications/read-all" class="actions"><input type="hidden" name="_csrf" value="${chrome.csrf}"><button class="btn btn-ghost" type="submit">Mark all read</button></form>`
        : ''
    }
${
  opts.notifications.length
    ? h`<ul class="notifications">${opts.notifications.map(
        (n) => h`<li class="card${n.isRead ? ' read' : ''}">
  <div><span class="badge badge-type">${n.type}</span> ${n.isRead ? raw('<span class="muted">read</span>') : raw('<strong>new</strong>')} · ${when(n.createdAt)}</div>
  <p>${n.message}</p>
  ${n.isRead ? '' : h`<form method="post" action="/account/notifications/${n.id}/read"><input type="hidden" name="_csrf" value="${chrome.csrf}"><button class="btn btn-ghost" type="submit">Mark read<span class="sr-only"> “${n.message}”</span></button></form>`}
</li>`,
      )}</ul>${opts.total > opts.notifications.length ? h`<p class="muted">Showing the latest ${opts.notifications.length} of ${opts.total}.</p>` : ''}`
    : h`<p class="card muted">No notifications.</p>`
}`,
    { ...chrome, current: 'notifications' },
  );
}

export function errorPage(status: number, message: string, chrome: Chrome = {}): string {
  const title =
    status === 403
      ? 'Not allowed'
      : status === 404
        ? 'Not found'
        : status === 429
          ? 'Too many attempts'
          : status >= 500
            ? 'Something went wrong'
            : 'That did not work';
  return layout(title, h`<div class="alert alert-error" role="alert">${message}</div><p><a href="/account">Back to your account</a></p>`, chrome);
}

/** A page number from the query string (1 when missing or not a number). */
export function pageParam(v: unknown): number {
  return typeof v === 'string' && /^\d{1,5}$/.test(v) && Number(v) > 0 ? Number(v) : 1;
}

/** Previous / next links of a paged table; `href(n)` builds the link of page n. */
export function pager(label: string, page: number, limit: number, total: number, href: (n: number) => string): Html {
  const pages = Math.max(1, Math.ceil(total / limit));
  if (pages <= 1 && page <= 1) return raw('');
  return h`<nav class="pager" aria-label="${label} pages">
  ${page > 1 ? h`<a class="btn btn-ghost" rel="prev" href="${href(page - 1)}">Previous<span class="sr-only"> page</span></a>` : ''}
  <span>Page ${page} of ${pages}</span>
  ${page < pages ? h`<a class="btn btn-ghost" rel="next" href="${href(page + 1)}">Next<span class="sr-only"> page</span></a>` : ''}
</nav>`;
}
