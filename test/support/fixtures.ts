/**
 * Shared end-to-end fixtures (issue 12.6), built on startApp() and its CLI-made tokens: users,
 * Bearer headers by permission, and records every suite needs (a contact, a campaign, a deal, an
 * activity). Suites declare only what is particular to them.
 */
import { expect } from '@jest/globals';
import type { TestApp } from './app.js';

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
