/**
 * The console's stylesheet and script, served by the app itself (no front-end build). Colours and
 * type follow the API reference at /api/docs (Swagger UI): dark top bar, #3b4151 text, its
 * green/blue/red accents darkened where white text sits on them, for WCAG AA contrast.
 */
export const ACCOUNT_CSS = `
:root { --text:#3b4151; --muted:#5f6773; --line:#d8dde7; --bg:#fafafa; --card:#fff; --top:#1b1b1b;
  --green:#1f7a4d; --green-soft:#e8f6f0; --blue:#0b5cad; --blue-soft:#ebf3fb; --red:#b3261e; --red-soft:#fdecea; --amber-soft:#fff4e0; }
* { box-sizing: border-box; }
html { font-size: 16px; }
body { margin:0; font-family: sans-serif; color:var(--text); background:var(--bg); line-height:1.5; }
.wrap { max-width: 72rem; margin: 0 auto; padding: 0 1rem; }
.skip { position:absolute; left:-999px; top:0; background:#fff; color:var(--blue); padding:.5rem 1rem; z-index:10; }
.skip:focus { left:1rem; }
.sr-only { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0 0 0 0); white-space:nowrap; }
.topbar { background:var(--top); color:#fff; padding:.6rem 0; }
.topbar-inner { display:flex; flex-wrap:wrap; align-items:center; gap:.5rem 1.5rem; }
.brand { color:#fff; font-weight:bold; font-size:1.25rem; text-decoration:none; }
.brand span { color:#89bf04; font-weight:normal; }
.topbar nav { display:flex; flex-wrap:wrap; gap:.25rem 1rem; flex:1; }
.topbar nav a { color:#e8e8e8; text-decoration:none; padding:.25rem 0; border-bottom:2px solid transparent; }
.topbar nav a:hover, .topbar nav a[aria-current=page] { color:#fff; border-bottom-color:#89bf04; }
.signout { margin:0; }
.topbar .btn-ghost { color:#fff; border-color:#8a8a8a; }
h1 { font-size:1.75rem; margin:1.5rem 0 1rem; }
h2 { font-size:1.15rem; margin:0 0 .5rem; }
a { color:var(--blue); }
:focus-visible { outline:3px solid #f5a623; outline-offset:2px; }
code { font-family: monospace; background:#f0f0f0; padding:0 .25rem; border-radius:3px; font-size:.9em; }
.muted { color:var(--muted); }
.lead { display:flex; flex-wrap:wrap; gap:.75rem; align-items:center; justify-content:space-between; margin-bottom:1rem; }
.lead p { margin:0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:4px; padding:1rem 1.25rem; margin:0 0 1rem; box-shadow:0 1px 2px rgba(0,0,0,.05); }
.grid { display:grid; gap:1rem; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); }
.grid .card { margin:0; }
.narrow { max-width: 28rem; }
.form label { display:block; font-weight:bold; margin:.75rem 0 .25rem; }
.form input[type=email], .form input[type=password], .form input[type=text], .form input:not([type]), .form input[type=date] {
  width:100%; padding:.55rem .6rem; font-size:1rem; border:1px solid #8c95a3; border-radius:4px; color:var(--text); background:#fff; }
.help { font-size:.875rem; color:var(--muted); margin:.25rem 0 0; }
fieldset { border:1px solid var(--line); border-radius:4px; margin:1rem 0 0; padding:.5rem .75rem .75rem; }
legend { font-weight:bold; padding:0 .25rem; }
.perm-grid { display:grid; gap:.5rem; grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); margin-top:.5rem; }
.perm-group { margin:0; padding:.25rem .5rem .5rem; }
.perm-group legend { font-weight:normal; font-size:.9rem; color:var(--muted); }
label.check { display:inline-flex; align-items:center; gap:.35rem; font-weight:normal; margin:.15rem .75rem .15rem 0; min-height:1.75rem; }
label.check input { width:1.1rem; height:1.1rem; flex:none; }
label.star { display:flex; font-weight:bold; }
.actions { display:flex; flex-wrap:wrap; gap:.5rem; align-items:center; margin-top:1rem; }
.btn { display:inline-block; font:inherit; font-size:.95rem; font-weight:bold; padding:.5rem 1rem; border-radius:4px; border:2px solid transparent; cursor:pointer; text-decoration:none; line-height:1.3; }
.btn-primary { background:var(--green); color:#fff; border-color:var(--green); }
.btn-primary:hover { background:#17603c; }
.btn-ghost { background:transparent; color:var(--text); border-color:#8c95a3; }
.btn-danger { background:var(--red); color:#fff; border-color:var(--red); }
.btn-danger-ghost { background:transparent; color:var(--red); border-color:var(--red); padding:.25rem .6rem; }
.form > .btn-primary { margin-top:1.25rem; }
.form .actions { margin-top:1.25rem; }
.alert { border-left:4px solid; padding:.75rem 1rem; border-radius:4px; margin:0 0 1rem; }
.alert-error { background:var(--red-soft); border-color:var(--red); }
.alert-ok { background:var(--green-soft); border-color:var(--green); }
.alert-warn { background:var(--amber-soft); border-color:#b26a00; }
.badge { display:inline-block; padding:0 .5rem; border-radius:3px; font-size:.8rem; font-weight:bold; text-transform:uppercase; letter-spacing:.02em; }
.badge-active { background:var(--green-soft); color:var(--green); }
.badge-revoked { background:var(--red-soft); color:var(--red); }
.badge-expired { background:#eee; color:#555; }
.badge-plan, .badge-type { background:var(--blue-soft); color:var(--blue); }
.table-wrap { overflow-x:auto; }
table { width:100%; border-collapse:collapse; background:var(--card); border:1px solid var(--line); }
th, td { text-align:left; vertical-align:top; padding:.6rem .75rem; border-bottom:1px solid var(--line); }
thead th { font-size:.85rem; color:var(--muted); border-bottom:2px solid var(--line); }
ul.perms { list-style:none; margin:0; padding:0; display:flex; flex-wrap:wrap; gap:.25rem; }
ul.plain { padding-left:1.1rem; }
ul.notifications { list-style:none; padding:0; }
ul.notifications li.read { opacity:.8; }
.copy-row { display:flex; gap:.5rem; flex-wrap:wrap; }
.secret { flex:1; min-width:14rem; font-family:monospace; font-size:.95rem; padding:.55rem .6rem; border:1px solid #8c95a3; border-radius:4px; }
meter { width:100%; height:1.25rem; display:block; margin:.25rem 0; }
.pager { display:flex; flex-wrap:wrap; gap:.5rem; align-items:center; margin:1rem 0; }
.chart-wrap { width:100%; overflow:hidden; }
svg.chart { width:100%; height:auto; display:block; }
svg.chart .bar-ok { fill:var(--blue); }
svg.chart .bar-limited { fill:var(--red); }
svg.chart .axis { stroke:var(--text); stroke-width:1; }
svg.chart .grid { stroke:var(--line); stroke-width:1; }
svg.chart .limit { stroke:var(--red); stroke-width:2; stroke-dasharray:6 4; }
svg.chart text { font-size:12px; fill:var(--text); font-family:sans-serif; }
svg.chart .limit-label { fill:var(--red); }
.legend { display:flex; flex-wrap:wrap; align-items:center; gap:.35rem .75rem; }
.swatch { display:inline-block; width:1rem; height:.75rem; vertical-align:middle; }
.swatch-ok { background:var(--blue); }
.swatch-limited { background:var(--red); }
.swatch-limit { border-top:2px dashed var(--red); height:0; }
.field-error { color:var(--red); font-weight:bold; margin:.25rem 0 0; }
.form select, .form textarea { width:100%; padding:.55rem .6rem; font-size:1rem; border:1px solid #8c95a3; border-radius:4px; color:var(--text); background:#fff; }
.form input[type=url] { width:100%; padding:.55rem .6rem; font-size:1rem; border:1px solid #8c95a3; border-radius:4px; color:var(--text); background:#fff; }
pre.json, pre.response { background:#f4f5f7; border:1px solid var(--line); border-radius:4px; padding:.5rem; overflow:auto; max-height:24rem; white-space:pre-wrap; word-break:break-all; font-size:.85rem; }
.badge-succeeded, .badge-on { background:var(--green-soft); color:var(--green); }
.badge-failed, .badge-dead, .badge-off { background:var(--red-soft); color:var(--red); }
.form select { max-width:100%; }
dl.counts { display:flex; flex-wrap:wrap; gap:.5rem 1.5rem; margin:.5rem 0; }
dl.counts div { min-width:6rem; }
dl.counts dt { font-size:.85rem; color:var(--muted); }
dl.counts dd { margin:0; font-weight:bold; font-size:1.25rem; }
progress { width:100%; height:1.25rem; display:block; margin:.25rem 0; }
.badge-pending { background:var(--amber-soft); color:#7a4a00; }
.filters { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:flex-end; }
.filters label { margin:0; }
.filters > div { min-width:12rem; flex:1; }

table.attempts { margin:.5rem 0; font-size:.9rem; }
form.inline { display:inline-flex; flex-wrap:wrap; gap:.5rem; align-items:center; margin:0; }
ol.plain-list { list-style:none; padding:0; }
.delivery-head { display:flex; flex-wrap:wrap; gap:.5rem; align-items:center; }
.breakable { word-break:break-all; }
.graph-wrap { overflow-x:auto; background:var(--card); border:1px solid var(--line); border-radius:4px; margin:0 0 1rem; }
svg.workflow-graph { display:block; margin:0 auto; }
svg.workflow-graph .step rect { fill:#fff; stroke:var(--blue); stroke-width:2; }
svg.workflow-graph .step-goal rect, svg.workflow-graph .step-exit rect { stroke:var(--green); }
svg.workflow-graph .step-wait rect { stroke-dasharray:6 3; }
svg.workflow-graph text { font-family:sans-serif; fill:var(--text); }
svg.workflow-graph .step-name { font-size:14px; font-weight:bold; }
svg.workflow-graph .step-type { font-size:12px; fill:var(--muted); }
svg.workflow-graph .step-counts { font-size:13px; }
svg.workflow-graph .edge { fill:none; stroke:#6b7280; stroke-width:1.5; }
svg.workflow-graph .arrow { fill:#6b7280; }
svg.workflow-graph .edge-label { font-size:11px; fill:var(--muted); }
@media (max-width: 40rem) {
  h1 { font-size:1.4rem; }
  table, thead, tbody, tr, th, td { display:block; }
  thead { position:absolute; left:-9999px; }
  tr { border-bottom:2px solid var(--line); padding:.5rem 0; }
  td, tbody th { border:0; padding:.25rem .75rem; }
  td[data-label]::before { content: attr(data-label) ": "; font-weight:bold; display:inline; }
  caption { display:block; text-align:left; padding:.5rem .75rem; }
}
`;

