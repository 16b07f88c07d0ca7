import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { ActivitiesService } from './activities.service.js';

describe('ActivitiesService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let activities: ActivitiesService;
  let contactId: number;

  beforeAll(async () => {
    activities = spec.ctx.get(ActivitiesService);
    contactId = await contact();
  });

  const contact = () => spec.ctx.contact('A', 'a');

  it('creates, reads back, and stamps the creator', async () => {
    const a = await activities.create({ type: 'call', subject: ' Intro ', contact_id: contactId, due_date: '2026-05-01T10:00:00+02:00' }, spec.who);
    expect(a).toMatchObject({
      type: 'call',
      subject: 'Intro',
      contact_id: contactId,
      due_date: '2026-05-01T08:00:00+00:00',
      notes: null,
      createdBy: spec.who.userId,
    });
    expect(await activities.get(a.id)).toEqual(a);
    await expect(activities.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('a contact that does not exist is a 400 naming contact_id (by the foreign key), on create, PATCH and PUT', async () => {
    const e = await spec.ctx.failure(activities.create({ type: 'email', subject: 'x', contact_id: 987654 }, spec.who));
    expect([e.status, e.details?.[0].field, e.details?.[0].message]).toEqual([400, 'contact_id', 'contact 987654 does not exist']);
    const a = await activities.create({ type: 'email', subject: 'x', contact_id: contactId }, spec.who);
    expect((await spec.ctx.failure(activities.patch(a.id, { contact_id: 987654 }, spec.who))).details?.[0].field).toBe('contact_id');
    expect((await spec.ctx.failure(activities.put(a.id, { type: 'email', subject: 'x', contact_id: 987654 }, spec.who))).details?.[0].field).toBe('contact_id');
    expect((await activities.get(a.id)).contact_id).toBe(contactId);
  });

  it('PATCH keeps what is not given; nulls for required properties and an empty subject are refused', async () => {
    const other = await contact();
    const a = await activities.create({ type: 'meeting', subject: 'P', contact_id: contactId, notes: 'keep' }, spec.who);
    expect(await activities.patch(a.id, { outcome: 'done', contact_id: other }, spec.who)).toMatchObject({
      notes: 'keep',
      outcome: 'done',
      contact_id: other,
      modifiedBy: spec.who.userId,
    });
    expect((await spec.ctx.failure(activities.patch(a.id, { type: null, subject: null } as never, spec.who))).details?.map((d) => d.field)).toEqual([
      'type',
      'subject',
    ]);
    expect((await spec.ctx.failure(activities.patch(a.id, { subject: '  ' }, spec.who))).details?.[0].field).toBe('subject');
    expect(await activities.patch(a.id, { notes: null, due_date: null }, spec.who)).toMatchObject({ notes: null, due_date: null });
    await expect(activities.patch(987654, { subject: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (optional properties reset to null) or creates with a new id', async () => {
    const a = await activities.create({ type: 'call', subject: 'R', contact_id: contactId, notes: 'gone', outcome: 'gone' }, spec.who);
    const r = await activities.put(a.id, { type: 'email', subject: 'R2', contact_id: contactId }, spec.who);
    expect(r).toMatchObject({ created: false, activity: { id: a.id, type: 'email', subject: 'R2', notes: null, outcome: null, due_date: null } });
    const n = await activities.put(987654, { type: 'call', subject: 'New', contact_id: contactId }, spec.who);
    expect(n.created).toBe(true);
    expect(n.activity.id).not.toBe(987654);
  });

  it('lists with search and the type and contact filters', async () => {
    const c = await contact();
    await activities.create({ type: 'call', subject: 'alpha', contact_id: c }, spec.who);
    await activities.create({ type: 'email', subject: 'beta', contact_id: c }, spec.who);
    expect((await activities.list({ contact_id: String(c) })).total).toBe(2);
    expect((await activities.list({ contact_id: String(c), type: 'email' })).activities.map((a) => a.subject)).toEqual(['beta']);
    expect((await activities.list({ contact_id: String(c), search: 'alp' })).total).toBe(1);
  });

  it('DELETE answers the activity as it was, exactly once under parallel calls', async () => {
    const a = await activities.create({ type: 'call', subject: 'Doomed', contact_id: contactId }, spec.who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => activities.remove(a.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
  });

  it('parallel PATCHes of different properties all land', async () => {
    const a = await activities.create({ type: 'call', subject: 'Busy', contact_id: contactId }, spec.who);
    await Promise.all([
      activities.patch(a.id, { subject: 'Busy 2' }, spec.who),
      activities.patch(a.id, { notes: 'n' }, spec.who),
      activities.patch(a.id, { outcome: 'o' }, spec.who),
      activities.patch(a.id, { type: 'meeting' }, spec.who),
    ]);
    expect(await activities.get(a.id)).toMatchObject({ subject: 'Busy 2', notes: 'n', outcome: 'o', type: 'meeting' });
  });
});
