/**
 * Shared end-to-end fixtures, built on startApp() and its CLI-made tokens: users,
 * Bearer headers by permission, and records every suite needs (a contact, a campaign, a deal, an
 * activity). Suites declare only what is particular to them.
 */
import { expect } from '@jest/globals';
import { expectError, type TestApp } from './app.js';

/** A timestamp as the API writes it: UTC, seconds, `+00:00`. */
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/;

/** The user the CLI creates when a token is made without `--user`. */
export const ADMIN_EMAIL = 'admin@example.com';

export const bearer = (secret: string): string => `Bearer ${secret}`;

export interface TokenOptions {
  user?: string;
  plan?: 'basic' | 'professional' | 'enterprise';
  expires?: string;
  name?: string;
}

/** An Authorization header for a new token holding `permissions` (a comma list, or '*'). */
export async function tokenFor(app: TestApp, permissions = '*', opts: TokenOptions = {}): Promise<string> {
  return bearer(await app.token(permissions, opts));
}

/** The admin's '*' token on the enterprise plan (the limit no functional suite reaches). */
export const adminToken = (app: TestApp, plan: TokenOptions['plan'] = 'enterprise'): Promise<string> => tokenFor(app, '*', { plan });

/**
 * The tokens a resource suite checks permissions with, made in this order: the admin's ('*'),
 * `<resource>:read` (reader@example.com), `others` without the resource (other@example.com), and
 * `<resource>:read,<resource>:write` (writer@example.com); all on the enterprise plan.
 */
export async function resourceTokens(app: TestApp, resource: string, others: string) {
  const auth = await adminToken(app);
  const readOnly = await tokenFor(app, `${resource}:read`, { user: 'reader@example.com', plan: 'enterprise' });
  const none = await tokenFor(app, others, { user: 'other@example.com', plan: 'enterprise' });
  const readWrite = await tokenFor(app, `${resource}:read,${resource}:write`, { user: 'writer@example.com', plan: 'enterprise' });
  return { auth, readOnly, none, readWrite };
}

/** The id of a user the CLI created (by token:create or user:create). */
export async function userId(app: TestApp, email = ADMIN_EMAIL): Promise<number> {
  const rows = await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = $1`, [email]);
  if (!rows.length) throw new Error(`no user ${email}`);
  return rows[0].id;
}

let seq = 0;
/** An email address no other fixture of this process uses. */
export const uniqueEmail = (domain = 'fixtures.test', prefix = 'contact'): string => `${prefix}${++seq}-${Date.now()}@${domain}`;

type Body = Record<string, unknown>;

/** POSTs a body to a create route, expects 201 and returns the record under `key`. */
export async function createRecord<T extends { id: number } = { id: number; [k: string]: unknown }>(
  app: TestApp,
  auth: string,
  path: string,
  key: string,
  body: Body,
): Promise<T> {
  const res = await app.http.post(path).set('Authorization', auth).send(body);
  expect(res.status).toBe(201);
  return res.body[key] as T;
}

/** A contact (name 'Contact' and a unique email unless given); returns its id. */
export async function createContact(app: TestApp, auth: string, body: Body = {}, path = '/api/contacts/new'): Promise<number> {
  return (await createRecord(app, auth, path, 'contact', { name: 'Contact', email: uniqueEmail(), ...body })).id;
}

/** A campaign (name 'Campaign' unless given); returns the record. */
export const createCampaign = (app: TestApp, auth: string, body: Body = {}, path = '/api/campaigns/new') =>
  createRecord(app, auth, path, 'campaign', { name: 'Campaign', ...body });

/** A deal of a contact (title 'Deal', value 100 unless given); returns the record. */
export const createDeal = (app: TestApp, auth: string, contactId: number, body: Body = {}, path = '/api/deals') =>
  createRecord(app, auth, path, 'deal', { title: 'Deal', value: 100, contact_id: contactId, ...body });

/** An activity of a contact (a call, subject 'Activity' unless given); returns the record. */
export const createActivity = (app: TestApp, auth: string, contactId: number, body: Body = {}, path = '/api/activities') =>
  createRecord(app, auth, path, 'activity', { type: 'call', subject: 'Activity', contact_id: contactId, ...body });

/**
 * DELETE in both path styles: `/{id}/delete` answers `a` as it was, `/{id}` answers `b`; then `a` is
 * a 404 to GET and `b` a 404 to DELETE at `againPath` (by default `/{id}`).
 */
export async function expectDeletedInBothStyles(
  app: TestApp,
  auth: string,
  base: string,
  key: string,
  a: { id: number },
  b: { id: number },
  againPath = `${base}/${b.id}`,
): Promise<void> {
  const delA = await app.http.delete(`${base}/${a.id}/delete`).set('Authorization', auth);
  expect(delA.status).toBe(200);
  expect(delA.body).toEqual({ [key]: a });
  const delB = await app.http.delete(`${base}/${b.id}`).set('Authorization', auth);
  expect(delB.status).toBe(200);
  expect(delB.body[key].id).toBe(b.id);
  expectError(await app.http.get(`${base}/${a.id}`).set('Authorization', auth), 404, 'not_found');
  expectError(await app.http.delete(againPath).set('Authorization', auth), 404, 'not_found');
}

/**
 * GET /api/endpoints lists exactly `expected` ([method, path, permission]) among the routes under
 * `prefix`; `extra` adds what a route declares besides (e.g. `alsoRequires`).
 */
export async function expectRoutes(
  app: TestApp,
  auth: string,
  prefix: string,
  expected: string[][],
  extra: (path: string) => object = () => ({}),
): Promise<void> {
  const res = await app.http.get('/api/endpoints').set('Authorization', auth);
  expect(res.status).toBe(200);
  const routes = (res.body.endpoints as { method: string; path: string; permission: string }[]).filter((e) => e.path.startsWith(prefix));
  const wanted = expected.map(([method, path, permission]) => ({ method, path, permission, ...extra(path) }));
  expect(routes).toEqual(expect.arrayContaining(wanted));
  expect(routes).toHaveLength(wanted.length);
}

/** A route that reads contact records also requires contacts:read. */
export const contactReading = (path: string): object =>
  path.endsWith('/:id/contacts') || path.endsWith('/contacts/search') ? { alsoRequires: ['contacts:read'] } : {};

/** An event of the feed as the suites read it. */
export interface FeedEvent {
  type: string;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

/** The cursor at the end of the event feed now. */
export async function feedHead(app: TestApp, auth: string): Promise<string> {
  let cursor = '0';
  for (;;) {
    const res = await app.http.get(`/api/events?limit=500&after=${cursor}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    if (!res.body.events.length) return cursor;
    cursor = res.body.next;
  }
}

/** Every event of `types` (a comma list) after `cursor`, all pages. */
export async function feedSince(app: TestApp, auth: string, cursor: string, types: string): Promise<FeedEvent[]> {
  const out: FeedEvent[] = [];
  for (;;) {
    const res = await app.http.get(`/api/events?limit=500&after=${cursor}&types=${types}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    if (!res.body.events.length) return out;
    out.push(...res.body.events);
    cursor = res.body.next;
  }
}
