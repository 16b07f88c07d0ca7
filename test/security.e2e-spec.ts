/**
 * Security rules checked from outside: forwarded addresses, the queue dashboard inside the guard chain
 * and rate-limit headers on unmatched routes. Token rules (a token's reach, its children, no-store secrets) are
 * in account-tokens.e2e-spec.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { sign } from './support/sms-gateway.js';

const TOKEN = '/api/oauth/v2/token';
const DASHBOARD = '/api/admin/queues';

describe('security: client addresses without TRUST_PROXY (default)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(async () => app?.stop());

  it('ignores X-Forwarded-For: 70 anonymous requests with a changing header get 60 × 401, then 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 70; i++) {
      statuses.push((await app.http.get('/api/contacts').set('X-Forwarded-For', `203.0.113.${i + 1}`)).status);
    }
    expect(statuses.slice(0, 60)).toEqual(Array(60).fill(401));
    expect(statuses.slice(60)).toEqual(Array(10).fill(429));
  });

  it("ignores X-Forwarded-For on the OAuth token endpoint's guessing limit too", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 22; i++) {
      const res = await app.http
        .post(TOKEN)
        .set('X-Forwarded-For', `198.51.100.${i + 1}`)
        .type('form')
        .send({ grant_type: 'client_credentials', client_id: '1', client_secret: `sf_guess${i}` });
      statuses.push(res.status);
    }
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(401));
    expect(statuses.slice(20)).toEqual([429, 429]);
  });
});

describe('security: client addresses with TRUST_PROXY', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ env: { TRUST_PROXY: '127.0.0.1/8', RATE_LIMIT_ANONYMOUS: '3' } });
  });
  afterAll(async () => app?.stop());

  it('counts per forwarded address when the connection comes from a trusted proxy', async () => {
    const from = (ip: string) => app.http.get('/api/contacts').set('X-Forwarded-For', ip);
    const a: number[] = [];
    for (let i = 0; i < 4; i++) a.push((await from('203.0.113.7')).status);
    expect(a).toEqual([401, 401, 401, 429]);
    // another forwarded address has its own counter
    expect((await from('203.0.113.8')).status).toBe(401);
  });

  it('refuses to start with a malformed TRUST_PROXY, naming it', async () => {
    await expect(startApp({ env: { TRUST_PROXY: 'everyone' } })).rejects.toThrow(/TRUST_PROXY/);
  });
});

describe('security: the queue dashboard behind the guard chain, and unmatched routes', () => {
  let app: TestApp;
  let secret: string;
  let admin: string;
  const basic = (password: string) => `Basic ${Buffer.from(`admin:${password}`).toString('base64')}`;

  beforeAll(async () => {
    app = await startApp({ env: { RATE_LIMIT_ENTERPRISE: '500', SMS_WEBHOOK_SECRET: 'hook-secret', METRICS_TOKEN: 'scrape-secret' } });
    secret = await app.token('*', { plan: 'enterprise' });
    admin = `Bearer ${secret}`;
  });
  afterAll(async () => app?.stop());

  it('answers X-RateLimit-* headers on a 404 for an unknown route and on a 405, counted on the plan of the token', async () => {
    const notFound = await app.http.get('/api/no-such-thing').set('Authorization', admin);
    expectError(notFound, 404, 'not_found');
    expect(notFound.headers['x-ratelimit-limit']).toBe('500');
    const remaining = Number(notFound.headers['x-ratelimit-remaining']);
    const notAllowed = await app.http.patch('/api/contacts').set('Authorization', admin).send({});
    expectError(notAllowed, 405, 'method_not_allowed');
    expect(notAllowed.headers['x-ratelimit-limit']).toBe('500');
    expect(Number(notAllowed.headers['x-ratelimit-remaining'])).toBe(remaining - 1);
    expect(notAllowed.headers['allow']).toMatch(/GET/);
  });

  it('counts anonymous unmatched requests per address, with headers', async () => {
    const res = await app.http.get('/nothing/here');
    expectError(res, 404, 'not_found');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('59');
    const post = await app.http.post('/api/nope').set('Content-Type', 'text/plain').send('x');
    expectError(post, 404, 'not_found');
    expect(post.headers['x-ratelimit-remaining']).toBe('58');
  });

  it('checks SMS delivery-report signatures and the metrics token in the guard chain: refused ones count per address, valid ones are not limited', async () => {
    const body = JSON.stringify({ reference: 'textmessage-999999-1', status: 'delivered' });
    const report = (secret: string) =>
      app.http.post('/api/text-messages/delivery-reports').set('Content-Type', 'application/json').set('X-Signature', sign(secret, body)).send(body);
    const forged = await report('wrong');
    expectError(forged, 401, 'unauthorized');
    expect(forged.headers['x-ratelimit-limit']).toBe('60');
    const signed = await report('hook-secret');
    expect(signed.status).toBe(200);
    expect(signed.body).toEqual({ accepted: false, status: null });
    expect(signed.headers['x-ratelimit-limit']).toBeUndefined();

    const wrongScraper = await app.http.get('/metrics').set('Authorization', 'Bearer scrape-wrong');
    expectError(wrongScraper, 401, 'unauthorized');
    expect(wrongScraper.headers['x-ratelimit-limit']).toBe('60');
    const scraper = await app.http.get('/metrics').set('Authorization', 'Bearer scrape-secret');
    expect(scraper.status).toBe(200);
    expect(scraper.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('serves the dashboard to a * token as Bearer or Basic; 401 with a Basic challenge otherwise', async () => {
    expect((await app.http.get(DASHBOARD).set('Authorization', basic(secret))).status).toBe(200);
    expect((await app.http.get(`${DASHBOARD}/api/queues`).set('Authorization', admin)).status).toBe(200);
    const anon = expectError(await app.http.get(DASHBOARD), 401, 'unauthorized');
    expect(anon).toBeDefined();
    expect((await app.http.get(DASHBOARD)).headers['www-authenticate']).toMatch(/^Basic /);
    expectError(await app.http.get(`${DASHBOARD}/no/such/page`).set('Authorization', admin), 404, 'not_found');
  });

  it('refuses cross-origin and form-encoded or text/plain state changes with 403, even with valid Basic credentials', async () => {
    const auth = basic(secret);
    const add = `${DASHBOARD}/api/queues/maintenance/add`;
    const job = { name: 'csrf', data: {} };
    expectError(await app.http.post(add).set('Authorization', auth).set('Origin', 'https://evil.example').send(job), 403, 'forbidden');
    expectError(await app.http.post(add).set('Authorization', auth).type('form').send({ name: 'csrf' }), 403, 'forbidden');
    expectError(await app.http.post(add).set('Authorization', auth).set('Content-Type', 'text/plain').send(JSON.stringify(job)), 403, 'forbidden');
    expectError(await app.http.post(add).set('Authorization', auth).set('Sec-Fetch-Site', 'cross-site').send(job), 403, 'forbidden');
    expectError(await app.http.put(`${DASHBOARD}/api/queues/reports/pause`).set('Authorization', auth).set('Origin', 'https://evil.example'), 403, 'forbidden');
    // the same page's own requests (same origin, JSON or no body) go through
    const pause = await app.http.put(`${DASHBOARD}/api/queues/reports/pause`).set('Authorization', auth).set('Origin', app.url);
    expect(pause.status).toBeLessThan(300);
    const resume = await app.http.put(`${DASHBOARD}/api/queues/reports/resume`).set('Authorization', auth).set('Origin', app.url).send({});
    expect(resume.status).toBeLessThan(300);
  });

  it('rate limits dashboard logins: 100 bad Basic logins end in 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) statuses.push((await app.http.get(DASHBOARD).set('Authorization', basic(`sf_wrong${i}`))).status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(60);
    expect(statuses.slice(-10)).toEqual(Array(10).fill(429));
  });
});
