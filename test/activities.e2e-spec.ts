import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { createActivity, createContact, uniqueEmail, userId, ISO, expectDeletedInBothStyles, expectRoutes, resourceTokens } from './support/fixtures.js';

describe('activities', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noActivities: string;
  let readWrite: string;
  let adminId: number;
  let contactId: number;

  beforeAll(async () => {
    app = await startApp();
    ({ auth, readOnly, none: noActivities, readWrite } = await resourceTokens(app, 'activities', 'contacts:read,deals:read,deals:write'));
    adminId = await userId(app);
    contactId = await newContact('Activity Contact');
  });
  afterAll(async () => app?.stop());

  const newContact = (name: string) => createContact(app, auth, { name, email: uniqueEmail('activities.test', 'act') }, '/api/contacts');
  const create = (body: object, path = '/api/activities') => app.http.post(path).set('Authorization', auth).send(body);
  const newActivity = (body: object = {}) => createActivity(app, auth, contactId, body as Record<string, unknown>);

  describe('create', () => {
    it('creates through POST /api/activities with 201 and a snake_case record', async () => {
      const res = await create({
        type: 'meeting',
        subject: 'Kick-off',
        contact_id: contactId,
        due_date: '2026-11-21T10:15:00-05:00',
        notes: 'Bring slides',
        outcome: 'scheduled',
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        activity: {
          id: expect.any(Number),
          type: 'meeting',
          subject: 'Kick-off',
          contact_id: contactId,
          due_date: '2026-11-21T15:15:00+00:00',
          notes: 'Bring slides',
          outcome: 'scheduled',
          createdAt: expect.stringMatching(ISO),
          modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
          createdBy: adminId,
          createdByUser: expect.any(String),
          modifiedBy: expect.any(Number),
          modifiedByUser: expect.any(String),
        },
      });
    });

    it('creates through /api/activities/new with only the required properties', async () => {
      const res = await create({ type: 'email', subject: 'Follow-up', contact_id: contactId }, '/api/activities/new');
      expect(res.status).toBe(201);
      expect(res.body.activity).toMatchObject({ type: 'email', subject: 'Follow-up', due_date: null, notes: null, outcome: null });
    });

    it('refuses bad bodies with 400 and details naming the field', async () => {
      const base = { type: 'call', subject: 'x', contact_id: contactId };
      const cases: [object, string][] = [
        [{ subject: 'x', contact_id: contactId }, 'type'],
        [{ ...base, type: 'sms' }, 'type'],
        [{ ...base, type: 'CALL' }, 'type'],
        [{ type: 'call', contact_id: contactId }, 'subject'],
        [{ ...base, subject: '' }, 'subject'],
        [{ ...base, subject: 5 }, 'subject'],
        [{ type: 'call', subject: 'x' }, 'contact_id'],
        [{ ...base, contact_id: 987654 }, 'contact_id'],
        [{ ...base, contact_id: '5' }, 'contact_id'],
        [{ ...base, contactId: contactId }, 'contactId'],
        [{ ...base, due_date: '2026-11-21T10:15:00' }, 'due_date'],
        [{ ...base, due_date: '2026-11-21' }, 'due_date'],
        [{ ...base, notes: ['a'] }, 'notes'],
        [{ ...base, outcome: 1 }, 'outcome'],
        [{ ...base, dueDate: '2026-11-21T10:15:00Z' }, 'dueDate'],
      ];
      for (const [body, field] of cases) {
        const err = expectError(await create(body), 400, 'validation_failed');
        expect({ body, fields: err.details?.map((d) => d.field) }).toEqual({ body, fields: expect.arrayContaining([field]) });
      }
    });
  });

  describe('read, edit, delete', () => {
    it('gets one; 404 for a missing or malformed id', async () => {
      const a = await newActivity({ subject: 'Readable' });
      const res = await app.http.get(`/api/activities/${a.id}`).set('Authorization', auth);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ activity: a });
      expectError(await app.http.get('/api/activities/987654').set('Authorization', auth), 404, 'not_found');
      expectError(await app.http.get('/api/activities/1.5').set('Authorization', auth), 404, 'not_found');
    });

    it('PATCH changes only the supplied properties, in both path styles', async () => {
      const a = await newActivity({ subject: 'Patchable', notes: 'n', outcome: 'o', due_date: '2026-01-01T00:00:00Z' });
      const p1 = await app.http.patch(`/api/activities/${a.id}/edit`).set('Authorization', auth).send({ outcome: 'done' });
      expect(p1.status).toBe(200);
      expect(p1.body.activity).toMatchObject({ subject: 'Patchable', notes: 'n', outcome: 'done', due_date: '2026-01-01T00:00:00+00:00', modifiedBy: adminId });
      expect(p1.body.activity.modifiedAt).toMatch(ISO);
      const other = await newContact('Other activity contact');
      const p2 = await app.http
        .patch(`/api/activities/${a.id}`)
        .set('Authorization', auth)
        .send({ type: 'meeting', notes: null, due_date: null, contact_id: other });
      expect(p2.status).toBe(200);
      expect(p2.body.activity).toMatchObject({ type: 'meeting', notes: null, due_date: null, contact_id: other, outcome: 'done' });
      for (const body of [{ type: null }, { subject: null }, { contact_id: null }, { contact_id: 987654 }, { type: 'fax' }, { subject: ' ' }, { id: 1 }]) {
        expectError(await app.http.patch(`/api/activities/${a.id}`).set('Authorization', auth).send(body), 400, 'validation_failed');
      }
      expectError(await app.http.patch('/api/activities/424242/edit').set('Authorization', auth).send({ subject: 'x' }), 404, 'not_found');
    });

    it('PUT replaces (200, omitted properties reset) or creates with a new id (201)', async () => {
      const a = await newActivity({ subject: 'Replaceable', notes: 'n', outcome: 'o', due_date: '2026-01-01T00:00:00Z' });
      const put = await app.http
        .put(`/api/activities/${a.id}/edit`)
        .set('Authorization', auth)
        .send({ type: 'email', subject: 'Replaced', contact_id: contactId });
      expect(put.status).toBe(200);
      expect(put.body.activity).toMatchObject({ id: a.id, type: 'email', subject: 'Replaced', notes: null, outcome: null, due_date: null });
      const created = await app.http.put('/api/activities/999999').set('Authorization', auth).send({ type: 'call', subject: 'By PUT', contact_id: contactId });
      expect(created.status).toBe(201);
      expect(created.body.activity.id).not.toBe(999999);
      expectError(
        await app.http.put(`/api/activities/${a.id}`).set('Authorization', auth).send({ subject: 'No type', contact_id: contactId }),
        400,
        'validation_failed',
      );
    });

    it('DELETE answers the activity as it was, in both path styles', async () => {
      const a = await newActivity({ subject: 'Deletable A' });
      const b = await newActivity({ subject: 'Deletable B' });
      await expectDeletedInBothStyles(app, auth, '/api/activities', 'activity', a, b);
    });

    it('is deleted with its contact', async () => {
      const doomed = await newContact('Doomed activity contact');
      const a = await newActivity({ contact_id: doomed });
      const kept = await newActivity();
      expect((await app.http.delete(`/api/contacts/${doomed}`).set('Authorization', auth)).status).toBe(200);
      expectError(await app.http.get(`/api/activities/${a.id}`).set('Authorization', auth), 404, 'not_found');
      expect((await app.http.get(`/api/activities/${kept.id}`).set('Authorization', auth)).status).toBe(200);
      expect((await app.http.get('/api/activities').query({ contact_id: doomed }).set('Authorization', auth)).body).toEqual({ total: 0, activities: [] });
    });
  });

  describe('list', () => {
    const tag = `lst${Date.now()}`;
    let listContact: number;
    beforeAll(async () => {
      listContact = await newContact('List contact');
      await newActivity({ type: 'call', subject: `${tag} call one`, contact_id: listContact });
      await newActivity({ type: 'email', subject: `${tag} email`, notes: 'Discussed PRICING tiers' });
      await newActivity({ type: 'meeting', subject: `${tag} meeting`, outcome: 'Signed contract', contact_id: listContact });
      await newActivity({ type: 'call', subject: `${tag} call two` });
    });
    const list = (query: Record<string, string | number>) => app.http.get('/api/activities').query(query).set('Authorization', auth);

    it('answers { total, activities } with search over subject, notes and outcome', async () => {
      const all = await list({ search: tag });
      expect(all.status).toBe(200);
      expect(Object.keys(all.body).sort()).toEqual(['activities', 'total']);
      expect(all.body.total).toBe(4);
      expect((await list({ search: 'pricing' })).body.activities.map((a: { subject: string }) => a.subject)).toEqual([`${tag} email`]);
      expect((await list({ search: 'signed CONTRACT' })).body.activities.map((a: { subject: string }) => a.subject)).toEqual([`${tag} meeting`]);
    });

    it('filters by type and contact_id', async () => {
      const calls = await list({ search: tag, type: 'call', orderBy: 'subject', orderByDir: 'desc' });
      expect(calls.body.activities.map((a: { subject: string }) => a.subject)).toEqual([`${tag} call two`, `${tag} call one`]);
      expect((await list({ search: tag, type: 'meeting' })).body.total).toBe(1);
      expect((await list({ search: tag, type: 'email' })).body.total).toBe(1);
      const byContact = await list({ contact_id: listContact });
      expect(byContact.body.total).toBe(2);
    });

    it('pages with page and limit', async () => {
      const p1 = await list({ search: tag, limit: 3 });
      const p2 = await list({ search: tag, limit: 3, page: 2 });
      expect(p1.body.activities).toHaveLength(3);
      expect(p2.body.activities).toHaveLength(1);
      expect(p2.body.total).toBe(4);
      const ids = [...p1.body.activities, ...p2.body.activities].map((a: { id: number }) => a.id);
      expect([...ids].sort((x, y) => x - y)).toEqual(ids);
    });

    it('refuses bad list parameters with 400', async () => {
      for (const q of <Record<string, string>[]>[
        { type: 'sms' },
        { type: 'Call' },
        { status: 'open' },
        { limit: '0' },
        { limit: 'ten' },
        { page: '0' },
        { orderBy: 'dueDate' },
        { orderByDir: 'random' },
      ]) {
        expectError(await list(q), 400, 'validation_failed');
      }
    });
  });

  describe('permissions and route table', () => {
    it('answers 403 without the activities permission the route needs', async () => {
      const a = await newActivity({ subject: 'Guarded' });
      expectError(await app.http.get('/api/activities').set('Authorization', noActivities), 403, 'forbidden');
      expectError(await app.http.get(`/api/activities/${a.id}`).set('Authorization', noActivities), 403, 'forbidden');
      expect((await app.http.get('/api/activities').set('Authorization', readOnly)).status).toBe(200);
      expectError(
        await app.http.post('/api/activities').set('Authorization', readOnly).send({ type: 'call', subject: 'x', contact_id: contactId }),
        403,
        'forbidden',
      );
      expectError(await app.http.patch(`/api/activities/${a.id}`).set('Authorization', readOnly).send({ subject: 'x' }), 403, 'forbidden');
      expectError(
        await app.http.put(`/api/activities/${a.id}/edit`).set('Authorization', readOnly).send({ type: 'call', subject: 'x', contact_id: contactId }),
        403,
        'forbidden',
      );
      expectError(await app.http.delete(`/api/activities/${a.id}/delete`).set('Authorization', readWrite), 403, 'forbidden');
      expect(
        (await app.http.post('/api/activities/new').set('Authorization', readWrite).send({ type: 'call', subject: 'By writer', contact_id: contactId })).status,
      ).toBe(201);
      expectError(await app.http.get('/api/activities'), 401, 'unauthorized');
    });

    it('GET /api/endpoints lists every activities route with its permission', async () => {
      await expectRoutes(app, auth, '/api/activities', [
        ['GET', '/api/activities', 'activities:read'],
        ['POST', '/api/activities/search', 'activities:read'],
        ['POST', '/api/activities', 'activities:write'],
        ['POST', '/api/activities/new', 'activities:write'],
        ['POST', '/api/activities/batch', 'activities:write'],
        ['GET', '/api/activities/:id', 'activities:read'],
        ['PATCH', '/api/activities/:id', 'activities:write'],
        ['PATCH', '/api/activities/:id/edit', 'activities:write'],
        ['PUT', '/api/activities/:id', 'activities:write'],
        ['PUT', '/api/activities/:id/edit', 'activities:write'],
        ['DELETE', '/api/activities/:id', 'activities:delete'],
        ['DELETE', '/api/activities/:id/delete', 'activities:delete'],
      ]);
    });

    it('documents the activity record and envelopes in the OpenAPI document', async () => {
      const doc = (await app.http.get('/api/docs-json')).body as {
        paths: Record<string, Record<string, { responses: Record<string, unknown>; description?: string; summary?: string }>>;
        components: { schemas: Record<string, { properties: Record<string, unknown> }> };
      };
      expect(JSON.stringify(doc.paths['/api/activities'].get.responses['200'])).toContain('ActivityRecordDto');
      expect(JSON.stringify(doc.paths['/api/activities/{id}/edit'].put.responses['201'])).toContain('ActivityRecordDto');
      expect(Object.keys(doc.components.schemas.ActivityRecordDto.properties)).toEqual(expect.arrayContaining(['contact_id', 'due_date', 'notes', 'outcome']));
      const del = doc.paths['/api/activities/{id}'].delete;
      expect(`${del.summary} ${del.description}`).toMatch(/deleted with their contact/);
    });
  });
});
