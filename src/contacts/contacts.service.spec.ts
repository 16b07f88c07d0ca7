import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { appError, startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { FieldsService } from '../fields/fields.service.js';
import { ContactsService } from './contacts.service.js';

describe('ContactsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let contacts: ContactsService;
  let who: Principal;
  let owner: Principal;
  let seq = 0;
  const email = () => `c${++seq}@svc.test`;

  beforeAll(async () => {
    ctx = await startServiceContext();
    contacts = ctx.get(ContactsService);
    who = await ctx.principal();
    owner = await ctx.principal({ userName: 'Owner' });
    const fields = ctx.get(FieldsService);
    await fields.create({ label: 'City', alias: 'city', type: 'text' }, who, 'contact');
    await fields.create({ label: 'Badge', alias: 'badge', type: 'text', isUniqueIdentifier: true }, who, 'contact');
    await fields.create({ label: 'Source', alias: 'source', type: 'text', defaultValue: 'api' }, who, 'contact');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('creates a contact: trimmed name, E.164 phone, audit columns, field defaults', async () => {
    const c = await contacts.create({ name: '  Ada  ', email: email(), phone: '(415) 555-0100', company: 'Engines' }, who);
    expect(c).toMatchObject({
      name: 'Ada',
      phone: '+14155550100',
      company: 'Engines',
      title: null,
      ownerId: null,
      owner: null,
      fields: { source: 'api' },
      createdBy: who.userId,
      createdByUser: who.userName,
      modifiedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
    });
    expect(c.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    expect(await contacts.get(c.id)).toEqual(c);
    expect(await contacts.exists(c.id)).toBe(true);
    expect(await contacts.exists(c.id + 10_000)).toBe(false);
  });

  it('keeps a phone that does not parse as it was sent (trimmed)', async () => {
    expect((await contacts.create({ name: 'P', email: email(), phone: ' 12 ' }, who)).phone).toBe('12');
  });

  it('refuses empty or null names and a null email', async () => {
    expect((await appError(contacts.create({ name: '   ', email: email() }, who))).details).toEqual([{ field: 'name', message: 'must not be empty' }]);
    const id = (await contacts.create({ name: 'N', email: email() }, who)).id;
    expect((await appError(contacts.patch(id, { name: null as unknown as string }, who))).status).toBe(400);
    expect((await appError(contacts.patch(id, { email: null as unknown as string }, who))).details?.[0].field).toBe('email');
  });

  it('a duplicate email (any case) is the registered unique violation: 409 with the existing id', async () => {
    const first = await contacts.create({ name: 'Dup', email: 'Dup@Svc.test' }, who);
    const err = await ctx.failure(contacts.create({ name: 'Dup 2', email: 'dup@SVC.test' }, who));
    expect(err).toMatchObject({ status: 409, code: 'conflict', details: [{ field: 'email', existingId: first.id }] });
    const other = await contacts.create({ name: 'Other', email: email() }, who);
    expect(await ctx.failure(contacts.patch(other.id, { email: 'DUP@svc.test' }, who))).toMatchObject({ status: 409, details: [{ existingId: first.id }] });
  });

  it('assigning an owner notifies them in the same transaction; a missing owner is a 400 on ownerId and leaves nothing behind', async () => {
    const c = await contacts.create({ name: 'Owned', email: email(), ownerId: owner.userId }, who);
    expect(c.owner).toEqual({ id: owner.userId, name: 'Service Spec' });
    const notes = await ctx.query<{ type: string; details: unknown }>(`SELECT type, details FROM notifications WHERE user_id = $1`, [owner.userId]);
    expect(notes).toEqual([{ type: 'lead_assigned', details: { leadId: c.id, leadName: 'Owned' } }]);

    // Re-saving with the same owner does not notify again; a new owner is notified.
    await contacts.patch(c.id, { title: 'Lead', ownerId: owner.userId }, who);
    expect(await ctx.query(`SELECT 1 FROM notifications WHERE user_id = $1`, [owner.userId])).toHaveLength(1);
    await contacts.patch(c.id, { ownerId: who.userId }, who);
    expect(await ctx.query(`SELECT 1 FROM notifications WHERE user_id = $1 AND type = 'lead_assigned'`, [who.userId])).toHaveLength(1);

    const ghostEmail = email();
    const err = await ctx.failure(contacts.create({ name: 'Ghost', email: ghostEmail, ownerId: 987654 }, who));
    expect(err).toMatchObject({ status: 400, details: [{ field: 'ownerId', message: 'user 987654 does not exist' }] });
    expect(await ctx.query(`SELECT 1 FROM contacts WHERE email = $1`, [ghostEmail])).toHaveLength(0);
    expect(await ctx.failure(contacts.patch(c.id, { ownerId: 987654 }, who))).toMatchObject({ status: 400, details: [{ field: 'ownerId' }] });
  });

  it('PATCH changes only the supplied properties, merges custom values and removes one given null', async () => {
    const c = await contacts.create({ name: 'Grace', email: email(), company: 'Navy', fields: { city: 'Arlington' } }, who);
    const p = await contacts.patch(c.id, { title: 'Admiral', fields: { source: null } }, who);
    expect(p).toMatchObject({ name: 'Grace', company: 'Navy', title: 'Admiral', fields: { city: 'Arlington' }, modifiedBy: who.userId });
    expect(p.modifiedAt).not.toBeNull();
    expect((await contacts.patch(c.id, { company: null }, who)).company).toBeNull();
    expect((await contacts.patch(c.id, {}, who)).fields).toEqual({ city: 'Arlington' });
    expect((await appError(contacts.patch(c.id, { fields: { nope: 1 } }, who))).details).toEqual([
      { field: 'fields.nope', message: 'is not a published contact field' },
    ]);
    expect((await appError(contacts.patch(424242, { title: 'x' }, who))).status).toBe(404);
  });

  it('PUT replaces an existing contact (omitted properties reset) or creates a new one', async () => {
    const c = await contacts.create({ name: 'Hopper', email: email(), company: 'Navy', title: 'RADM', fields: { city: 'NYC' } }, who);
    const put = await contacts.put(c.id, { name: 'G. Hopper', email: c.email! }, who);
    expect(put).toMatchObject({ created: false, contact: { id: c.id, name: 'G. Hopper', company: null, title: null, fields: { source: 'api' } } });
    const created = await contacts.put(999_999, { name: 'New', email: email() }, who);
    expect(created.created).toBe(true);
    expect(created.contact.id).not.toBe(999_999);
  });

  it('unique-identifier custom values are unique across contacts (409 with the holder)', async () => {
    const a = await contacts.create({ name: 'A', email: email(), fields: { badge: 'B-1' } }, who);
    const err = await appError(contacts.create({ name: 'B', email: email(), fields: { badge: 'B-1' } }, who));
    expect(err).toMatchObject({ status: 409, details: [{ field: 'fields.badge', existingId: a.id }] });
    const b = await contacts.create({ name: 'B', email: email(), fields: { badge: 'B-2' } }, who);
    expect((await appError(contacts.patch(b.id, { fields: { badge: 'B-1' } }, who))).status).toBe(409);
    expect((await appError(contacts.put(b.id, { name: 'B', email: b.email!, fields: { badge: 'B-1' } }, who))).status).toBe(409);
    // Saving a contact with its own value again is not a conflict.
    expect((await contacts.patch(a.id, { fields: { badge: 'B-1' }, title: 'same' }, who)).title).toBe('same');
    // Concurrent creates with one new value: exactly one wins.
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => contacts.create({ name: `R${i}`, email: email(), fields: { badge: 'B-race' } }, who)),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });

  it('concurrent PATCHes of different properties and custom values all survive (row lock)', async () => {
    for (let round = 0; round < 3; round++) {
      const c = await contacts.create({ name: `Lock ${round}`, email: email() }, who);
      await Promise.all([
        contacts.patch(c.id, { title: 'T' }, who),
        contacts.patch(c.id, { company: 'C' }, who),
        contacts.patch(c.id, { phone: '+14155550199' }, who),
        contacts.patch(c.id, { fields: { city: 'Paris' } }, who),
        contacts.patch(c.id, { fields: { badge: `L-${round}` } }, who),
      ]);
      expect(await contacts.get(c.id)).toMatchObject({
        title: 'T',
        company: 'C',
        phone: '+14155550199',
        fields: { city: 'Paris', badge: `L-${round}`, source: 'api' },
      });
    }
  });

  it('deletes once: the record as it was, then 404 for every other caller', async () => {
    const c = await contacts.create({ name: 'Gone', email: email(), ownerId: owner.userId }, who);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => contacts.remove(c.id)));
    const done = results.filter((r): r is PromiseFulfilledResult<Awaited<ReturnType<ContactsService['remove']>>> => r.status === 'fulfilled');
    expect(done).toHaveLength(1);
    expect(done[0].value).toMatchObject({ id: c.id, name: 'Gone', owner: { id: owner.userId, name: 'Service Spec' } });
    for (const r of results.filter((r) => r.status === 'rejected')) expect(r.reason).toMatchObject({ status: 404 });
    expect((await appError(contacts.get(c.id))).status).toBe(404);
  });

  it('lists with search, paging, order, owners and a scope', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 4; i++)
      ids.push(
        (await contacts.create({ name: `Pager ${i}`, email: `pager${i}@list.test`, company: 'ListCorp', ownerId: i === 0 ? owner.userId : null }, who)).id,
      );
    const page = await contacts.list({ search: 'listcorp', limit: '2', orderBy: 'name', orderByDir: 'asc' });
    expect(page.total).toBe(4);
    expect(page.contacts.map((c) => c.name)).toEqual(['Pager 0', 'Pager 1']);
    expect(page.contacts[0].owner).toEqual({ id: owner.userId, name: 'Service Spec' });
    expect(page.contacts[1].owner).toBeNull();
    const all = await contacts.list({ limit: '1' });
    const [{ n }] = await ctx.query<{ n: string }>(`SELECT count(*)::text AS n FROM contacts`);
    expect(all.total).toBe(Number(n));
    const scoped = await contacts.list(
      {},
      { name: 'some contacts', where: (qb) => qb.andWhere('c.id IN (:...ids)', { ids: ids.slice(1, 3) }), count: async () => 2 },
    );
    expect(scoped).toMatchObject({ total: 2 });
    expect(scoped.contacts.map((c) => c.id).sort()).toEqual(ids.slice(1, 3).sort());
    expect((await appError(Promise.resolve().then(() => contacts.list({ orderBy: 'password' })))).status).toBe(400);
  });

  it('a counted search pages the same whether it matches a few rows (one scan) or more than 10,000 (count, then page)', async () => {
    // 10,050 contacts named "Bulkmatch …" (one statement), 3 of them also "Fewmatch".
    await ctx.query(
      `INSERT INTO contacts (name, email, company) SELECT 'Bulkmatch ' || lpad(i::text, 5, '0') || CASE WHEN i % 5000 = 7 THEN ' Fewmatch' ELSE '' END,
              'bulk' || i || '@pages.test', CASE WHEN i % 3 = 0 THEN NULL ELSE 'Co ' || (i % 7) END
         FROM generate_series(1, 10050) i`,
    );
    const expected = async (where: string, order: string, limit: number, offset: number) =>
      (await ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE ${where} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`)).map((r) => r.id);
    for (const [search, where] of [
      ['fewmatch', `search_text LIKE '%fewmatch%'`],
      ['bulkmatch', `search_text LIKE '%bulkmatch%'`],
    ] as const) {
      const [{ n }] = await ctx.query<{ n: string }>(`SELECT count(*)::text AS n FROM contacts WHERE ${where}`);
      for (const [query, order, limit, offset] of [
        [{ search, limit: '4' }, 'id ASC', 4, 0],
        [{ search, limit: '4', page: '2', orderBy: 'company', orderByDir: 'desc' }, 'company DESC NULLS FIRST, id DESC', 4, 4],
        [{ search, limit: '30', page: '300', orderBy: 'name' }, 'name ASC, id ASC', 30, 8970],
        [{ search, limit: '30', page: '999' }, 'id ASC', 30, 29940],
      ] as const) {
        const page = await contacts.list(query);
        expect({ search, query, total: page.total }).toEqual({ search, query, total: Number(n) });
        expect(page.contacts.map((c) => c.id)).toEqual(await expected(where, order, limit, offset));
      }
    }
    expect(await contacts.list({ search: 'nomatch-anywhere' })).toMatchObject({ total: 0, contacts: [] });

    // The whole table in id order: read directly up to offset 1,000, through the page's ids deeper; the same rows either way.
    const [{ n: all }] = await ctx.query<{ n: string }>(`SELECT count(*)::text AS n FROM contacts`);
    for (const [query, order, limit, offset] of [
      [{ limit: '30' }, 'id ASC', 30, 0],
      [{ limit: '7', page: '3', orderByDir: 'desc' }, 'id DESC', 7, 14],
      [{ limit: '200', page: '6' }, 'id ASC', 200, 1000],
      [{ limit: '200', page: '7' }, 'id ASC', 200, 1200],
      [{ limit: '30', page: '40', orderByDir: 'desc' }, 'id DESC', 30, 1170],
      [{ limit: '30', page: '3', orderBy: 'company', orderByDir: 'desc' }, 'company DESC NULLS FIRST, id DESC', 30, 60],
    ] as const) {
      const page = await contacts.list(query);
      expect({ query, total: page.total }).toEqual({ query, total: Number(all) });
      expect(page.contacts.map((c) => c.id)).toEqual(await expected('TRUE', order, limit, offset));
    }
    await ctx.query(`DELETE FROM contacts WHERE email LIKE 'bulk%@pages.test'`);
  });
});

describe('ContactsService with a small connection pool', () => {
  let ctx: ServiceContext;
  afterAll(async () => {
    await ctx?.close();
  });

  it('concurrent PATCHes with custom values never hold the row lock while waiting for a pool connection', async () => {
    ctx = await startServiceContext({ DATABASE_POOL_SIZE: '2' });
    const contacts = ctx.get(ContactsService);
    const who = await ctx.principal();
    await ctx.get(FieldsService).create({ label: 'Note', alias: 'note', type: 'text' }, who, 'contact');
    const c = await contacts.create({ name: 'Small pool', email: 'pool@svc.test' }, who);
    // A field change empties the rules cache: every PATCH below must read the rules from the database.
    ctx.get(ContactFieldValuesService).invalidate();
    const started = Date.now();
    const results = await Promise.allSettled([
      contacts.patch(c.id, { fields: { note: 'a' }, title: 'T' }, who),
      contacts.patch(c.id, { company: 'C' }, who),
      contacts.patch(c.id, { fields: { note: 'b' } }, who),
      contacts.patch(c.id, { phone: '+14155550100' }, who),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(await contacts.get(c.id)).toMatchObject({ title: 'T', company: 'C', phone: '+14155550100', fields: { note: expect.stringMatching(/^[ab]$/) } });
  });
});
