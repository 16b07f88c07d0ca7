/**
 * The console's import and workflow pages in a real Chromium (playwright-core, Debian's
 * /usr/bin/chromium): a CSV with two bad rows uploaded and its columns mapped in the form, the
 * progress bar seen moving while the import runs (held at known points by row locks the suite
 * takes on two contacts the file updates, so no timing decides what is seen), the row errors
 * downloaded; a cross-origin post of the upload and of the workflow buttons refused; a workflow's
 * graph drawn with the counts of its steps, paused and resumed. Every page photographed at 1280
 * and 375 px into test-artifacts/screenshots/ and checked with axe-core.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { startApp, type TestApp } from './support/app.js';
import { type ConsoleBrowser, openConsole } from './support/browser.js';
import { setPassword } from './support/console.js';
import { bearer } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const EMAIL = 'noor@example.com';
const PASSWORD = 'a long and happy passphrase';
const ROWS = 60;
/** Data rows (1-based) updating the two contacts whose rows the suite locks: the first chunk, and the fifth (chunks of 10). */
const HELD = { first: 5, later: 45 };
const BAD = { email: 7, score: 13 };

function csv(): string {
  const lines = ['Name,Email,Score'];
  for (let i = 1; i <= ROWS; i++) {
    const email = i === HELD.first ? 'held1@auto.test' : i === HELD.later ? 'held2@auto.test' : i === BAD.email ? 'not an email' : `p${i}@auto.test`;
    lines.push(`Person ${i},${email},${i === BAD.score ? 'lots' : i}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A transaction holding one contact's row lock until released. */
async function holdContact(app: TestApp, email: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: app.databaseUrl! });
  await client.connect();
  await client.query('BEGIN');
  const r = await client.query(`SELECT id FROM contacts WHERE email = $1 FOR UPDATE`, [email]);
  expect(r.rowCount).toBe(1);
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

describe('account console imports and workflows in Chromium', () => {
  let app: TestApp;
  let b: ConsoleBrowser;
  let auth: string;
  let evil: Server;
  let evilUrl: string;

  beforeAll(async () => {
    app = await startApp({ env: { RATE_LIMIT_ANONYMOUS: '100000', IMPORT_CHUNK_ROWS: '10', IMPORT_PARALLEL_CHUNKS: '1' } });
    auth = bearer(await app.token('*', { user: EMAIL, plan: 'enterprise', name: 'Automation' }));
    const call = async (path: string, body: unknown) => {
      const r = await fetch(`${app.url}${path}`, {
        method: 'POST',
        headers: { Authorization: auth, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(r.status).toBeLessThan(300);
      return (await r.json()) as Record<string, { id: number }>;
    };
    await call('/api/fields/contact/new', { label: 'Score', type: 'number' });
    await call('/api/fields/contact/new', { label: 'Tier', type: 'text' });
    for (const email of ['held1@auto.test', 'held2@auto.test']) await call('/api/contacts', { name: 'Held', email });
    expect((await setPassword(app, EMAIL, PASSWORD)).code).toBe(0);
    // A page of another origin (same site: another port) whose forms post to the console.
    evil = createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!doctype html><title>Elsewhere</title>
<form id="up" method="post" action="${app.url}/account/imports/upload" enctype="multipart/form-data">
<input name="object" value="contacts"><input type="file" name="file" id="file"><button id="send-upload">Send</button></form>
<form id="wf" method="post" action="${app.url}/account/workflows/${req.url?.slice(1) || '0'}/pause"><button id="send-pause">Pause</button></form>`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}`;
    b = await openConsole(app.url, EMAIL, PASSWORD, 'automation');
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await app?.stop();
    evil?.closeAllConnections();
    await new Promise((r) => evil?.close(r));
  });

  it('imports a CSV through the mapping form: the bar moves while it runs, two bad rows, their errors downloaded', async () => {
    const { page } = b;
    const first = await holdContact(app, 'held1@auto.test');
    const later = await holdContact(app, 'held2@auto.test');
    try {
      await page.getByRole('link', { name: 'Imports' }).click();
      await page.waitForLoadState();
      await b.record('imports');
      await page.getByLabel('Records').selectOption('contacts');
      await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(csv()) });
      await page.getByRole('button', { name: 'Upload and map columns' }).click();
      await page.waitForLoadState();
      expect(new URL(page.url()).pathname).toMatch(/^\/account\/imports\/uploads\/\d+$/);
      // The header read from the file, each column proposed for the property or custom field it is named for.
      await expect(page.getByLabel('Name', { exact: true }).inputValue()).resolves.toBe('name');
      await expect(page.getByLabel('Email', { exact: true }).inputValue()).resolves.toBe('email');
      await expect(page.getByLabel('Score', { exact: true }).inputValue()).resolves.toBe('fields.score');
      await page.getByRole('radio', { name: /Upsert/ }).check();
      await b.record('import-mapping');
      let loads = 0;
      await page.getByRole('button', { name: 'Start import' }).click();
      await page.waitForLoadState();
      expect(new URL(page.url()).pathname).toMatch(/^\/account\/imports\/\d+$/);
      page.on('load', () => (loads += 1));
      // Held at the first chunk: nothing is committed yet.
      await expect(page.locator('#import-progress').getAttribute('value')).resolves.toBe('0');
      await first.release();
      // Four chunks commit, the fifth waits for the second lock (40 of 60 rows): the page's script moves the bar, without a reload.
      const held = Math.round((40 / ROWS) * 100);
      await page.waitForFunction(
        (want) =>
          (globalThis as unknown as { document: { getElementById(id: string): { value: number } | null } }).document.getElementById('import-progress')
            ?.value === want,
        held,
        { timeout: 25_000 },
      );
      expect(loads).toBe(0);
      await expect(page.locator('#import-progress').getAttribute('value')).resolves.toBe(String(held));
      await expect(page.locator('#import-processed').textContent()).resolves.toBe('40');
      await expect(page.locator('#import-total').textContent()).resolves.toBe(String(ROWS));
      await b.record('import-running');
      await later.release();
      // Ended: the script reloads the page once, which shows the final counts and the row errors.
      await waitUntil('the page reloaded at the end', () => Promise.resolve(loads === 1), 30_000);
      await page.waitForLoadState();
      await expect(page.locator('#import-state').textContent()).resolves.toBe('completed');
      await expect(page.locator('#import-progress').getAttribute('value')).resolves.toBe('100');
      await expect(page.locator('#count-created').textContent()).resolves.toBe(String(ROWS - 4));
      await expect(page.locator('#count-updated').textContent()).resolves.toBe('2');
      await expect(page.locator('#count-failed').textContent()).resolves.toBe('2');
      await b.record('import-done');
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: /Download all 2 errors/ }).click()]);
      const lines = readFileSync(await download.path(), 'utf8')
        .trim()
        .split('\n');
      expect(lines[0]).toBe('row,column,code,message');
      expect(lines.slice(1).map((l) => l.split(',').slice(0, 2).join(','))).toEqual([`${BAD.email},Email`, `${BAD.score},Score`]);
    } finally {
      await first.release().catch(() => undefined);
      await later.release().catch(() => undefined);
    }
  });

  it('a mapping refused by the API shows the error next to its field and keeps what was chosen', async () => {
    const { page } = b;
    await page.goto(`${app.url}/account/imports`);
    await page.getByLabel('Records').selectOption('contacts');
    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'more.csv', mimeType: 'text/csv', buffer: Buffer.from('Name,Score\nZed,4\n') });
    await page.getByRole('button', { name: 'Upload and map columns' }).click();
    await page.waitForLoadState();
    await page.getByRole('radio', { name: /Update/ }).check();
    // Score is a custom field, but not a unique identifier: it cannot name the records to update.
    await page.getByLabel('Id property (update and upsert)').selectOption('score');
    await page.getByRole('button', { name: 'Start import' }).click();
    await page.waitForLoadState();
    await expect(page.locator('#idProperty-error').textContent()).resolves.toMatch(/unique-identifier/);
    await expect(page.getByLabel('Id property (update and upsert)').getAttribute('aria-invalid')).resolves.toBe('true');
    await expect(page.getByRole('radio', { name: /Update/ }).isChecked()).resolves.toBe(true);
    await expect(page.getByLabel('Score', { exact: true }).inputValue()).resolves.toBe('fields.score');
    await b.record('import-mapping-error');
  });

  let workflowId = 0;

  it("draws a workflow's step graph with the contacts waiting at and done with each step; pause and resume", async () => {
    const { page } = b;
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${app.url}${path}`, {
        method: 'POST',
        headers: { Authorization: auth, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(r.status).toBeLessThan(300);
      return (await r.json()) as Record<string, Record<string, unknown>>;
    };
    const contacts: number[] = [];
    for (const [email, tier] of [
      ['gold@auto.test', 'gold'],
      ['plain1@auto.test', 'silver'],
      ['plain2@auto.test', 'silver'],
    ]) {
      contacts.push((await post('/api/contacts', { name: email, email, fields: { tier } })).contact.id as number);
    }
    const w = (
      await post('/api/workflows', {
        name: 'Welcome series',
        description: 'Greets new leads, VIPs first.',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'check', type: 'branch', name: 'Gold tier?', branches: [{ filter: 'fields.tier[eq]:gold', next: 'vip' }], defaultNext: 'later' },
          { key: 'vip', type: 'update_contact', name: 'Mark as VIP', set: { title: 'VIP' }, next: 'later' },
          { key: 'later', type: 'wait', name: 'Wait a week', duration: '7d', next: 'nudge' },
          { key: 'nudge', type: 'update_contact', name: 'Nudge', set: { title: 'nudged' } },
          { key: 'won', type: 'goal', name: 'Became a customer', filter: 'title[eq]:Customer' },
        ],
      })
    ).workflow;
    workflowId = w.id as number;
    await post(`/api/workflows/${workflowId}/enrollments`, { contactIds: contacts });
    const stats = await waitUntil(
      'three contacts waiting a week',
      async () => {
        const s = (await (await fetch(`${app.url}/api/workflows/${workflowId}/stats`, { headers: { Authorization: auth } })).json()) as {
          steps: { key: string; waiting: number; completed: number }[];
        };
        return s.steps.find((x) => x.key === 'later')?.waiting === 3 ? s : null;
      },
      30_000,
      250,
    );
    await page.getByRole('link', { name: 'Workflows' }).click();
    await page.waitForLoadState();
    await expect(page.getByRole('row', { name: /Welcome series/ }).textContent()).resolves.toMatch(/active[\s\S]*manual[\s\S]*3/);
    await b.record('workflows');
    await page.getByRole('link', { name: 'Welcome series' }).click();
    await page.waitForLoadState();
    const graph = page.locator('svg.workflow-graph');
    await expect(graph.getAttribute('role')).resolves.toBe('img');
    for (const s of stats.steps) {
      const node = graph.locator(`g.step[data-step="${s.key}"]`);
      await expect(node.getAttribute('data-waiting')).resolves.toBe(String(s.waiting));
      await expect(node.getAttribute('data-completed')).resolves.toBe(String(s.completed));
    }
    await expect(graph.locator('g.step[data-step="later"]').textContent()).resolves.toContain('3 waiting');
    const vip = stats.steps.find((x) => x.key === 'vip')!;
    await expect(graph.locator('g.step[data-step="vip"] .step-counts').textContent()).resolves.toMatch(
      new RegExp(`^${vip.waiting} waiting · ${vip.completed} done`),
    );
    await expect(page.getByRole('row', { name: /Wait a week/ }).textContent()).resolves.toMatch(/wait[\s\S]*3/);
    // Every link of the definition is an arrow: check → vip, check → later (else), vip → later, later → nudge.
    await expect(graph.locator('path.edge').count()).resolves.toBe(4);
    await b.record('workflow');
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.waitForLoadState();
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/paused/);
    await expect(page.locator('#wf-h .badge').textContent()).resolves.toBe('paused');
    await b.record('workflow-paused');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.waitForLoadState();
    await expect(page.locator('#wf-h .badge').textContent()).resolves.toBe('active');
  });

  it('a form posted from another origin is refused and changes nothing', async () => {
    const { page } = b;
    const before = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM console_import_uploads`);
    await page.goto(`${evilUrl}/${workflowId}`);
    await page.locator('#file').setInputFiles({ name: 'x.csv', mimeType: 'text/csv', buffer: Buffer.from('email\nx@evil.test\n') });
    const [upload] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/account/imports/upload')), page.locator('#send-upload').click()]);
    expect(upload.status()).toBe(403);
    await page.goto(`${evilUrl}/${workflowId}`);
    const [pause] = await Promise.all([page.waitForResponse((r) => r.url().endsWith(`/pause`)), page.locator('#send-pause').click()]);
    expect(pause.status()).toBe(403);
    expect(await app.sql<{ n: string }>(`SELECT count(*) AS n FROM console_import_uploads`)).toEqual(before);
    expect(await app.sql(`SELECT status FROM workflows WHERE id = $1`, [workflowId])).toEqual([{ status: 'active' }]);
  });

  it('every page fits 375 px, ran no blocked script, and axe-core finds no serious or critical violation', () => {
    expect(b.overflow).toEqual([]);
    expect(b.cspViolations).toEqual([]);
    if (!b.axe) throw new Error('axe-core is not installed: add it as a pinned devDependency (npm install --save-dev --save-exact axe-core)');
    expect(b.accessibility.map((a) => a.page)).toEqual([
      'imports',
      'import-mapping',
      'import-running',
      'import-done',
      'import-mapping-error',
      'workflows',
      'workflow',
      'workflow-paused',
    ]);
    expect(b.accessibility.filter((a) => a.violations.length)).toEqual([]);
  });
});
