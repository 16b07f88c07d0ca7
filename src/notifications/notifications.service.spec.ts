import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { translateConstraintError } from '../database/constraints.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions } from '../database/transactions.js';
import { NotificationsService } from './notifications.service.js';

describe('NotificationsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let notifications: NotificationsService;
  let alice: Principal;
  let bob: Principal;

  const rejection = async (work: Promise<unknown>) => {
    const e = await work.then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).not.toBeNull();
    return e;
  };

  beforeAll(async () => {
    ctx = await startServiceContext();
    notifications = ctx.get(NotificationsService);
    alice = await ctx.principal({ userName: 'Alice' });
    bob = await ctx.principal({ userName: 'Bob' });
    await notifications.notify(alice.userId, 'lead_assigned', 'Lead One assigned', { leadId: 1, leadName: 'Lead One' });
    await notifications.notify(alice.userId, 'report_ready', 'Weekly report is ready', { reportId: 7 });
    await notifications.notify(alice.userId, 'sms_failed', 'A text message failed', { textMessageId: 3 });
    await notifications.notify(bob.userId, 'lead_assigned', 'Lead Two assigned', { leadId: 2, leadName: 'Lead Two' });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it("lists only the caller's notifications, as records named after the caller", async () => {
    const list = await notifications.list({ orderBy: 'id', orderByDir: 'asc' }, alice);
    expect(list.total).toBe(3);
    expect(list.notifications[0]).toEqual({
      id: expect.any(Number),
      message: 'Lead One assigned',
      type: 'lead_assigned',
      isRead: false,
      createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/),
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
      userId: alice.userId,
      userName: 'Alice',
      details: { leadId: 1, leadName: 'Lead One' },
    });
    expect((await notifications.list({}, bob)).total).toBe(1);
  });

  it('filters by type and isRead and searches the message', async () => {
    expect((await notifications.list({ type: 'report_ready' }, alice)).notifications.map((n) => n.message)).toEqual(['Weekly report is ready']);
    expect((await notifications.list({ search: 'TEXT MESSAGE' }, alice)).total).toBe(1);
    expect((await notifications.list({ isRead: 'true' }, alice)).total).toBe(0);
    const bad = await rejection(notifications.list({ type: 'nonsense' }, alice));
    expect(bad).toBeInstanceOf(AppError);
  });

  it("another user's notification is a 404 for get, mark-read and delete", async () => {
    const bobs = (await notifications.list({}, bob)).notifications[0];
    for (const work of [notifications.get(bobs.id, alice), notifications.markRead(bobs.id, alice), notifications.remove(bobs.id, alice)]) {
      expect(await rejection(work)).toMatchObject({ status: 404, code: 'not_found' });
    }
    expect(await notifications.get(bobs.id, bob)).toMatchObject({ id: bobs.id, isRead: false });
  });

  it('marks one read once: modifiedAt set by the change, kept when marked again, also concurrently', async () => {
    const n = await notifications.notify(alice.userId, 'report_ready', 'Marked', {});
    const results = await Promise.all(Array.from({ length: 6 }, () => notifications.markRead(n.id, alice)));
    for (const r of results) expect(r).toMatchObject({ id: n.id, isRead: true });
    const [{ modified_at }] = await ctx.query<{ modified_at: Date }>(`SELECT modified_at FROM notifications WHERE id = $1`, [n.id]);
    expect(modified_at).toBeInstanceOf(Date);
    await new Promise((r) => setTimeout(r, 20));
    await notifications.markRead(n.id, alice);
    const [again] = await ctx.query<{ modified_at: Date }>(`SELECT modified_at FROM notifications WHERE id = $1`, [n.id]);
    expect(again.modified_at.getTime()).toBe(modified_at.getTime());
    expect(await rejection(notifications.markRead(987654, alice))).toMatchObject({ status: 404 });
  });

  it("marks all of the caller's unread notifications read and counts them", async () => {
    const unread = (await notifications.list({ isRead: 'false' }, alice)).total;
    expect(unread).toBeGreaterThan(0);
    expect(await notifications.markAllRead(alice)).toEqual({ success: true, updated: unread });
    expect(await notifications.markAllRead(alice)).toEqual({ success: true, updated: 0 });
    expect((await notifications.list({ isRead: 'false' }, bob)).total).toBe(1);
  });

  it('deletes once: one caller gets the notification as it was, the others 404', async () => {
    const n = await notifications.notify(alice.userId, 'sms_failed', 'Delete me', { textMessageId: 9 });
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => notifications.remove(n.id, alice)));
    const done = results.filter((r) => r.status === 'fulfilled');
    expect(done).toHaveLength(1);
    expect((done[0] as PromiseFulfilledResult<unknown>).value).toMatchObject({ id: n.id, message: 'Delete me', details: { textMessageId: 9 } });
    for (const r of results.filter((r) => r.status === 'rejected')) expect(r.reason).toMatchObject({ status: 404 });
    expect(await rejection(notifications.get(n.id, alice))).toMatchObject({ status: 404 });
  });

  it("notify joins the caller's transaction: rolled back with it", async () => {
    const tx = ctx.get(Transactions);
    await rejection(
      tx.run(async (t) => {
        await notifications.notify(bob.userId, 'report_ready', 'Never seen', {}, t);
        throw new Error('the change failed');
      }),
    );
    expect(await ctx.query(`SELECT 1 FROM notifications WHERE message = 'Never seen'`)).toHaveLength(0);
  });

  it('a notification for a user that does not exist is the registered foreign-key violation (400 on userId)', async () => {
    const e = await rejection(notifications.notify(987654, 'report_ready', 'Nobody', {}));
    expect(await translateConstraintError(e, (sql, p) => ctx.query(sql, p))).toMatchObject({ status: 400, details: [{ field: 'userId' }] });
  });
});
