/**
 * Contract details found by testing from outside: invalid text anywhere in a request
 * (NUL, bytes that are not UTF-8), keys named after built-in object members, hours-only offsets, and
 * the labels and bounds of errors. Each check goes through HTTP against the built server.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createCampaign, createContact, tokenFor, uniqueEmail } from './support/fixtures.js';

interface Route {
  method: string;
  path: string;
  permission: string;
}

const RESERVED = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty'];

describe('request contract', () => {
  let app: TestApp;
  let auth: string;
  let contactId: number;
  let campaignId: number;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    contactId = await createContact(app, auth, { name: 'Contract contact' });
    campaignId = (await createCampaign(app, auth, { name: 'Contract campaign' })).id;
  });
  afterAll(async () => app?.stop());

  /** Sends a JSON text as is (so that `__proto__` stays a key, as any client can send it). */
  const sendJson = (method: 'post' | 'patch' | 'put', path: string, json: string) =>
    app.http[method](path).set('Authorization', auth).set('Content-Type', 'application/json').send(json);
  const errorLogs = () =>
    app.logs
      .join('')
      .split('\n')
      .filter((l) => l.includes('"level":"error"'));

  describe('keys named after built-in object members are unknown properties', () => {
    it.each(RESERVED)('%s: refused at the top level and inside fields, on create and on edit', async (key) => {
      const email = uniqueEmail('reserved.test');
      const top = expectError(await sendJson('post', '/api/contacts/new', `{"name":"R","email":"${email}","${key}":{"x":1}}`), 400, 'validation_failed');
      expect(top.details).toContainEqual({ field: key, message: expect.any(String) });
      expect(top.message).toContain(key);
      const nested = expectError(
        await sendJson('post', '/api/contacts/new', `{"name":"R","email":"${email}","fields":{"${key}":"x"}}`),
        400,
        'validation_failed',
      );
      expect(nested.details).toContainEqual({ field: `fields.${key}`, message: expect.any(String) });
      expect(await app.sql(`SELECT id FROM contacts WHERE email = $1`, [email])).toEqual([]);

      const edit = expectError(await sendJson('patch', `/api/contacts/${contactId}`, `{"title":"Changed","${key}":"x"}`), 400, 'validation_failed');
      expect(edit.details).toContainEqual({ field: key, message: expect.any(String) });
      expectError(await sendJson('patch', `/api/contacts/${contactId}`, `{"fields":{"${key}":1}}`), 400, 'validation_failed');
      const [{ title }] = await app.sql<{ title: string | null }>(`SELECT title FROM contacts WHERE id = $1`, [contactId]);
      expect(title).not.toBe('Changed');

      // Every resource, not only contacts.
      const campaign = expectError(await sendJson('post', '/api/campaigns/new', `{"name":"C","${key}":1}`), 400, 'validation_failed');
      expect(campaign.details).toContainEqual({ field: key, message: expect.any(String) });
      expectError(await sendJson('put', `/api/campaigns/${campaignId}`, `{"name":"C","${key}":1}`), 400, 'validation_failed');
    });
  });

  describe('a custom field can never be named after a built-in object member', () => {
    it('alias "constructor" is refused, and a label "Constructor" gets another alias, so its values can always be sent', async () => {
      const refused = expectError(
        await sendJson('post', '/api/fields/contact/new', '{"label":"Ctor","alias":"constructor","type":"text"}'),
        400,
        'validation_failed',
      );
      expect(refused.message).toContain('constructor');
      const res = await sendJson('post', '/api/fields/contact/new', '{"label":"Constructor","type":"text","isPublished":true}');
      expect(res.status).toBe(201);
      const alias = (res.body as { field: { alias: string } }).field.alias;
      expect(alias).not.toBe('constructor');
      const patched = await sendJson('patch', `/api/contacts/${contactId}`, `{"fields":{"${alias}":"ok"}}`);
      expect(patched.status).toBe(200);
    });
  });

  describe('date-times with an hours-only offset', () => {
    it('are accepted wherever a date-time is, and read back in UTC', async () => {
      const c = await createCampaign(app, auth, { name: 'Offsets', startDate: '2026-03-01T12:00:00+02', endDate: '2026-03-02T12:00:00-05' });
      expect(c.startDate).toBe('2026-03-01T10:00:00+00:00');
      expect(c.endDate).toBe('2026-03-02T17:00:00+00:00');
      const deal = await app.http
        .post('/api/deals')
        .set('Authorization', auth)
        .send({ title: 'D', value: 1, contact_id: contactId, status: 'won', closed_at: '2026-03-01T12:00+02' });
      expect(deal.status).toBe(201);
      expect(deal.body.deal.closed_at).toBe('2026-03-01T10:00:00+00:00');
      const activity = await app.http
        .post('/api/activities')
        .set('Authorization', auth)
        .send({ type: 'call', subject: 'A', contact_id: contactId, due_date: '2026-03-01T12:00:00.5+0530' });
      expect(activity.status).toBe(201);
      expect(activity.body.activity.due_date).toBe('2026-03-01T06:30:00+00:00');
    });

    it('impossible dates and offsets are still refused', async () => {
      for (const startDate of ['2026-02-30T10:00:00Z', '2026-03-01T12:00:00+2', '2026-03-01T12:00:00+24', '2026-03-01T12:00:00']) {
        const e = expectError(await app.http.post('/api/campaigns/new').set('Authorization', auth).send({ name: 'Bad', startDate }), 400, 'validation_failed');
        expect(e.details?.[0].field).toBe('startDate');
      }
    });
  });

  describe('error labels and positive integers', () => {
    it('a broken multipart body is labelled multipart, not JSON; a broken JSON body still JSON', async () => {
      const truncated = await app.http
        .post('/api/assets/new')
        .set('Authorization', auth)
        .set('Content-Type', 'multipart/form-data; boundary=XX')
        .send('--XX\r\nContent-Disposition: form-data; name="title"\r\n\r\nabc');
      const e = expectError(truncated, 400, 'validation_failed');
      expect(e.message).toMatch(/multipart/i);
      expect(e.message).not.toMatch(/JSON/);
      const otherField = await app.http.post('/api/assets/new').set('Authorization', auth).field('title', 'x').attach('attachment', Buffer.from('y'), 'y.txt');
      expect(expectError(otherField, 400, 'validation_failed').message).not.toMatch(/JSON/);
      expect(expectError(await sendJson('post', '/api/contacts/new', '{"name":'), 400, 'validation_failed').message).toMatch(/^Malformed JSON body/);
    });

    it('integer filters refuse 0 and negatives, as their message says', async () => {
      for (const [path, param] of [
        ['/api/text-messages', 'campaignId'],
        ['/api/deals', 'contact_id'],
        ['/api/activities', 'contact_id'],
      ]) {
        for (const v of ['0', '-1', '00']) {
          const e = expectError(
            await app.http
              .get(path)
              .query({ [param]: v })
              .set('Authorization', auth),
            400,
            'validation_failed',
          );
          expect(e.details).toEqual([{ field: param, message: expect.stringContaining('positive') }]);
        }
        const ok = await app.http
          .get(path)
          .query({ [param]: String(param === 'campaignId' ? campaignId : contactId) })
          .set('Authorization', auth);
        expect(ok.status).toBe(200);
      }
    });
  });

  describe('NUL and invalid text anywhere', () => {
    let routes: Route[];
    beforeAll(async () => {
      routes = (await app.http.get('/api/endpoints').set('Authorization', auth)).body.endpoints;
    });

    it('the public asset download answers 404 for such an alias, without a token, and logs no error', async () => {
      for (const alias of ['x%00', '%00', 'x%E0%A4%A', 'x%ED%A0%80', 'x%FF']) {
        const res = await app.http.get(`/api/assets/1:${alias}`);
        expectError(res, 404, 'not_found');
        expect(res.headers['content-type']).toMatch(/application\/json/);
      }
      expect(errorLogs()).toEqual([]);
    });

    it('in any path segment of any route: 400 in the error shape', async () => {
      const failures: string[] = [];
      const download = (r: Route) => r.permission === 'public' && r.path.startsWith('/api/assets/');
      for (const route of routes.filter((r) => r.path.includes(':') && !download(r))) {
        for (const bad of ['1%00', '%E0%A4%A', '%ED%A0%80']) {
          const path = route.path.replace(/:([A-Za-z]+)/g, () => bad);
          let req = app.http[route.method.toLowerCase() as 'get'](path).set('Authorization', auth);
          if (['POST', 'PUT', 'PATCH'].includes(route.method)) req = req.send({});
          const res = await req;
          const body = res.body as { error?: { code?: string; status?: number } };
          if (res.status !== 400 || body.error?.code !== 'validation_failed' || body.error.status !== 400) {
            failures.push(`${route.method} ${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 160)}`);
          }
        }
      }
      expect(failures).toEqual([]);
    });

    it('in a query value or a body string: 400 naming it; a well-formed pair of surrogates is fine', async () => {
      for (const search of ['%E0%A4%A', '%ED%A0%80', 'a%00']) {
        const res = await app.http.get(`/api/contacts?search=${search}`).set('Authorization', auth);
        expect(expectError(res, 400, 'validation_failed').details).toContainEqual({ field: 'search', message: expect.any(String) });
      }
      const email = uniqueEmail('text.test');
      const lone = expectError(await sendJson('post', '/api/contacts/new', `{"name":"a\\ud800b","email":"${email}"}`), 400, 'validation_failed');
      expect(lone.details).toContainEqual({ field: 'name', message: expect.any(String) });
      const nested = expectError(
        await sendJson('post', '/api/contacts/new', `{"name":"n","email":"${email}","fields":{"x":"a\\udc00"}}`),
        400,
        'validation_failed',
      );
      expect(nested.details).toContainEqual({ field: 'fields.x', message: expect.any(String) });
      expectError(await sendJson('post', '/api/categories/new', '{"title":"t\\ud800","bundle":"global"}'), 400, 'validation_failed');
      expect(await app.sql(`SELECT id FROM contacts WHERE email = $1`, [email])).toEqual([]);
      await createContact(app, auth, { name: 'Emoji \ud83d\ude00' });
    });

    it('on the OAuth endpoints the same refusal is invalid_request, and nothing was logged as an error', async () => {
      const res = await app.http.post('/api/oauth/v2/token').type('form').send('grant_type=client_credentials&client_id=a%00&client_secret=b');
      expectError(res, 400, 'invalid_request');
      const reader = await tokenFor(app, 'contacts:read', { user: 'text-reader@example.com' });
      expectError(await app.http.get('/api/contacts/1%00').set('Authorization', reader), 400, 'validation_failed');
      expect(errorLogs()).toEqual([]);
    });
  });
});
