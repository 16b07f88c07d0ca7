import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor, ISO } from './support/fixtures.js';

/**
 * Notifications are created by the service itself. The suite makes them through the real path
 * (assigning a contact's owner leaves a lead_assigned notification for that owner) and, for other
 * types, inserts rows directly.
 */
describe('notifications', () => {
  let app: TestApp;
  let admin: string;
  let userA: string;
  let userB: string;
  let readOnlyA: string;
  let idA: number;
  let idB: number;

  const assign = async (name: string, ownerId: number) => {
    const res = await app.http
      .post('/api/contacts/new')
      .set('Authorization', admin)
      .send({ name, email: `${name.replace(/\W/g, '').toLowerCase()}@n.test`, ownerId });
    expect(res.status).toBe(201);
    return res.body.contact.id as number;
  };
  const userId = async (email: string) => (await app.sql<{ id: number }>(`SELECT id FROM users WHERE email = $1`, [email]))[0].id;

  beforeAll(async () => {
    app = await startApp();
    admin = await adminToken(app);
    userA = await tokenFor(app, '*', { user: 'a@example.com', plan: 'enterprise' });
    userB = await tokenFor(app, '*', { user: 'b@example.com', plan: 'enterprise' });
    readOnlyA = await tokenFor(app, 'notifications:read', { user: 'a@example.com', plan: 'enterprise' });
    idA = await userId('a@example.com');
    idB = await userId('b@example.com');
    await assign('Lead One', idA);
    await assign('Lead Two', idA);
    await assign('Lead Three', idB);
    await app.sql(
      `INSERT INTO notifications (user_id, type, message, details) VALUES ($1, 'report_ready', 'Report Weekly sales is ready', '{"reportId": 7}')`,
      [idA],
    );
  });
  afterAll(async () => app?.stop());

  const list = (token: string, query: object = {}) => app.http.get('/api/notifications').query(query).set('Authorization', token);

  it("lists only the caller's notifications with the full record", async () => {
    const res = await list(userA);
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(3);
    const first = res.body.notifications[0];
    expect(first).toEqual({
      id: expect.any(Number),
      message: expect.stringContaining('Lead One'),
      type: 'lead_assigned',
      isRead: false,
      createdAt: expect.stringMatching(ISO),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      userId: idA,
      userName: expect.any(String),
      details: { leadId: expect.any(Number), leadName: 'Lead One' },
    });
    expect(res.body.notifications.every((n: { userId: number }) => n.userId === idA)).toBe(true);
    const resB = await list(userB);
    expect(resB.body.total).toBe(1);
    expect(resB.body.notifications[0].details.leadName).toBe('Lead Three');
  });

  it('filters by type and isRead, searches the message, pages and orders', async () => {
    const byType = await list(userA, { type: 'report_ready' });
    expect(byType.body.total).toBe(1);
    expect(byType.body.notifications[0].details).toEqual({ reportId: 7 });
    const search = await list(userA, { search: 'LEAD TWO' });
    expect(search.body.notifications.map((n: { details: { leadName: string } }) => n.details.leadName)).toEqual(['Lead Two']);
    const noLeak = await list(userA, { search: 'Lead Three' });
    expect(noLeak.body.total).toBe(0);
    const page = await list(userA, { limit: 1, page: 2, orderBy: 'id', orderByDir: 'desc' });
    expect(page.body.total).toBe(3);
    expect(page.body.notifications[0].details.leadName).toBe('Lead Two');
    expect((await list(userA, { isRead: 'false' })).body.total).toBe(3);
    expect((await list(userA, { isRead: '1' })).body.total).toBe(0);
    for (const q of [{ isRead: 'maybe' }, { type: 'nonsense' }, { orderBy: 'message' }, { userId: String(idB) }]) {
      expectError(await list(userA, q), 400, 'validation_failed');
    }
  });

  it("gets one; another user's notification is a 404 for get, read and delete", async () => {
    const mine = (await list(userA)).body.notifications[0];
    const theirs = (await list(userB)).body.notifications[0];
    const got = await app.http.get(`/api/notifications/${mine.id}`).set('Authorization', userA);
    expect(got.status).toBe(200);
    expect(got.body.notification).toEqual(mine);
    expectError(await app.http.get(`/api/notifications/${theirs.id}`).set('Authorization', userA), 404, 'not_found');
    expectError(await app.http.post(`/api/notifications/${theirs.id}/read`).set('Authorization', userA), 404, 'not_found');
    expectError(await app.http.delete(`/api/notifications/${theirs.id}/delete`).set('Authorization', userA), 404, 'not_found');
    expectError(await app.http.delete(`/api/notifications/${theirs.id}`).set('Authorization', userA), 404, 'not_found');
    expectError(await app.http.get(`/api/notifications/${theirs.id}`).set('Authorization', admin), 404, 'not_found');
    const still = await app.sql<{ is_read: boolean }>(`SELECT is_read FROM notifications WHERE id = $1`, [theirs.id]);
    expect(still).toEqual([{ is_read: false }]);
    expectError(await app.http.get('/api/notifications/999999').set('Authorization', userA), 404, 'not_found');
    expectError(await app.http.get('/api/notifications/abc').set('Authorization', userA), 404, 'not_found');
  });

  it('marks one read (idempotent), then read-all marks only the caller’s', async () => {
    const mine = (await list(userA, { orderBy: 'id' })).body.notifications;
    const read = await app.http.post(`/api/notifications/${mine[0].id}/read`).set('Authorization', userA);
    expect(read.status).toBe(200);
    expect(read.body.notification).toMatchObject({ id: mine[0].id, isRead: true });
    expect(read.body.notification.modifiedAt).toMatch(ISO);
    const again = await app.http.post(`/api/notifications/${mine[0].id}/read`).set('Authorization', userA);
    expect(again.status).toBe(200);
    expect(again.body.notification.modifiedAt).toBe(read.body.notification.modifiedAt);
    expect((await list(userA, { isRead: 'true' })).body.total).toBe(1);

    const all = await app.http.post('/api/notifications/read-all').set('Authorization', userA);
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ success: true, updated: 2 });
    expect((await list(userA, { isRead: 'false' })).body.total).toBe(0);
    expect((await list(userB, { isRead: 'false' })).body.total).toBe(1);
    const none = await app.http.post('/api/notifications/read-all').set('Authorization', userA);
    expect(none.body).toEqual({ success: true, updated: 0 });
  });

  it('deletes one of the caller’s notifications in both path styles, answering it as it was', async () => {
    const mine = (await list(userA, { orderBy: 'id' })).body.notifications;
    const del = await app.http.delete(`/api/notifications/${mine[0].id}/delete`).set('Authorization', userA);
    expect(del.status).toBe(200);
    expect(del.body.notification).toEqual(mine[0]);
    expectError(await app.http.get(`/api/notifications/${mine[0].id}`).set('Authorization', userA), 404, 'not_found');
    const del2 = await app.http.delete(`/api/notifications/${mine[1].id}`).set('Authorization', userA);
    expect(del2.status).toBe(200);
    expect((await list(userA)).body.total).toBe(1);
    expect((await list(userB)).body.total).toBe(1);
  });

  it('has no create endpoint and checks permissions', async () => {
    const post = await app.http.post('/api/notifications').set('Authorization', admin).send({ message: 'x', type: 'lead_assigned' });
    expect([404, 405]).toContain(post.status);
    expect((await list(readOnlyA)).status).toBe(200);
    expectError(await app.http.post('/api/notifications/read-all').set('Authorization', readOnlyA), 403, 'forbidden');
    expectError(await app.http.post('/api/notifications/1/read').set('Authorization', readOnlyA), 403, 'forbidden');
    expectError(await app.http.delete('/api/notifications/1/delete').set('Authorization', readOnlyA), 403, 'forbidden');
    const other = await tokenFor(app, 'contacts:read', { user: 'a@example.com', plan: 'enterprise' });
    expectError(await list(other), 403, 'forbidden');
    expectError(await app.http.get('/api/notifications'), 401, 'unauthorized');
  });

  it('GET /api/endpoints lists the notification routes', async () => {
    const endpoints = (await app.http.get('/api/endpoints').set('Authorization', admin)).body.endpoints as object[];
    for (const e of [
      { method: 'GET', path: '/api/notifications', permission: 'notifications:read' },
      { method: 'GET', path: '/api/notifications/:id', permission: 'notifications:read' },
      { method: 'POST', path: '/api/notifications/:id/read', permission: 'notifications:write' },
      { method: 'POST', path: '/api/notifications/read-all', permission: 'notifications:write' },
      { method: 'DELETE', path: '/api/notifications/:id/delete', permission: 'notifications:delete' },
      { method: 'DELETE', path: '/api/notifications/:id', permission: 'notifications:delete' },
    ]) {
      expect(endpoints).toContainEqual(e);
    }
  });
});
