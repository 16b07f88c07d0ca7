/**
 * The console's integrator pages over HTTP: usage (requests and 429s per token and hour against
 * the plan's limit), webhooks (validation next to the fields, the secret shown once, pause,
 * resume, rotate, resend, delete with confirmation), the event feed, and the security rules every
 * new form keeps: a cross-origin post is refused and changes nothing, and no secret is rendered
 * after its first display. The browser suite (account-integrator.browser.e2e-spec.ts) drives the
 * same pages in Chromium.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startApp, type TestApp } from './support/app.js';
import { alertOf, browse, csrfOf, Jar, setPassword, signIn } from './support/console.js';
import { bearer } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const PASSWORD = 'a long and happy passphrase';
const EMAIL = 'ivy@example.com';

describe('account console: integrator pages', () => {
  let app: TestApp;
  let jar: Jar;
  let secret: string;
  let receiver: Server;
  let receiverUrl: string;
  const received: string[] = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end('thanks <b>receiver</b>');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    app = await startApp({
      env: {
        RATE_LIMIT_ANONYMOUS: '100000',
        RATE_LIMIT_BASIC: '3',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_DISPATCH_INTERVAL_MS: '50',
      },
    });
    secret = await app.token('*', { user: EMAIL, plan: 'basic', name: 'Usage probe' });
    expect((await setPassword(app, EMAIL, PASSWORD)).code).toBe(0);
    jar = new Jar();
    expect((await signIn(app, jar, EMAIL, PASSWORD)).status).toBe(303);
  });
  afterAll(async () => {
    await app?.stop();
    receiver?.closeAllConnections();
    await new Promise((r) => receiver?.close(r));
  });

  const form = async (path: string, values: Record<string, string | string[]>, from = path) => {
    const page = await browse(app, jar, from);
    return browse(app, jar, path, { _csrf: csrfOf(page.html), ...values });
  };
  const crossOrigin = async (path: string, values: Record<string, string | string[]>, from: string) => {
    const page = await browse(app, jar, from);
    return browse(app, jar, path, { _csrf: csrfOf(page.html), ...values }, { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' });
  };

  it('usage: the requests just made and the 429s, per token and for the account, against the plan limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await fetch(`${app.url}/api/contacts`, { headers: { Authorization: bearer(secret) } })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const page = await browse(app, jar, '/account/usage');
    expect(page.status).toBe(200);
    expect(page.res.headers.get('cache-control')).toBe('no-store');
    const charts = [...page.html.matchAll(/<svg class="chart"[^>]*data-total="(\d+)" data-limited="(\d+)" data-limit="(\d+)"/g)].map((m) =>
      m.slice(1).map(Number),
    );
    // The account's chart, then the token's: 4 requests, 1 refused, against 3 per hour.
    expect(charts).toEqual([
      [4, 1, 3],
      [4, 1, 3],
    ]);
    expect(page.html).toContain('Token Usage probe');
    const hour = new Date(Date.now() - (Date.now() % 3_600_000)).toISOString();
    expect(page.html).toContain(`data-hour="${hour}" data-requests="4" data-limited="1"`);
    const week = await browse(app, jar, '/account/usage?range=7d');
    expect(week.html).toMatch(/<svg class="chart" viewBox="0 0 720 220"[^>]*data-total="4"/);
    const bad = await browse(app, jar, '/account/usage?range=1y');
    expect(bad.status).toBe(400);
    expect(alertOf(bad.html)).toMatch(/range: must be 24h or 7d/);
    // The counts are in PostgreSQL, one row per token and hour.
    expect(await app.sql(`SELECT requests, limited FROM api_usage_hourly`)).toEqual([{ requests: 4, limited: 1 }]);
  });

  let webhookId = 0;

  it('webhooks: the create form shows the API validation next to the fields and keeps what was typed', async () => {
    const none = await form('/account/webhooks', { url: 'ftp://x', description: 'CRM' }, '/account/webhooks/new');
    expect(none.status).toBe(400);
    expect(none.html).toMatch(/<p id="events-error" class="field-error">choose at least one event type<\/p>/);
    expect(none.html).toContain('value="ftp://x"');
    expect(none.html).toContain('>CRM</textarea>');
    const badUrl = await form('/account/webhooks', { url: 'ftp://x', events: 'contact.created' }, '/account/webhooks/new');
    expect(badUrl.status).toBe(400);
    expect(badUrl.html).toMatch(/<p id="url-error" class="field-error">[^<]+<\/p>/);
    expect(badUrl.html).toMatch(/id="url"[^>]*aria-describedby="url-help url-error" aria-invalid="true"/);
    expect(await app.sql(`SELECT 1 FROM webhooks`)).toHaveLength(0);
  });

  let whSecret = '';

  it('webhooks: creates one and shows its secret once (no-store); the list and its page never show it again', async () => {
    const created = await form('/account/webhooks', { url: receiverUrl, events: ['contact.created', 'contact.updated'] }, '/account/webhooks/new');
    expect(created.status).toBe(201);
    expect(created.res.headers.get('cache-control')).toBe('no-store');
    whSecret = /id="secret" class="secret" type="text" readonly value="(whsec_[^"]+)"/.exec(created.html)?.[1] ?? '';
    expect(whSecret).toMatch(/^whsec_/);
    webhookId = Number(/href="\/account\/webhooks\/(\d+)"/.exec(created.html)?.[1]);
    const [row] = await app.sql<{ secret: string; created_by: number }>(`SELECT secret, created_by FROM webhooks WHERE id = $1`, [webhookId]);
    expect(row.secret).toBe(whSecret);
    const list = await browse(app, jar, '/account/webhooks');
    expect(list.html).toContain(receiverUrl);
    expect(list.html).not.toContain(whSecret);
    expect(list.html).toContain('no attempts');
    const one = await browse(app, jar, `/account/webhooks/${webhookId}`);
    expect(one.status).toBe(200);
    expect(one.html).not.toContain(whSecret);
  });

  it('webhooks: a test event reaches the receiver and its answer is shown; a contact change is delivered and logged with its attempt', async () => {
    const test = await form(`/account/webhooks/${webhookId}/test`, {}, `/account/webhooks/${webhookId}`);
    expect(test.status).toBe(200);
    expect(test.html).toMatch(/id="test-result">Test event: response status 200 in \d+ ms/);
    expect(test.html).toContain('thanks &lt;b&gt;receiver&lt;/b&gt;');
    const contact = await fetch(`${app.url}/api/contacts`, {
      method: 'POST',
      headers: { Authorization: bearer(await app.token('*', { user: 'ops@example.com', plan: 'enterprise' })), 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' }),
    });
    expect(contact.status).toBe(201);
    await waitUntil(
      'delivery logged',
      async () => (await browse(app, jar, `/account/webhooks/${webhookId}`)).html.includes('badge-succeeded">succeeded'),
      20_000,
    );
    const page = await browse(app, jar, `/account/webhooks/${webhookId}`);
    expect(page.html).toMatch(/<strong>contact.created<\/strong>/);
    expect(page.html).toMatch(/<tr class="attempt">[\s\S]*?#1[\s\S]*?ms[\s\S]*?>200<[\s\S]*?thanks &lt;b&gt;receiver/);
    const list = await browse(app, jar, '/account/webhooks');
    expect(list.html).toMatch(/100% of 1/);
  });

  it('webhooks: pause, resume, resend and rotate go through the service; the rotated secret is shown once', async () => {
    expect((await form(`/account/webhooks/${webhookId}/pause`, {}, `/account/webhooks/${webhookId}`)).location).toBe(
      `/account/webhooks/${webhookId}?done=paused`,
    );
    expect((await app.sql<{ is_active: boolean }>(`SELECT is_active FROM webhooks WHERE id = $1`, [webhookId]))[0].is_active).toBe(false);
    const paused = await browse(app, jar, `/account/webhooks/${webhookId}?done=paused`);
    expect(alertOf(paused.html)).toMatch(/paused/);
    expect(paused.html).not.toMatch(/>Resend</);
    // An unknown notice key echoes nothing.
    expect(alertOf((await browse(app, jar, `/account/webhooks/${webhookId}?done=<script>`)).html)).toBeNull();
    expect((await form(`/account/webhooks/${webhookId}/resume`, {}, `/account/webhooks/${webhookId}`)).status).toBe(303);
    expect((await app.sql<{ is_active: boolean }>(`SELECT is_active FROM webhooks WHERE id = $1`, [webhookId]))[0].is_active).toBe(true);

    const [delivery] = await app.sql<{ id: number }>(`SELECT id::int AS id FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);
    const before = received.length;
    const resent = await form(`/account/webhooks/${webhookId}/deliveries/${delivery.id}/resend`, {}, `/account/webhooks/${webhookId}`);
    expect(resent.location).toBe(`/account/webhooks/${webhookId}?done=resent`);
    await waitUntil('resent delivery received', async () => received.length > before, 20_000);
    await waitUntil(
      'second attempt logged',
      async () => {
        const [r] = await app.sql<{ n: number }>(`SELECT jsonb_array_length(attempts) AS n FROM webhook_deliveries WHERE id = $1`, [delivery.id]);
        return r.n === 2;
      },
      20_000,
    );

    const rotated = await form(`/account/webhooks/${webhookId}/rotate`, {}, `/account/webhooks/${webhookId}`);
    expect(rotated.status).toBe(200);
    const fresh = /value="(whsec_[^"]+)"/.exec(rotated.html)?.[1] ?? '';
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(whSecret);
    for (const path of ['/account/webhooks', `/account/webhooks/${webhookId}`, `/account/webhooks/${webhookId}/delete`]) {
      const html = (await browse(app, jar, path)).html;
      expect(html).not.toContain(fresh);
      expect(html).not.toContain(whSecret);
    }
  });

  it('every new form refuses a cross-origin post (403) and changes nothing', async () => {
    const page = `/account/webhooks/${webhookId}`;
    const [delivery] = await app.sql<{ id: number }>(`SELECT id::int AS id FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);
    const posts: [string, Record<string, string | string[]>][] = [
      ['/account/webhooks', { url: receiverUrl, events: '*' }],
      [`${page}/test`, {}],
      [`${page}/pause`, {}],
      [`${page}/resume`, {}],
      [`${page}/rotate`, {}],
      [`${page}/deliveries/${delivery.id}/resend`, {}],
      [`${page}/delete`, {}],
      ['/account/exports', { object: 'contacts', format: 'csv' }],
    ];
    const [before] = await app.sql(`SELECT secret, is_active, modified_at FROM webhooks WHERE id = $1`, [webhookId]);
    const count = received.length;
    for (const [path, values] of posts) {
      const r = await crossOrigin(path, values, page);
      expect([path, r.status]).toEqual([path, 403]);
      expect(alertOf(r.html)).toMatch(/Cross-site form posts are refused/);
      // Without a CSRF token, even from this origin.
      expect([path, (await browse(app, jar, path, values)).status]).toEqual([path, 403]);
    }
    expect(await app.sql(`SELECT secret, is_active, modified_at FROM webhooks WHERE id = $1`, [webhookId])).toEqual([before]);
    expect(await app.sql(`SELECT 1 FROM webhooks`)).toHaveLength(1);
    expect(received.length).toBe(count);
  });

  it('deletes a webhook after a confirmation page; parallel deletes: one succeeds, the other finds nothing', async () => {
    const confirm = await browse(app, jar, `/account/webhooks/${webhookId}/delete`);
    expect(confirm.status).toBe(200);
    expect(confirm.html).toContain('Delete webhook');
    expect(await app.sql(`SELECT 1 FROM webhooks WHERE id = $1`, [webhookId])).toHaveLength(1);
    const csrf = csrfOf(confirm.html);
    const answers = await Promise.all([1, 2].map(() => browse(app, jar, `/account/webhooks/${webhookId}/delete`, { _csrf: csrf })));
    expect(answers.map((a) => a.status).sort()).toEqual([303, 404]);
    expect(await app.sql(`SELECT 1 FROM webhooks WHERE id = $1`, [webhookId])).toHaveLength(0);
    expect(alertOf((await browse(app, jar, '/account/webhooks?done=deleted')).html)).toMatch(/deleted/);
    expect((await browse(app, jar, `/account/webhooks/${webhookId}`)).status).toBe(404);
  });

  it('events: the feed newest first, filtered by type and record, JSON shown escaped, paged, and the rows after a cursor for follow mode', async () => {
    const ops = bearer(await app.token('*', { user: 'ops@example.com', plan: 'enterprise' }));
    const ids: number[] = [];
    for (const name of ['Bo <i>', 'Cy', 'Di']) {
      const r = await fetch(`${app.url}/api/contacts`, {
        method: 'POST',
        headers: { Authorization: ops, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name, email: `${ids.length}-${Date.now()}@example.com` }),
      });
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { contact: { id: number } }).contact.id);
    }
    const seqOf = (html: string) => [...html.matchAll(/<tr data-sequence="(\d+)"/g)].map((m) => Number(m[1]));
    const all = await browse(app, jar, '/account/events');
    expect(all.status).toBe(200);
    const seqs = seqOf(all.html);
    expect(seqs.length).toBeGreaterThanOrEqual(4);
    expect([...seqs].sort((a, b) => b - a)).toEqual(seqs);
    expect(all.html).toContain('&quot;name&quot;: &quot;Bo &lt;i&gt;&quot;');
    expect(all.html).not.toContain('Bo <i>');

    const one = await browse(app, jar, `/account/events?type=contact.created&record=${ids[1]}`);
    expect(one.html.match(/<tr data-sequence=/g)).toHaveLength(1);
    expect(one.html).toContain('&quot;name&quot;: &quot;Cy&quot;');
    const created = seqOf((await browse(app, jar, '/account/events?type=contact.created')).html);
    expect(created).toHaveLength(4);

    // Older pages by cursor: everything below the sequence given.
    const older = await browse(app, jar, `/account/events?type=contact.created&before=${created[1]}`);
    expect(seqOf(older.html)).toEqual(created.slice(2));
    // Follow mode's rows: the events after the cursor, newest first, as table rows only.
    const rows = await browse(app, jar, `/account/events/rows?type=contact.created&after=${created[2]}`);
    expect(rows.status).toBe(200);
    expect(seqOf(rows.html)).toEqual(created.slice(0, 2));
    expect(rows.html.startsWith('<tr')).toBe(true);

    const bad = await browse(app, jar, '/account/events?type=nope.created');
    expect(bad.status).toBe(400);
    expect(bad.html).toMatch(/<p id="type-error" class="field-error">is not an event type<\/p>/);
    const badRecord = await browse(app, jar, '/account/events?record=%3Cx%3E');
    expect(badRecord.status).toBe(400);
    expect(badRecord.html).toMatch(/id="record-error"/);
    expect((await browse(app, jar, '/account/events?before=x')).status).toBe(400);
  });

  it('exports: the form shows errors next to its fields; an export started from it runs and its download link serves the file', async () => {
    const badFormat = await form('/account/exports', { object: 'contacts', format: 'xlsx', filter: '' }, '/account/exports/new');
    expect(badFormat.status).toBe(400);
    expect(badFormat.html).toMatch(/<p id="format-error" class="field-error">[^<]+<\/p>/);
    const badFilter = await form('/account/exports', { object: 'contacts', format: 'csv', filter: 'nonsense ~~ 1' }, '/account/exports/new');
    expect(badFilter.status).toBe(400);
    expect(badFilter.html).toContain('value="nonsense ~~ 1"');
    expect(badFilter.html).toMatch(/class="alert alert-error" role="alert">[^<]*filter|id="filter-error"/);
    expect(await app.sql(`SELECT 1 FROM exports`)).toHaveLength(0);
    const crossSite = await crossOrigin('/account/exports', { object: 'contacts', format: 'csv' }, '/account/exports/new');
    expect(crossSite.status).toBe(403);
    expect(await app.sql(`SELECT 1 FROM exports`)).toHaveLength(0);

    const started = await form('/account/exports', { object: 'contacts', format: 'csv', filter: '' }, '/account/exports/new');
    expect(started.status).toBe(303);
    const path = started.location ?? '';
    expect(path).toMatch(/^\/account\/exports\/\d+$/);
    const done = await waitUntil(
      'export completed',
      async () => {
        const p = await browse(app, jar, path);
        return p.html.includes('id="export-state">completed') ? p : null;
      },
      20_000,
    );
    const url = /<a class="btn btn-primary" href="([^"]+)" download>Download<\/a>/.exec(done.html)?.[1]?.replace(/&amp;/g, '&') ?? '';
    expect(url).toMatch(/\/api\/exports\/\d+\/download\?expires=\d+&signature=[0-9a-f]{64}$/);
    const file = await fetch(`${app.url}${new URL(url).pathname}${new URL(url).search}`);
    expect(file.status).toBe(200);
    const csv = await file.text();
    expect(csv.split('\n')[0]).toMatch(/^id,/);
    expect(csv).toContain('ada@example.com');
  });

  it("imports: an import's page shows its counts, its row errors and all of them as CSV; another user's import is a 404", async () => {
    // The basic plan's 3 requests per hour were spent above: the import goes through another token of the same user.
    const auth = bearer(await app.token('*', { user: EMAIL, plan: 'enterprise', name: 'Importer' }));
    const res = await fetch(`${app.url}/api/imports`, {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        object: 'contacts',
        mode: 'create',
        rows: [
          { name: 'Imp One', email: 'imp1@example.com' },
          { name: 'Imp Bad', email: 'not an email' },
          { name: 'Imp Two', email: 'imp2@example.com' },
          { name: 'Imp Worse', email: '=HYPERLINK(1)' },
        ],
      }),
    });
    expect(res.status).toBe(202);
    const id = ((await res.json()) as { import: { id: number } }).import.id;
    const lookup = await browse(app, jar, `/account/imports/open?id=${id}`);
    expect(lookup.location).toBe(`/account/imports/${id}`);
    expect((await browse(app, jar, '/account/imports/open?id=x')).status).toBe(400);
    const done = await waitUntil(
      'import completed',
      async () => {
        const p = await browse(app, jar, `/account/imports/${id}`);
        return p.html.includes('id="import-state">completed') ? p : null;
      },
      30_000,
    );
    expect(done.html).toContain('<progress id="import-progress" max="100" value="100">');
    expect(/id="count-created">(\d+)</.exec(done.html)?.[1]).toBe('2');
    expect(/id="count-failed">(\d+)</.exec(done.html)?.[1]).toBe('2');
    expect(done.html).toContain('Download all 2 errors as CSV');
    const csv = await browse(app, jar, `/account/imports/${id}/errors.csv`);
    expect(csv.status).toBe(200);
    expect(csv.res.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = csv.html.trim().split('\n');
    expect(lines[0]).toBe('row,column,code,message');
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(['2', '4']);
    // A user without a '*' token sees only their own imports (as the API answers their tokens): another's is a 404.
    expect((await app.cli(['user:create', '--email', 'uma@example.com', '--name', 'Uma'])).code).toBe(0);
    expect((await setPassword(app, 'uma@example.com', PASSWORD)).code).toBe(0);
    const uma = new Jar();
    expect((await signIn(app, uma, 'uma@example.com', PASSWORD)).status).toBe(303);
    expect((await browse(app, uma, `/account/imports/${id}`)).status).toBe(404);
    expect((await browse(app, uma, `/account/imports/${id}/errors.csv`)).status).toBe(404);
  });

  it('the pages need a session: without one they redirect to the sign-in form', async () => {
    for (const path of [
      '/account/usage',
      '/account/webhooks',
      '/account/webhooks/new',
      '/account/events',
      '/account/imports',
      '/account/imports/1',
      '/account/exports/new',
    ]) {
      const r = await browse(app, new Jar(), path);
      expect([path, r.status, r.location]).toEqual([path, 303, '/account/login']);
    }
  });
});
