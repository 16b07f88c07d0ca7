/**
 * The console's integrator pages in a real Chromium (playwright-core, Debian's /usr/bin/chromium):
 * a webhook to a local receiver that fails then succeeds, both attempts seen in the delivery log,
 * then resent from the page; the event feed followed while a change happens; the usage chart
 * showing the requests just made. Every page is photographed at 1280 and 375 px wide into
 * test-artifacts/screenshots/ (kept out of git), checked for horizontal overflow at 375 px, and
 * checked with axe-core (no serious or critical violation).
 *
 * Chromium: CHROMIUM_PATH or /usr/bin/chromium. axe-core: the pinned devDependency.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { startApp, type TestApp } from './support/app.js';
import { CHROMIUM, launchChromium, SHOTS } from './support/browser.js';
import { setPassword } from './support/console.js';
import { bearer } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const EMAIL = 'ida@example.com';
const PASSWORD = 'a long and happy passphrase';

/** axe-core's browser bundle, or null when the package is not installed. */
function axeSource(): string | null {
  try {
    return readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  } catch {
    return null;
  }
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown }[];
}

describe('account console integrator pages in Chromium', () => {
  let app: TestApp;
  let context: BrowserContext;
  let page: Page;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let receiver: Server;
  let receiverUrl: string;
  let apiToken: string;
  /** The receiver's answers, in order; after these it answers 200. */
  const answers = [500];
  const received: string[] = [];
  const cspViolations: string[] = [];
  const axe = axeSource();
  const accessibility: { page: string; violations: AxeViolation[] }[] = [];
  const overflow: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
    mkdirSync(SHOTS, { recursive: true });
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        const status = answers.shift() ?? 200;
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ ok: status < 300, note: status < 300 ? 'stored' : 'database is down' }));
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/salesflow`;
    app = await startApp({
      env: {
        RATE_LIMIT_ANONYMOUS: '100000',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_DISPATCH_INTERVAL_MS: '50',
        WEBHOOK_RETRY_FIRST_DELAY_MS: '1500',
      },
    });
    apiToken = await app.token('*', { user: EMAIL, plan: 'professional', name: 'Integration' });
    expect((await setPassword(app, EMAIL, PASSWORD)).code).toBe(0);
    browser = await launchChromium();
    context = browser.context;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => {
      if (/Content[ -]Security[ -]Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await page.goto(`${app.url}/account/login`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    receiver?.closeAllConnections();
    await new Promise((r) => receiver?.close(r));
  });

  /**
   * The page as it is now: a screenshot at 1280 px, then at 375 px (with a check that nothing makes
   * the page wider than the screen), and axe-core's serious and critical violations.
   */
  async function record(name: string) {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.screenshot({ path: join(SHOTS, `integrator-${name}-1280.png`), fullPage: true });
    await page.setViewportSize({ width: 375, height: 800 });
    const widths = await page.evaluate(() => {
      const d = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document;
      return { scroll: d.documentElement.scrollWidth, client: d.documentElement.clientWidth };
    });
    if (widths.scroll > widths.client + 1) overflow.push(`${name}: ${widths.scroll} px wide at 375`);
    await page.screenshot({ path: join(SHOTS, `integrator-${name}-375.png`), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
    if (axe) {
      // Evaluated through the DevTools protocol, which the page's CSP does not govern (the page itself runs no inline script).
      await page.evaluate(axe);
      const violations = await page.evaluate(async () => {
        const axeApi = (globalThis as unknown as { axe: { run(o: object): Promise<{ violations: AxeViolation[] }> } }).axe;
        const r = await axeApi.run({ resultTypes: ['violations'] });
        return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
      });
      accessibility.push({ page: name, violations: violations.filter((v) => v.impact === 'serious' || v.impact === 'critical') });
    }
  }

  let webhookPath = '';

  it('creates a webhook through the form: a validation error next to its field, then the secret shown once and copied', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Webhooks');
    await record('webhooks-empty');
    await page.getByRole('link', { name: 'Add a webhook' }).click();
    await page.getByLabel('URL').fill(receiverUrl);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.waitForLoadState();
    await expect(page.locator('#events-error').textContent()).resolves.toBe('choose at least one event type');
    await expect(page.getByLabel('URL').inputValue()).resolves.toBe(receiverUrl);
    await record('webhook-new-error');
    await page.getByLabel('contact.created').check();
    await page.getByLabel('contact.updated').check();
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.waitForLoadState();
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Your new webhook');
    const secret = await page.getByLabel('Signing secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.locator('#copy-status', { hasText: 'Copied to the clipboard.' }).waitFor({ timeout: 10_000 });
    await record('webhook-secret');
    await page.getByRole('link', { name: 'Done' }).click();
    await page.waitForLoadState();
    webhookPath = new URL(page.url()).pathname;
    expect(webhookPath).toMatch(/^\/account\/webhooks\/\d+$/);
    expect(await page.content()).not.toContain(secret);
  });

  it('a delivery that fails then succeeds shows both attempts with status, duration and response; resent from the page', async () => {
    const contact = await fetch(`${app.url}/api/contacts`, {
      method: 'POST',
      headers: { Authorization: bearer(apiToken), 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Grace Hopper', email: 'grace@example.com' }),
    });
    expect(contact.status).toBe(201);
    await waitUntil(
      'two attempts logged',
      async () => {
        await page.goto(`${app.url}${webhookPath}`);
        return (await page.locator('tr.attempt').count()) === 2;
      },
      30_000,
      500,
    );
    const attempts = page.locator('li.delivery').first().locator('tr.attempt');
    // Newest attempt first: #2 answered 200, #1 answered 500, each with its duration and the start of the answer.
    await expect(attempts.nth(0).textContent()).resolves.toMatch(/#2[\s\S]*\d+ ms[\s\S]*200[\s\S]*stored/);
    await expect(attempts.nth(1).textContent()).resolves.toMatch(/#1[\s\S]*\d+ ms[\s\S]*500[\s\S]*database is down/);
    await expect(page.locator('li.delivery').first().locator('.badge').first().textContent()).resolves.toBe('succeeded');
    await record('webhook-log');

    await page
      .getByRole('button', { name: /^Resend/ })
      .first()
      .click();
    await page.waitForLoadState();
    await expect(page.getByRole('status').first().textContent()).resolves.toMatch(/queued again/);
    await waitUntil(
      'third attempt logged',
      async () => {
        await page.goto(`${app.url}${webhookPath}`);
        return (await page.locator('tr.attempt').count()) === 3;
      },
      30_000,
      500,
    );
    expect(received).toHaveLength(3);
    await page.goto(`${app.url}/account/webhooks`);
    await expect(page.getByRole('row', { name: new RegExp(receiverUrl.replace(/[/.]/g, '\\$&')) }).textContent()).resolves.toMatch(/200[\s\S]*67% of 3/);
    await record('webhooks');
  });

  it('test event, pause, resume and the delete confirmation', async () => {
    await page.goto(`${app.url}${webhookPath}`);
    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.waitForLoadState();
    await expect(page.locator('#test-result').textContent()).resolves.toMatch(/response status 200 in \d+ ms/);
    await record('webhook-test');
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.waitForLoadState();
    await expect(page.locator('.badge-off').first().textContent()).resolves.toBe('paused');
    await record('webhook-paused');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.waitForLoadState();
    await expect(page.locator('.badge-on').first().textContent()).resolves.toBe('active');
    await page.getByRole('link', { name: 'Delete' }).click();
    await page.waitForLoadState();
    await record('webhook-delete');
    await page.getByRole('link', { name: 'Cancel' }).click();
    await page.waitForLoadState();
    expect(new URL(page.url()).pathname).toBe(webhookPath);
  });

  it('follows the event feed: a change made meanwhile appears on top without reloading', async () => {
    await page.goto(`${app.url}/account/events`);
    await record('events');
    const before = await page.locator('#event-rows tr').count();
    await page.getByRole('button', { name: 'Follow new events' }).click();
    await expect(page.getByRole('button', { name: 'Stop following' }).getAttribute('aria-pressed')).resolves.toBe('true');
    const r = await fetch(`${app.url}/api/contacts`, {
      method: 'POST',
      headers: { Authorization: bearer(apiToken), 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Followed Person', email: 'followed@example.com' }),
    });
    expect(r.status).toBe(201);
    await page.locator('#event-rows tr').nth(before).waitFor({ timeout: 15_000 });
    await expect(page.locator('#event-rows tr').first().textContent()).resolves.toMatch(/contact\.created/);
    await page.locator('#event-rows tr').first().getByText('JSON').click();
    await expect(page.locator('#event-rows tr').first().locator('pre.json').textContent()).resolves.toContain('Followed Person');
    await page.getByRole('button', { name: 'Stop following' }).click();
    await record('events-followed');
    await page.selectOption('#type', 'contact.created');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForLoadState();
    expect(new URL(page.url()).searchParams.get('type')).toBe('contact.created');
    const types = await page.locator('#event-rows th[data-label=Type]').allTextContents();
    expect(types.length).toBeGreaterThan(0);
    expect(new Set(types)).toEqual(new Set(['contact.created']));
  });

  it('starts an export from the form; the page updates itself until it is done, and the file downloads', async () => {
    await page.getByRole('link', { name: 'Exports' }).click();
    await page.waitForLoadState();
    await record('export-new');
    await page.getByLabel('Records').selectOption('contacts');
    await page.getByLabel('Format').selectOption('csv');
    await page.getByRole('button', { name: 'Start export' }).click();
    await page.waitForLoadState();
    expect(new URL(page.url()).pathname).toMatch(/^\/account\/exports\/\d+$/);
    // The page reloads itself (the console script) until the job has ended.
    await page.locator('#export-state', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await record('export-done');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download' }).click()]);
    const file = await download.path();
    const csv = readFileSync(file, 'utf8');
    expect(csv.split('\n')[0]).toMatch(/^id,/);
    expect(csv).toContain('grace@example.com');
    expect(csv).toContain('followed@example.com');
    expect(download.suggestedFilename()).toMatch(/^contacts-export-\d+\.csv$/);
  });

  it("an import's page: counts, row errors, and the errors downloaded as CSV", async () => {
    const res = await fetch(`${app.url}/api/imports`, {
      method: 'POST',
      headers: { Authorization: bearer(apiToken), 'Content-Type': 'application/json' },
      body: JSON.stringify({
        object: 'contacts',
        mode: 'create',
        rows: [
          { name: 'Row One', email: 'row1@example.com' },
          { name: 'Row Bad', email: 'nope' },
          { name: 'Row Worse', email: 'also nope' },
        ],
      }),
    });
    expect(res.status).toBe(202);
    const id = ((await res.json()) as { import: { id: number } }).import.id;
    await page.getByRole('link', { name: 'Imports' }).click();
    await page.waitForLoadState();
    await record('imports');
    await page.getByLabel('Import id').fill(String(id));
    await page.getByRole('button', { name: 'Open' }).click();
    await page.waitForLoadState();
    // While the import runs, the page's script follows its progress, then reloads the page once it has ended:
    // wait for a page rendered after the end (no progress to follow).
    await page.locator('section[aria-labelledby="import-h"]:not([data-progress])').waitFor({ timeout: 30_000 });
    await page.waitForLoadState();
    await expect(page.locator('#import-state').textContent()).resolves.toBe('completed');
    await expect(page.locator('#import-progress').getAttribute('value')).resolves.toBe('100');
    await expect(page.locator('#count-created').textContent()).resolves.toBe('1');
    await expect(page.locator('#count-failed').textContent()).resolves.toBe('2');
    await record('import');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: /Download all 2 errors/ }).click()]);
    const csv = readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n');
    expect(csv[0]).toBe('row,column,code,message');
    expect(csv.slice(1).map((l) => l.split(',')[0])).toEqual(['2', '3']);
  });

  it('the usage chart shows the requests just made, per token, against the plan limit', async () => {
    for (let i = 0; i < 5; i++) expect((await fetch(`${app.url}/api/contacts`, { headers: { Authorization: bearer(apiToken) } })).status).toBe(200);
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.waitForLoadState();
    const chart = page.locator('svg.chart').first();
    // 2 contacts created, 1 import, 5 reads with the token (the console's own pages are not API requests).
    await expect(chart.getAttribute('data-total')).resolves.toBe('8');
    await expect(chart.getAttribute('data-limit')).resolves.toBe('5000');
    await expect(page.getByRole('heading', { name: /Token Integration/ }).count()).resolves.toBe(1);
    const hour = new Date(Date.now() - (Date.now() % 3_600_000)).toISOString();
    await expect(page.locator(`svg.chart g.bar[data-hour="${hour}"]`).first().getAttribute('data-requests')).resolves.toBe('8');
    await record('usage-24h');
    await page.getByRole('link', { name: 'Last 7 days' }).click();
    await page.waitForLoadState();
    await expect(page.locator('svg.chart').first().getAttribute('data-total')).resolves.toBe('8');
    await record('usage-7d');
  });

  it('every page fits 375 px, and the pages ran no blocked script', () => {
    expect(overflow).toEqual([]);
    expect(cspViolations).toEqual([]);
  });

  it('axe-core finds no serious or critical violation on any page', () => {
    if (!axe) throw new Error('axe-core is not installed: add it as a pinned devDependency (npm install --save-dev --save-exact axe-core)');
    expect(accessibility.length).toBeGreaterThanOrEqual(16);
    expect(accessibility.filter((a) => a.violations.length)).toEqual([]);
  });
});
