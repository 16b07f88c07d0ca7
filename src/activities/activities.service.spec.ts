import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { translateConstraintError } from '../database/constraints.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { ActivitiesService } from './activities.service.js';

describe('ActivitiesService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let activities: ActivitiesService;
  let who: Principal;
  let contactId: number;

  beforeAll(async () => {
    ctx = await startServiceContext();
    activities = ctx.get(ActivitiesService);
    who = await ctx.principal();
    contactId = await contact();
  });
  afterAll(async () => {
    await ctx.close();
  });

  /** The AppError a call fails with: thrown by the service, or translated by the constraint registry as the filter would. */
  async function failure(p: Promise<unknown>): Promise<AppError> {
    try {
      await p;
    } catch (e) {
      if (e instanceof AppError) return e;
      const translated = await translateConstraintError(e, (sql, params) => ctx.query(sql, params));
      if (translated) return translated;
      throw e;
    }
    throw new Error('expected the call to fail');
  }

  let seq = 0;
  async function contact(): Promise<number> {
    const rows = await ctx.query<{ id: number }>(`INSERT INTO contacts (name, email) VALUES ('A', $1) RETURNING id`, [`a${++seq}-${Date.now()}@svc.test`]);
    return rows[0].id;
  }

  it('creates, reads back, and stamps the creator', async () => {
    const a = await activities.create({ type: 'call', subject: ' Intro ', contact_id: contactId, due_date: '2026-05-01T10:00:00+02:00' }, who);
    expect(a).toMatchObject({
      type: 'call',
      subject: 'Intro',
      contact_id: contactId,
      due_date: '2026-05-01T08:00:00+00:00',
      notes: null,
      createdBy: who.userId,
    });
    expect(await activities.get(a.id)).toEqual(a);
    await expect(activities.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('a contact that does not exist is a 400 naming contact_id (by the foreign key), on create, PATCH and PUT', async () => {
    const e = await failure(activities.create({ type: 'email', subject: 'x', contact_id: 987654 }, who));
    expect([e.status, e.details?.[0].field, e.details?.[0].message]).toEqual([400, 'contact_id', 'contact 987654 does not exist']);
    const a = await activities.create({ type: 'email', subject: 'x', contact_id: contactId }, who);
    expect((await failure(activities.patch(a.id, { contact_id: 987654 }, who))).details?.[0].field).toBe('contact_id');
    expect((await failure(activities.put(a.id, { type: 'email', subject: 'x', contact_id: 987654 }, who))).details?.[0].field).toBe('contact_id');
    expect((await activities.get(a.id)).contact_id).toBe(contactId);
  });

  it('PATCH keeps what is not given; nulls for required properties and an empty subject are refused', async () => {
    const other = await contact();
    const a = await activities.create({ type: 'meeting', subject: 'P', contact_id: contactId, notes: 'keep' }, who);
    expect(await activities.patch(a.id, { outcome: 'done', contact_id: other }, who)).toMatchObject({
      notes: 'keep',
      outcome: 'done',
      contact_id: other,
      modifiedBy: who.userId,
    });
    expect((await failure(activities.patch(a.id, { type: null, subject: null } as never, who))).details?.map((d) => d.field)).toEqual(['type', 'subject']);
    expect((await failure(activities.patch(a.id, { subject: '  ' }, who))).details?.[0].field).toBe('subject');
    expect(await activities.patch(a.id, { notes: null, due_date: null }, who)).toMatchObject({ notes: null, due_date: null });
    await expect(activities.patch(987654, { subject: 'x' }, who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (optional properties reset to null) or creates with a new id', async () => {
    const a = await activities.create({ type: 'call', subject: 'R', contact_id: contactId, notes: 'gone', outcome: 'gone' }, who);
    const r = await activities.put(a.id, { type: 'email', subject: 'R2', contact_id: contactId }, who);
    expect(r).toMatchObject({ created: false, activity: { id: a.id, type: 'email', subject: 'R2', notes: null, outcome: null, due_date: null } });
    const n = await activities.put(987654, { type: 'call', subject: 'New', contact_id: contactId }, who);
    expect(n.created).toBe(true);
    expect(n.activity.id).not.toBe(987654);
  });

  it('lists with search and the type and contact filters', async () => {
    const c = await contact();
    await activities.create({ type: 'call', subject: 'alpha', contact_id: c }, who);
    await activities.create({ type: 'email', subject: 'beta', contact_id: c }, who);
    expect((await activities.list({ contact_id: String(c) })).total).toBe(2);
    expect((await activities.list({ contact_id: String(c), type: 'email' })).activities.map((a) => a.subject)).toEqual(['beta']);
    expect((await activities.list({ contact_id: String(c), search: 'alp' })).total).toBe(1);
  });

  it('DELETE answers the activity as it was, exactly once under parallel calls', async () => {
    const a = await activities.create({ type: 'call', subject: 'Doomed', contact_id: contactId }, who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => activities.remove(a.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
  });

  it('parallel PATCHes of different properties all land', async () => {
    const a = await activities.create({ type: 'call', subject: 'Busy', contact_id: contactId }, who);
    await Promise.all([
      activities.patch(a.id, { subject: 'Busy 2' }, who),
      activities.patch(a.id, { notes: 'n' }, who),
      activities.patch(a.id, { outcome: 'o' }, who),
      activities.patch(a.id, { type: 'meeting' }, who),
    ]);
    expect(await activities.get(a.id)).toMatchObject({ subject: 'Busy 2', notes: 'n', outcome: 'o', type: 'meeting' });
  });
});
