/**
 * The account console in a real Chromium, driven by playwright-core: sign in, generate a
 * token with two permissions, copy it, use it (200 on an allowed route, 403 on another), revoke it
 * (401 at once), notifications, sign out; a wrong password; a CSRF refusal; a session cookie refused
 * by /api. Every page is photographed at 1280 and 375 px into test-artifacts/screenshots/ (kept out of
 * git), checked for horizontal overflow at 375 px and with axe-core (test/support/browser.ts).
 *
 * Chromium: CHROMIUM_PATH or /usr/bin/chromium (.ci/run installs it with apt-get when absent).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { PERMISSIONS } from '../src/common/route-access.js';
import { startApp, type TestApp } from './support/app.js';
import { CHROMIUM, launchChromium, pageRecorder, type PageRecorder, SHOTS } from './support/browser.js';
import { setPassword } from './support/console.js';

const EMAIL = 'eve@example.com';
const PASSWORD = 'a long and happy passphrase';

describe('account console in Chromium', () => {
  let app: TestApp;
  let context: BrowserContext;
  let page: Page;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  const cspViolations: string[] = [];

  let recorder: PageRecorder;
  /** A console page at 1280 and 375 px (test-artifacts/screenshots/account-<name>-<width>.png), its overflow and axe-core's check. */
  const shot = (name: string) => recorder.record(name);
  const api = (path: string, secret: string) => fetch(app.url + path, { headers: { Authorization: `Bearer ${secret}` } });

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
    mkdirSync(SHOTS, { recursive: true });
    app = await startApp({ env: { RATE_LIMIT_ANONYMOUS: '100000' } });
    expect((await app.cli(['user:create', '--email', EMAIL, '--name', 'Eve Example', '--plan', 'professional'])).code).toBe(0);
    expect((await setPassword(app, EMAIL, PASSWORD)).code).toBe(0);
    browser = await launchChromium();
    context = browser.context;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
    page = context.pages()[0] ?? (await context.newPage());
    recorder = pageRecorder(page, 'account');
    page.on('console', (m) => {
      if (/Content[ -]Security[ -]Policy/i.test(m.text())) cspViolations.push(m.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
  });

  async function signInAs(email: string, password: string) {
    await page.goto(`${app.url}/account/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState();
  }

  it('refuses a wrong password with a message on the form', async () => {
    await page.goto(`${app.url}/account/login`);
    await shot('login');
    await signInAs(EMAIL, 'not my password, sorry');
    await expect(page.getByRole('alert').textContent()).resolves.toBe('The email or password is not correct');
    expect(new URL(page.url()).pathname).toBe('/account/login');
    await expect(page.getByLabel('Email').inputValue()).resolves.toBe(EMAIL);
    await shot('login-error');
    expect((await context.cookies()).some((c) => c.name === 'sf_session')).toBe(false);
  });

  let secret = '';

  it('signs in, generates a token with two permissions, shows it once and copies it', async () => {
    await signInAs(EMAIL, PASSWORD);
    expect(new URL(page.url()).pathname).toBe('/account/tokens');
    const session = (await context.cookies()).find((c) => c.name === 'sf_session')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/account', secure: false });
    await shot('tokens-empty');

    await page.getByRole('link', { name: 'Generate a new token' }).click();
    expect(new URL(page.url()).pathname).toBe('/account/tokens/new');
    // A user without a * token is not offered *.
    await expect(page.locator('input[value="*"]').count()).resolves.toBe(0);
    // Every other permission the API accepts has its checkbox (the form is generated from the registry).
    const offered = await page.locator('input[type="checkbox"][name="permissions"]').evaluateAll((inputs) => inputs.map((i) => i.getAttribute('value')));
    expect(offered.sort()).toEqual(PERMISSIONS.filter((p) => p !== '*').sort());
    await page.getByLabel('Name').fill('CRM sync');
    await page.getByRole('group', { name: 'Contacts' }).getByLabel('read').check();
    await page.getByRole('group', { name: 'Deals' }).getByLabel('write').check();
    await shot('token-new');
    await page.getByRole('button', { name: 'Generate token' }).click();
    await page.waitForLoadState();

    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Your new API token');
    const field = await page.getByLabel('Token').inputValue();
    expect(field).toMatch(/^sf_[A-Za-z0-9_-]{43}$/);
    expect(page.url()).not.toContain(field);
    await page.getByRole('button', { name: 'Copy' }).click();
    // The copy is asynchronous (navigator.clipboard): wait for the page to announce it, as a user would see it.
    await page.locator('#copy-status', { hasText: 'Copied to the clipboard.' }).waitFor({ timeout: 10_000 });
    await expect(page.locator('#copy-status').textContent()).resolves.toBe('Copied to the clipboard.');
    // The page's own clipboard, as the user would paste it (the suite's tsconfig has no DOM types).
    secret = await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText());
    expect(secret).toBe(field);
    await shot('token-secret');

    // Shown once: the list never carries it.
    await page.goto(`${app.url}/account/tokens`);
    expect(await page.content()).not.toContain(secret);
    await expect(page.getByRole('row', { name: /CRM sync/ }).textContent()).resolves.toMatch(/contacts:read\s*deals:write[\s\S]*active/);
    await shot('tokens');
  });

  it('the copied token calls the API: 200 where it has the permission, 403 where not', async () => {
    expect((await api('/api/contacts', secret)).status).toBe(200);
    expect((await api('/api/deals', secret)).status).toBe(403);
    expect((await api('/api/campaigns', secret)).status).toBe(403);
  });

  it('revokes the token after a confirmation, and it gets 401 at once', async () => {
    await page.getByRole('link', { name: 'Revoke CRM sync' }).click();
    expect(new URL(page.url()).pathname).toMatch(/^\/account\/tokens\/\d+\/revoke$/);
    await shot('token-revoke');
    expect((await api('/api/contacts', secret)).status).toBe(200); // not yet: only the confirmation page
    await page.getByRole('button', { name: 'Revoke token' }).click();
    await page.waitForLoadState();
    expect(new URL(page.url()).pathname).toBe('/account/tokens');
    await expect(page.getByRole('row', { name: /CRM sync/ }).textContent()).resolves.toMatch(/revoked/);
    expect((await api('/api/contacts', secret)).status).toBe(401);
  });

  it('shows the notifications with mark-read, and the plan with its rate-limit usage', async () => {
    const [user] = await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = $1`, [EMAIL]);
    await app.sql(
      `INSERT INTO notifications (user_id, type, message, details, is_read) VALUES ($1, 'lead_assigned', 'Contact Ada Lovelace was assigned to you', '{}', false),
                                                                              ($1, 'report_ready', 'Report "Weekly sales" is ready', '{}', false)`,
      [user.id],
    );
    await page.getByRole('link', { name: 'Notifications' }).click();
    await shot('notifications');
    await page.getByRole('button', { name: /Mark read.*Contact Ada Lovelace/ }).click();
    await page.waitForLoadState();
    await expect(page.getByRole('button', { name: /Mark read/ }).count()).resolves.toBe(1);
    const rows = await app.sql<{ message: string; is_read: boolean }>(`SELECT message, is_read FROM notifications WHERE user_id = $1 ORDER BY id`, [user.id]);
    expect(rows.map((r) => r.is_read)).toEqual([true, false]);

    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.locator('section[aria-labelledby=plan]').textContent()).resolves.toMatch(/professional[\s\S]*5,000 requests per hour[\s\S]*\d+ used/);
    // The four accepted API calls made with the token (three above, one before the revocation) count against the account's limit.
    await expect(page.locator('#usage-meter').getAttribute('value')).resolves.toBe('4');
    await shot('overview');
  });

  it('refuses a form whose CSRF token was tampered with (403) and creates nothing', async () => {
    await page.goto(`${app.url}/account/tokens/new`);
    await page.getByLabel('Name').fill('forged');
    await page.getByRole('group', { name: 'Contacts' }).getByLabel('read').check();
    await page.locator('form.card input[name=_csrf]').evaluate((el) => ((el as unknown as { value: string }).value = 'forged-token'));
    await page.getByRole('button', { name: 'Generate token' }).click();
    await page.waitForLoadState();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/did not come from this site/);
    await shot('csrf-refused');
    expect(await app.sql(`SELECT 1 FROM api_tokens WHERE name = 'forged'`)).toHaveLength(0);
  });

  it('the session cookie is never sent to /api, and refused there when sent by hand', async () => {
    const apiPage = await page.goto(`${app.url}/api/account/tokens`);
    expect(apiPage!.status()).toBe(401);
    const session = (await context.cookies()).find((c) => c.name === 'sf_session')!;
    const byHand = await fetch(`${app.url}/api/account/tokens`, { headers: { Cookie: `sf_session=${session.value}` } });
    expect(byHand.status).toBe(401);
  });

  it('is linked from the API reference', async () => {
    await page.goto(`${app.url}/api/docs/`);
    await page.locator('a[href="/account"]').first().waitFor({ timeout: 20_000 });
    await page.screenshot({ path: join(SHOTS, 'account-api-docs.png') });
  });

  it('signs out: the session ends and the pages ask to sign in again', async () => {
    await page.goto(`${app.url}/account`);
    await page
      .getByRole('button', { name: /Sign out/ })
      .first()
      .click();
    await page.waitForLoadState();
    expect(new URL(page.url()).pathname).toBe('/account/login');
    await page.goto(`${app.url}/account/tokens`);
    expect(new URL(page.url()).pathname).toBe('/account/login');
    expect(cspViolations).toEqual([]);
  });

  it('an invitation link opens the password form, which sets the password and signs in', async () => {
    expect((await app.cli(['user:create', '--email', 'ivo@example.com', '--name', 'Ivo'])).code).toBe(0);
    const r = await app.cli(['user:invite', '--email', 'ivo@example.com']);
    expect(r.code).toBe(0);
    const link = new URL(r.stdout.trim().split('\n').pop()!);
    await page.goto(`${app.url}${link.pathname}${link.hash}`);
    await shot('invitation');
    await page.getByLabel('New password').fill('a brand new long passphrase');
    await page.getByLabel('Repeat the password').fill('a brand new long passphrase');
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await page.waitForLoadState();
    expect(new URL(page.url()).pathname).toBe('/account/tokens');
  });

  it('every page fits 375 px, and axe-core finds no serious or critical violation on any', () => {
    if (!recorder.axe) throw new Error('axe-core is not installed: add it as a pinned devDependency (npm install --save-dev --save-exact axe-core)');
    expect(recorder.overflow).toEqual([]);
    expect(recorder.accessibility.map((a) => a.page)).toEqual([
      'login',
      'login-error',
      'tokens-empty',
      'token-new',
      'token-secret',
      'tokens',
      'token-revoke',
      'notifications',
      'overview',
      'csrf-refused',
      'invitation',
    ]);
    expect(recorder.accessibility.filter((a) => a.violations.length)).toEqual([]);
  });
});