export const ACCOUNT_JS = `'use strict';
document.addEventListener('DOMContentLoaded', function () {
  // Copy buttons: shown only when this script runs (the field stays selectable without it).
  document.querySelectorAll('[data-copy]').forEach(function (button) {
    button.hidden = false;
    button.addEventListener('click', function () {
      var field = document.getElementById(button.getAttribute('data-copy'));
      var status = document.getElementById(button.getAttribute('data-status'));
      var done = function (ok) { if (status) status.textContent = ok ? 'Copied to the clipboard.' : 'Select the token and copy it by hand.'; };
      field.focus();
      field.select();
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(field.value).then(function () { done(true); }, function () { done(document.execCommand('copy')); });
      } else {
        done(document.execCommand('copy'));
      }
    });
  });
  // Follow mode of the events page: polls the rows after the newest shown and puts them on top.
  // Without this script the page keeps its Refresh link.
  var follow = document.getElementById('follow');
  var toggle = document.getElementById('follow-toggle');
  var rows = document.getElementById('event-rows');
  if (follow && toggle && rows) {
    var timer = null;
    var status = document.getElementById('follow-status');
    var after = follow.getAttribute('data-after') || '0';
    var base = follow.getAttribute('data-rows');
    var poll = function () {
      var url = base + (base.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(after);
      fetch(url, { credentials: 'same-origin', headers: { Accept: 'text/html' } }).then(function (r) {
        if (!r.ok) throw new Error('status ' + r.status);
        return r.text();
      }).then(function (html) {
        if (timer === null) return;
        if (html.trim()) {
          rows.insertAdjacentHTML('afterbegin', html);
          var first = rows.querySelector('tr[data-sequence]');
          if (first) after = first.getAttribute('data-sequence');
          var none = document.getElementById('no-events');
          if (none) none.hidden = true;
        }
        if (status) status.textContent = 'Following: updated ' + new Date().toLocaleTimeString() + '.';
        timer = setTimeout(poll, 2000);
      }, function () {
        if (status) status.textContent = 'Following stopped: the feed could not be read. Use Refresh.';
        stop();
      });
    };
    var stop = function () {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      toggle.setAttribute('aria-pressed', 'false');
      toggle.textContent = 'Follow new events';
    };
    toggle.hidden = false;
    toggle.addEventListener('click', function () {
      if (timer !== null) {
        stop();
        if (status) status.textContent = 'Not following.';
        return;
      }
      toggle.setAttribute('aria-pressed', 'true');
      toggle.textContent = 'Stop following';
      if (status) status.textContent = 'Following new events.';
      timer = setTimeout(poll, 0);
    });
  }
  // A running job's page reloads itself until the job ends (without this script: its Refresh link).
  var refresh = document.querySelector('[data-refresh]');
  if (refresh) {
    var link = document.getElementById('refresh');
    if (link) link.hidden = true;
    setTimeout(function () { location.reload(); }, Number(refresh.getAttribute('data-refresh')) || 2000);
  }
  // A running import's page: polls its progress and moves the bar and the counts; once the import has
  // ended, reloads the page (final counts, row errors). Without this script: its Refresh link.
  var tracked = document.querySelector('[data-progress]');
  if (tracked) {
    var again = document.getElementById('refresh');
    if (again) again.hidden = true;
    var every = Number(tracked.getAttribute('data-interval')) || 1000;
    var bar = document.getElementById('import-progress');
    var put = function (id, value) { var el = document.getElementById(id); if (el && value !== null && value !== undefined) el.textContent = Number(value).toLocaleString('en-US'); };
    var pollImport = function () {
      fetch(tracked.getAttribute('data-progress'), { credentials: 'same-origin', headers: { Accept: 'application/json' } }).then(function (r) {
        if (!r.ok) throw new Error('status ' + r.status);
        return r.json();
      }).then(function (p) {
        if (bar) { bar.value = p.progress; bar.textContent = p.progress + '%'; }
        var state = document.getElementById('import-state');
        if (state) state.textContent = p.status;
        put('import-processed', p.counts.processed);
        put('import-total', p.counts.total);
        put('count-created', p.counts.created);
        put('count-updated', p.counts.updated);
        put('count-skipped', p.counts.skipped);
        put('count-failed', p.counts.failed);
        if (['queued', 'validating', 'running'].indexOf(p.status) < 0) { location.reload(); return; }
        setTimeout(pollImport, every);
      }, function () {
        if (again) again.hidden = false;
      });
    };
    setTimeout(pollImport, every);
  }
  // Invitation links carry their secret in the fragment (never sent to the server): move it into the form.
  var invitation = document.getElementById('invitation-token');
  if (invitation && location.hash.length > 1) {
    invitation.value = location.hash.slice(1);
    history.replaceState(null, '', location.pathname);
  }
});
`;
