import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { CampaignsRepository } from './campaigns.repository.js';
import { CampaignsService } from './campaigns.service.js';

describe('CampaignsService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let campaigns: CampaignsService;

  beforeAll(async () => {
    campaigns = spec.ctx.get(CampaignsService);
  });

  const contact = () => spec.ctx.contact('Member', 'm');

  it('creates with defaults, stamps the creator, and reads it back', async () => {
    const c = await campaigns.create({ name: '  Spring  ' }, spec.who);
    expect(c).toMatchObject({ name: 'Spring', status: 'active', description: null, type: null, startDate: null, endDate: null, createdBy: spec.who.userId });
    expect(await campaigns.get(c.id)).toEqual(c);
    await expect(campaigns.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses completed on create, an end before the start, and an empty name', async () => {
    expect((await spec.ctx.failure(campaigns.create({ name: 'x', status: 'completed' }, spec.who))).details?.[0].field).toBe('status');
    const e = await spec.ctx.failure(campaigns.create({ name: 'x', startDate: '2026-02-01T00:00:00Z', endDate: '2026-01-01T00:00:00Z' }, spec.who));
    expect(e.details?.[0].field).toBe('endDate');
    expect((await spec.ctx.failure(campaigns.create({ name: '   ' }, spec.who))).details?.[0].field).toBe('name');
  });

  it('PATCH changes only the given properties and checks one date against the stored other', async () => {
    const c = await campaigns.create({ name: 'P', description: 'keep', startDate: '2026-03-01T00:00:00+02:00' }, spec.who);
    const p = await campaigns.patch(c.id, { type: 'email' }, spec.who);
    expect(p).toMatchObject({ name: 'P', description: 'keep', type: 'email', startDate: '2026-02-28T22:00:00+00:00', modifiedBy: spec.who.userId });
    expect((await spec.ctx.failure(campaigns.patch(c.id, { endDate: '2026-02-01T00:00:00Z' }, spec.who))).details?.[0].field).toBe('endDate');
    expect((await spec.ctx.failure(campaigns.patch(c.id, { name: null } as never, spec.who))).details?.[0].field).toBe('name');
    expect((await campaigns.patch(c.id, { status: 'completed' }, spec.who)).status).toBe('completed');
    await expect(campaigns.patch(987654, { name: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('PUT replaces (optional properties reset) or creates with a new id, refusing completed on create', async () => {
    const c = await campaigns.create({ name: 'R', description: 'gone', type: 'sms', status: 'inactive' }, spec.who);
    const replaced = await campaigns.put(c.id, { name: 'R2' }, spec.who);
    expect(replaced).toMatchObject({ created: false, campaign: { id: c.id, name: 'R2', description: null, type: null, status: 'active' } });
    expect((await campaigns.put(c.id, { name: 'R3', status: 'completed' }, spec.who)).campaign.status).toBe('completed');
    const created = await campaigns.put(987654, { name: 'New' }, spec.who);
    expect(created.created).toBe(true);
    expect(created.campaign.id).not.toBe(987654);
    expect((await spec.ctx.failure(campaigns.put(987655, { name: 'New', status: 'completed' }, spec.who))).details?.[0].field).toBe('status');
  });

  it('memberships: add is idempotent, missing campaign or contact is a 404, remove says why it removed nothing', async () => {
    const c = await campaigns.create({ name: 'Members' }, spec.who);
    const [a, b] = [await contact(), await contact()];
    expect(await campaigns.addContact(c.id, a)).toEqual({ success: true });
    expect(await campaigns.addContact(c.id, a)).toEqual({ success: true });
    await campaigns.addContact(c.id, b);
    expect((await campaigns.listContacts(c.id, {})).total).toBe(2);
    expect((await campaigns.listContacts(c.id, { limit: '1' })).contacts).toHaveLength(1);

    const noCampaign = await spec.ctx.failure(campaigns.addContact(987654, a));
    expect([noCampaign.status, noCampaign.message]).toEqual([404, 'Campaign 987654 not found']);
    const noContact = await spec.ctx.failure(campaigns.addContact(c.id, 987654));
    expect([noContact.status, noContact.message]).toEqual([404, 'Contact 987654 not found']);

    expect(await campaigns.removeContact(c.id, a)).toEqual({ success: true });
    expect((await spec.ctx.failure(campaigns.removeContact(c.id, a))).message).toBe(`Contact ${a} is not a member of campaign ${c.id}`);
    expect((await spec.ctx.failure(campaigns.removeContact(987654, b))).message).toBe('Campaign 987654 not found');
    expect((await spec.ctx.failure(campaigns.removeContact(c.id, 987654))).message).toBe('Contact 987654 not found');
    await expect(campaigns.listContacts(987654, {})).rejects.toMatchObject({ status: 404 });
    expect((await campaigns.listContacts(c.id, {})).total).toBe(1);
  });

  it('lists with search, filter and paging', async () => {
    const tag = `lst${Date.now()}`;
    for (const [name, status] of [
      [`${tag} a`, 'active'],
      [`${tag} b`, 'inactive'],
      [`${tag} c`, 'inactive'],
    ] as const) {
      await campaigns.create({ name, status }, spec.who);
    }
    expect((await campaigns.list({ search: tag })).total).toBe(3);
    const inactive = await campaigns.list({ search: tag, status: 'inactive', orderBy: 'name', orderByDir: 'desc' });
    expect(inactive.campaigns.map((c) => c.name)).toEqual([`${tag} c`, `${tag} b`]);
    await expect(campaigns.list({ status: 'done' })).rejects.toMatchObject({ status: 400 });
  });

  it('DELETE answers the campaign as it was, drops its memberships (not the contacts), and only once under parallel calls', async () => {
    const c = await campaigns.create({ name: 'Doomed' }, spec.who);
    const member = await contact();
    await campaigns.addContact(c.id, member);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => campaigns.remove(c.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
    expect((results.find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<{ name: string }>).value.name).toBe('Doomed');
    expect(await spec.ctx.query(`SELECT 1 FROM campaign_members WHERE campaign_id = $1`, [c.id])).toHaveLength(0);
    expect(await spec.ctx.query(`SELECT 1 FROM contacts WHERE id = $1`, [member])).toHaveLength(1);
  });

  it('parallel PATCHes of different properties all land', async () => {
    const c = await campaigns.create({ name: 'Busy' }, spec.who);
    await Promise.all([
      campaigns.patch(c.id, { name: 'Busy 2' }, spec.who),
      campaigns.patch(c.id, { description: 'd' }, spec.who),
      campaigns.patch(c.id, { type: 't' }, spec.who),
      campaigns.patch(c.id, { status: 'inactive' }, spec.who),
    ]);
    expect(await campaigns.get(c.id)).toMatchObject({ name: 'Busy 2', description: 'd', type: 't', status: 'inactive' });
  });

  it('the completion job completes only campaigns whose end has passed, once, as the system', async () => {
    const past = await campaigns.create({ name: 'Past', startDate: '2020-01-01T00:00:00Z', endDate: '2020-02-01T00:00:00Z' }, spec.who);
    const future = await campaigns.create({ name: 'Future', endDate: '2999-01-01T00:00:00Z' }, spec.who);
    const open = await campaigns.create({ name: 'Open' }, spec.who);
    expect(await campaigns.completeExpired()).toBeGreaterThanOrEqual(1);
    expect(await campaigns.get(past.id)).toMatchObject({ status: 'completed', modifiedBy: null, modifiedByUser: 'system' });
    expect((await campaigns.get(future.id)).status).toBe('active');
    expect((await campaigns.get(open.id)).status).toBe('active');
    expect(await campaigns.completeExpired()).toBe(0);
  });

  it('the repository names campaigns by id for other features (unknown ids left out)', async () => {
    const a = await campaigns.create({ name: 'Named A' }, spec.who);
    const b = await campaigns.create({ name: 'Named B' }, spec.who);
    const names = await spec.ctx.get(CampaignsRepository).namesByIds([a.id, b.id, a.id, 987654]);
    expect([...names.entries()].sort((x, y) => x[0] - y[0])).toEqual([
      [a.id, 'Named A'],
      [b.id, 'Named B'],
    ]);
    expect((await spec.ctx.get(CampaignsRepository).namesByIds([])).size).toBe(0);
  });
});
