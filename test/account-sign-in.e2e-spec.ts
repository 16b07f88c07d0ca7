/**
 * The account console over HTTP: sign-in and its throttle, sessions (rotation, sign-out,
 * revocation), CSRF and origin checks, the separation of session cookies (/account only) and API
 * tokens (/api only), invitations and the CLI. The browser suite covers the pages in Chromium.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { alertOf, browse, csrfOf, Jar, setPassword, signIn } from './support/console.js';
import { tokenFor } from './support/fixtures.js';

const PASSWORD = 'correct horse battery staple';

describe('account console: sign-in and sessions', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startApp({
      env: { RATE_LIMIT_ANONYMOUS: '100000', ACCOUNT_SIGN_IN_FREE_ATTEMPTS: '3', ACCOUNT_SIGN_IN_FREE_ATTEMPTS_PER_ADDRESS: '40' },
    });
    for (const email of ['ann@example.com', 'ben@example.com', 'cat@example.com']) {
      expect((await app.cli(['user:create', '--email', email, '--name', email.split('@')[0]])).code).toBe(0);
      const r = await setPassword(app, email, PASSWORD);
      expect(r.stdout).toMatch(/password set/);
      expect(r.code).toBe(0);
    }
  });
  afterAll(async () => app?.stop());

  it('cli user:password refuses a short password or one containing the email, and stores only a scrypt hash', async () => {
    const short = await setPassword(app, 'ann@example.com', 'too short');
    expect(short.code).toBe(64);
    expect(short.stderr).toMatch(/at least 12 characters/);
    const withEmail = await setPassword(app, 'ann@example.com', 'my ann@example.com password');
    expect(withEmail.code).toBe(64);
    expect(withEmail.stderr).toMatch(/email/);
    expect((await setPassword(app, 'nobody@example.com', PASSWORD)).code).toBe(64);
    const rows = await app.sql<{ password_hash: string }>(
      `SELECT password_hash FROM user_passwords p JOIN users u ON u.id = p.user_id WHERE u.email = 'ann@example.com'`,
    );
    expect(rows[0].password_hash).toMatch(/^scrypt\$/);
    expect(rows[0].password_hash).not.toContain(PASSWORD);
  });

  it('signs in: the session cookie is HttpOnly, SameSite=Lax, scoped to /account, not Secure over http, and new at every sign-in', async () => {
    const jar = new Jar();
    const first = await signIn(app, jar, 'ann@example.com', PASSWORD);
    expect(first.status).toBe(303);
    expect(first.location).toBe('/account/tokens');
    const cookie = first.res.headers.getSetCookie().find((c) => c.startsWith('sf_session='))!;
    expect(cookie).toMatch(/^sf_session=[A-Za-z0-9_-]{43}; Path=\/account; HttpOnly; SameSite=Lax$/);
    const old = jar.cookies.get('sf_session')!;
    expect((await browse(app, jar, '/account')).status).toBe(200);

    // Signing in again (with the old cookie) issues a new session and ends the old one.
    const again = await signIn(app, jar, 'ann@example.com', PASSWORD);
    expect(again.status).toBe(303);
    const rotated = jar.cookies.get('sf_session')!;
    expect(rotated).not.toBe(old);
    const stale = new Jar();
    stale.cookies.set('sf_session', old);
    const refused = await browse(app, stale, '/account/tokens');
    expect(refused.status).toBe(303);
    expect(refused.location).toBe('/account/login');
    expect((await browse(app, jar, '/account/tokens')).status).toBe(200);
    // Only hashes are stored.
    expect(await app.sql(`SELECT 1 FROM account_sessions WHERE token_hash = $1 OR csrf_token = $1`, [rotated])).toHaveLength(0);
  });

  it('answers every console page with a strict CSP, no framing and no caching', async () => {
    const jar = new Jar();
    await signIn(app, jar, 'ann@example.com', PASSWORD);
    for (const path of ['/account/login', '/account', '/account/tokens', '/account/tokens/new', '/account/notifications']) {
      const page = await browse(app, jar, path);
      expect(page.status).toBe(200);
      const csp = page.res.headers.get('content-security-policy')!;
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(page.res.headers.get('x-frame-options')).toBe('DENY');
      expect(page.res.headers.get('cache-control')).toBe('no-store');
      expect(page.html).not.toMatch(/<script(?![^>]*\ssrc=)/); // no inline script
      expect(page.html).not.toMatch(/\sstyle=|<style/);
    }
  });

  it('wrong password and unknown email get the same answer', async () => {
    const a = await signIn(app, new Jar(), 'ben@example.com', 'not the password at all');
    const b = await signIn(app, new Jar(), 'nobody-here@example.com', 'not the password at all');
    expect(a.status).toBe(401);
    expect(b.status).toBe(401);
    expect(alertOf(a.html)).toBe('The email or password is not correct');
    expect(alertOf(b.html)).toBe(alertOf(a.html));
    await signIn(app, new Jar(), 'ben@example.com', PASSWORD); // clears ben's count
  });

  it('refuses a form without its CSRF token, with another token, or from another origin (403), and changes nothing', async () => {
    const jar = new Jar();
    await signIn(app, jar, 'ann@example.com', PASSWORD);
    const form = await browse(app, jar, '/account/tokens/new');
    const csrf = csrfOf(form.html);
    const body = { name: 'csrf probe', permissions: ['contacts:read'] };
    const before = await app.sql(`SELECT count(*)::int AS n FROM api_tokens`);
    expect((await browse(app, jar, '/account/tokens', body)).status).toBe(403);
    expect((await browse(app, jar, '/account/tokens', { ...body, _csrf: 'x'.repeat(43) })).status).toBe(403);
    const other = new Jar();
    await signIn(app, other, 'ben@example.com', PASSWORD);
    const othersToken = csrfOf((await browse(app, other, '/account/tokens/new')).html);
    expect((await browse(app, jar, '/account/tokens', { ...body, _csrf: othersToken })).status).toBe(403);
    expect((await browse(app, jar, '/account/tokens', { ...body, _csrf: csrf }, { Origin: 'https://evil.example' })).status).toBe(403);
    expect((await browse(app, jar, '/account/tokens', { ...body, _csrf: csrf }, { 'Sec-Fetch-Site': 'cross-site' })).status).toBe(403);
    expect(await app.sql(`SELECT count(*)::int AS n FROM api_tokens`)).toEqual(before);
    // The sign-in form too: its token is a cookie of its own (double submit).
    const login = await browse(app, new Jar(), '/account/login', { email: 'ann@example.com', password: PASSWORD, _csrf: csrf });
    expect(login.status).toBe(403);
    // With the right token it works.
    expect((await browse(app, jar, '/account/tokens', { ...body, _csrf: csrf })).status).toBe(201);
  });

  it('a session cookie opens no /api route, and an API token opens no /account page', async () => {
    const jar = new Jar();
    await signIn(app, jar, 'ann@example.com', PASSWORD);
    const session = `sf_session=${jar.cookies.get('sf_session')}`;
    expectError(await app.http.get('/api/account/tokens').set('Cookie', session), 401, 'unauthorized');
    expectError(await app.http.get('/api/notifications').set('Cookie', session), 401, 'unauthorized');
    const bearer = await tokenFor(app, '*', { user: 'ann@example.com' });
    // Even together with a valid session, a bearer token is refused by the console.
    expectError(await app.http.get('/account/tokens').set('Authorization', bearer).set('Cookie', session), 401, 'unauthorized');
    expectError(await app.http.get('/account/tokens').set('Authorization', bearer), 401, 'unauthorized');
    // A non-browser client without a session gets the error shape; a browser is sent to the sign-in form.
    expectError(await app.http.get('/account/tokens'), 401, 'unauthorized');
  });

  it('sign-out ends the session at once; "sign out everywhere" ends all of them', async () => {
    const a = new Jar();
    const b = new Jar();
    await signIn(app, a, 'cat@example.com', PASSWORD);
    await signIn(app, b, 'cat@example.com', PASSWORD);
    const cookieA = a.cookies.get('sf_session')!;
    const out = await browse(app, a, '/account/logout', { _csrf: csrfOf((await browse(app, a, '/account')).html) });
    expect(out.status).toBe(303);
    expect(out.location).toBe('/account/login');
    expect(a.cookies.has('sf_session')).toBe(false);
    const replay = new Jar();
    replay.cookies.set('sf_session', cookieA);
    expect((await browse(app, replay, '/account')).location).toBe('/account/login');
    expect((await browse(app, b, '/account')).status).toBe(200);

    const c = new Jar();
    await signIn(app, c, 'cat@example.com', PASSWORD);
    expect((await browse(app, c, '/account/sessions/revoke-all', { _csrf: csrfOf((await browse(app, c, '/account')).html) })).status).toBe(303);
    expect((await browse(app, b, '/account')).location).toBe('/account/login');
    expect((await browse(app, c, '/account')).location).toBe('/account/login');
  });

  it('cli user:invite prints a one-time link (secret in the fragment) that sets the password and signs in', async () => {
    expect((await app.cli(['user:create', '--email', 'dan@example.com', '--name', 'Dan'])).code).toBe(0);
    const r = await app.cli(['user:invite', '--email', 'dan@example.com']);
    expect(r.code).toBe(0);
    const url = new URL(r.stdout.trim().split('\n').pop()!);
    expect(url.origin + url.pathname).toBe(`${app.url}/account/invitation`);
    const secret = url.hash.slice(1);
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const [row] = await app.sql<{ expires_at: Date }>(`SELECT expires_at FROM account_invitations ORDER BY id DESC LIMIT 1`);
    expect(Math.abs(new Date(row.expires_at).getTime() - Date.now() - 72 * 3600_000)).toBeLessThan(60_000);

    const jar = new Jar();
    const form = await browse(app, jar, '/account/invitation');
    const csrf = csrfOf(form.html);
    const weak = await browse(app, jar, '/account/invitation', { _csrf: csrf, token: secret, password: 'dan@example.com!!', confirm: 'dan@example.com!!' });
    expect(weak.status).toBe(400);
    expect(alertOf(weak.html)).toMatch(/email/);
    const ok = await browse(app, jar, '/account/invitation', { _csrf: csrf, token: secret, password: PASSWORD, confirm: PASSWORD });
    expect(ok.status).toBe(303);
    expect((await browse(app, jar, '/account')).status).toBe(200);
    // Used once: the same link does nothing again.
    const again = await browse(
      app,
      new Jar(),
      '/account/invitation',
      { _csrf: csrf, token: secret, password: 'another long password', confirm: 'another long password' },
      { Cookie: `sf_login_csrf=${csrf}` },
    );
    expect(again.status).toBe(404);
    expect((await signIn(app, new Jar(), 'dan@example.com', PASSWORD)).status).toBe(303);
  });

  it('lists the console routes in GET /api/endpoints: the signed-in pages as "session", the doors as "public"', async () => {
    const admin = await tokenFor(app, '*', { user: 'root@example.com' });
    const endpoints = (await app.http.get('/api/endpoints').set('Authorization', admin)).body.endpoints as {
      method: string;
      path: string;
      permission: string;
    }[];
    const console = endpoints.filter((e) => e.path.startsWith('/account'));
    expect(console).toEqual(
      expect.arrayContaining([
        { method: 'GET', path: '/account/login', permission: 'public' },
        { method: 'POST', path: '/account/login', permission: 'public' },
        { method: 'GET', path: '/account/tokens', permission: 'session', credential: 'session' },
        { method: 'POST', path: '/account/tokens/:id/revoke', permission: 'session', credential: 'session' },
        { method: 'POST', path: '/account/logout', permission: 'session', credential: 'session' },
      ]),
    );
    expect(console.every((e) => e.permission === 'session' || e.permission === 'public')).toBe(true);
  });

  describe('login throttle', () => {
    it('per account: after the free failures each attempt waits (429 with Retry-After), the same for an unknown email, and the right password works once the wait is over', async () => {
      for (const email of ['ben@example.com', 'nobody-at-all@example.com']) {
        for (let i = 0; i < 3; i++) expect((await signIn(app, new Jar(), email, 'wrong password number ' + i)).status).toBe(401);
        const slowed = await signIn(app, new Jar(), email, email === 'ben@example.com' ? PASSWORD : 'whatever it is now');
        expect(slowed.status).toBe(429);
        expect(slowed.res.headers.get('retry-after')).toBe('1');
        expect(alertOf(slowed.html)).toMatch(/Too many failed sign-ins; try again in 1 s/);
      }
      // Another account from the same address is not slowed by these.
      expect((await signIn(app, new Jar(), 'cat@example.com', PASSWORD)).status).toBe(303);
      await new Promise((r) => setTimeout(r, 1100));
      expect((await signIn(app, new Jar(), 'ben@example.com', PASSWORD)).status).toBe(303);
      // The success clears the account's count.
      expect((await signIn(app, new Jar(), 'ben@example.com', 'wrong once more')).status).toBe(401);
      expect((await signIn(app, new Jar(), 'ben@example.com', PASSWORD)).status).toBe(303);
    });

    it('per address: failures spread over many emails slow every sign-in from that address', async () => {
      const [row] = await app.sql<{ failures: number }>(`SELECT failures FROM account_sign_in_failures WHERE key LIKE 'ip:%'`);
      const left = 40 - row.failures;
      expect(left).toBeGreaterThan(0);
      for (let i = 0; i < left; i++) expect((await signIn(app, new Jar(), `spray${i}@example.com`, 'password guess 12345')).status).toBe(401);
      const slowed = await signIn(app, new Jar(), 'ann@example.com', PASSWORD);
      expect(slowed.status).toBe(429);
      expect(Number(slowed.res.headers.get('retry-after'))).toBeGreaterThan(0);
    });
  });
});
