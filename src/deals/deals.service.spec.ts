import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { DealsService } from './deals.service.js';

describe('DealsService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let deals: DealsService;
  let contactId: number;

  beforeAll(async () => {
    deals = spec.ctx.get(DealsService);
    contactId = await contact();
  });

  const contact = () => spec.ctx.contact('D', 'd');
  const base = () => ({ title: 'Deal', value: 100.5, contact_id: contactId });

  it('creates with defaults (open, quantity 1, owner the caller) and reads it back', async () => {
    const d = await deals.create({ ...base(), title: ' Big ' }, spec.who);
    expect(d).toMatchObject({
      title: 'Big',
      value: 100.5,
      status: 'open',
      quantity: 1,
      owner_id: spec.who.userId,
      closed_at: null,
      // The default pipeline's first stage, and its probability (the deal has none of its own).
      stage: 'New',
      probability: 10,
      createdBy: spec.who.userId,
    });
    expect(await deals.get(d.id)).toEqual(d);
    await expect(deals.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('a contact or owner that does not exist is a 400 naming the field (by the foreign keys)', async () => {
    const c = await spec.ctx.failure(deals.create({ ...base(), contact_id: 987654 }, spec.who));
    expect([c.status, c.details?.[0].field, c.details?.[0].message]).toEqual([400, 'contact_id', 'contact 987654 does not exist']);
    const o = await spec.ctx.failure(deals.create({ ...base(), owner_id: 987654 }, spec.who));
    expect([o.status, o.details?.[0].field, o.details?.[0].message]).toEqual([400, 'owner_id', 'user 987654 does not exist']);
    const d = await deals.create(base(), spec.who);
    expect((await spec.ctx.failure(deals.patch(d.id, { owner_id: 987654 }, spec.who))).details?.[0].field).toBe('owner_id');
    expect((await spec.ctx.failure(deals.put(d.id, { ...base(), contact_id: 987654 }, spec.who))).details?.[0].field).toBe('contact_id');
    expect(await deals.get(d.id)).toMatchObject({ contact_id: contactId, owner_id: spec.who.userId });
    expect((await deals.create({ ...base(), owner_id: null }, spec.who)).owner_id).toBeNull();
  });

  it('closed_at: stamped when closed, kept from won to lost, cleared when reopened, refused on an open deal', async () => {
    const d = await deals.create(base(), spec.who);
    const won = await deals.patch(d.id, { status: 'won' }, spec.who);
    expect(won.closed_at).toEqual(expect.stringMatching(/^\d{4}-/));
    expect((await deals.patch(d.id, { status: 'lost' }, spec.who)).closed_at).toBe(won.closed_at);
    expect((await deals.patch(d.id, { status: 'open' }, spec.who)).closed_at).toBeNull();
    expect((await spec.ctx.failure(deals.patch(d.id, { closed_at: '2026-01-01T00:00:00Z' }, spec.who))).details?.[0].field).toBe('closed_at');
    const given = await deals.create({ ...base(), status: 'won', closed_at: '2026-01-02T03:04:05+01:00' }, spec.who);
    expect(given.closed_at).toBe('2026-01-02T02:04:05+00:00');
  });

  it('PATCH keeps what is not given and refuses nulls for title, value and contact_id', async () => {
    const other = await contact();
    const d = await deals.create({ ...base(), stage: 'keep', product: 'p', quantity: 3 }, spec.who);
    expect(await deals.patch(d.id, { value: 7, contact_id: other }, spec.who)).toMatchObject({
      value: 7,
      contact_id: other,
      stage: 'keep',
      product: 'p',
      quantity: 3,
    });
    expect((await spec.ctx.failure(deals.patch(d.id, { title: null, value: null } as never, spec.who))).details?.map((x) => x.field)).toEqual([
      'title',
      'value',
    ]);
    expect((await spec.ctx.failure(deals.patch(d.id, { title: ' ' }, spec.who))).details?.[0].field).toBe('title');
    expect(await deals.patch(d.id, { quantity: null, stage: null }, spec.who)).toMatchObject({ quantity: 1, stage: 'New' });
    await expect(deals.patch(987654, { title: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (defaults restored, owner the caller) or creates with a new id', async () => {
    const otherOwner = await spec.ctx.principal();
    const d = await deals.create({ ...base(), stage: 'gone', quantity: 9, owner_id: otherOwner.userId, probability: 50 }, spec.who);
    const r = await deals.put(d.id, { title: 'R', value: 1, contact_id: contactId }, spec.who);
    expect(r).toMatchObject({
      created: false,
      deal: { id: d.id, title: 'R', stage: 'New', quantity: 1, owner_id: spec.who.userId, probability: 10, status: 'open' },
    });
    const n = await deals.put(987654, base(), spec.who);
    expect(n.created).toBe(true);
    expect(n.deal.id).not.toBe(987654);
  });

  it('lists with search, filters and ordering by value', async () => {
    const c = await contact();
    await deals.create({ title: 'l1', value: 3, contact_id: c, status: 'won' }, spec.who);
    await deals.create({ title: 'l2', value: 1, contact_id: c }, spec.who);
    await deals.create({ title: 'l3', value: 2, contact_id: c, status: 'won' }, spec.who);
    const won = await deals.list({ contact_id: String(c), status: 'won', orderBy: 'value' });
    expect(won.deals.map((d) => d.value)).toEqual([2, 3]);
    expect((await deals.list({ contact_id: String(c), owner_id: String(spec.who.userId) })).total).toBe(3);
    await expect(deals.list({ orderBy: 'nope' })).rejects.toMatchObject({ status: 400 });
  });

  it('DELETE answers the deal as it was, exactly once under parallel calls', async () => {
    const d = await deals.create(base(), spec.who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => deals.remove(d.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
  });

  it('parallel PATCHes of different properties all land', async () => {
    const d = await deals.create(base(), spec.who);
    await Promise.all([
      deals.patch(d.id, { title: 'Busy' }, spec.who),
      deals.patch(d.id, { value: 42.42 }, spec.who),
      deals.patch(d.id, { stage: 's' }, spec.who),
      deals.patch(d.id, { probability: 70 }, spec.who),
      deals.patch(d.id, { product: 'p' }, spec.who),
      deals.patch(d.id, { quantity: 4 }, spec.who),
    ]);
    expect(await deals.get(d.id)).toMatchObject({ title: 'Busy', value: 42.42, stage: 's', probability: 70, product: 'p', quantity: 4 });
  });
});
