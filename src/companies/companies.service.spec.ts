import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { DealsService } from '../deals/deals.service.js';
import { FieldsService } from '../fields/fields.service.js';
import { CompaniesService } from './companies.service.js';

describe('CompaniesService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let companies: CompaniesService;
  let contacts: ContactsService;
  let deals: DealsService;
  let seq = 0;
  const email = () => `co${++seq}-${Date.now()}@svc.test`;

  beforeAll(async () => {
    companies = spec.ctx.get(CompaniesService);
    contacts = spec.ctx.get(ContactsService);
    deals = spec.ctx.get(DealsService);
    const fields = spec.ctx.get(FieldsService);
    await fields.create(
      {
        label: 'Tier',
        alias: 'tier',
        type: 'select',
        properties: {
          list: [
            { label: 'Gold', value: 'gold' },
            { label: 'Silver', value: 'silver' },
          ],
        },
      },
      spec.who,
      'company',
    );
    await fields.create({ label: 'DUNS', alias: 'duns', type: 'text', isUniqueIdentifier: true }, spec.who, 'company');
    await fields.create({ label: 'Region', alias: 'region', type: 'text', defaultValue: 'emea' }, spec.who, 'company');
    // A contact field with the same alias as a company field: the two objects' values are separate.
    await fields.create({ label: 'DUNS', alias: 'duns', type: 'text', isUniqueIdentifier: true }, spec.who, 'contact');
  });
  it('creates a company: normalised domain, website and phone, owner, field defaults, audit columns, event', async () => {
    const c = await companies.create(
      { name: '  Acme ', domain: 'https://WWW.Acme.com:8080/about', website: 'acme.com', phone: '(415) 555-0100', size: 12, ownerId: spec.who.userId },
      spec.who,
    );
    expect(c).toMatchObject({
      name: 'Acme',
      domain: 'acme.com',
      website: 'https://acme.com',
      phone: '+14155550100',
      size: 12,
      industry: null,
      owner: { id: spec.who.userId, name: 'Service Spec' },
      fields: { region: 'emea' },
      createdBy: spec.who.userId,
      modifiedBy: spec.who.userId,
    });
    expect(c.modifiedAt).toBe(c.createdAt);
    expect(await companies.get(c.id)).toEqual(c);
    const [event] = await spec.ctx.query<{ data: unknown }>(`SELECT data FROM events WHERE type = 'company.created' AND (data->>'id')::int = $1`, [c.id]);
    expect(event.data).toEqual(c);
  });

  it('refuses a malformed domain or website and a missing owner, naming the field', async () => {
    expect((await spec.ctx.failure(companies.create({ name: 'X', domain: 'not a domain' }, spec.who))).details?.[0].field).toBe('domain');
    expect((await spec.ctx.failure(companies.create({ name: 'X', website: 'ftp://x.com' }, spec.who))).details?.[0].field).toBe('website');
    const owner = await spec.ctx.failure(companies.create({ name: 'X', ownerId: 987654 }, spec.who));
    expect([owner.status, owner.details?.[0].field]).toEqual([400, 'ownerId']);
    expect((await spec.ctx.failure(companies.create({ name: ' ' }, spec.who))).details?.[0].field).toBe('name');
  });

  it('a domain is unique after normalisation: 409 with the existing id; parallel creates of one domain: exactly one wins', async () => {
    const a = await companies.create({ name: 'Dup', domain: 'dup.example' }, spec.who);
    const err = await spec.ctx.failure(companies.create({ name: 'Dup 2', domain: 'HTTP://www.dup.example/' }, spec.who));
    expect(err).toMatchObject({ status: 409, details: [{ field: 'domain', existingId: a.id }] });
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => companies.create({ name: `Race ${i}`, domain: 'race.example' }, spec.who)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const [{ n }] = await spec.ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM companies WHERE domain = 'race.example'`);
    expect(n).toBe(1);
  });

  it('custom values: select options, unknown aliases, unique identifiers among companies only', async () => {
    const bad = await spec.ctx.failure(companies.create({ name: 'F', fields: { tier: 'bronze', nope: 1 } }, spec.who));
    expect(bad.details?.map((d) => d.field).sort()).toEqual(['fields.nope', 'fields.tier']);
    expect(bad.details?.find((d) => d.field === 'fields.nope')?.message).toBe('is not a published company field');
    const a = await companies.create({ name: 'F1', fields: { tier: 'gold', duns: 'D-1' } }, spec.who);
    expect(a.fields).toEqual({ tier: 'gold', duns: 'D-1', region: 'emea' });
    expect(await spec.ctx.failure(companies.create({ name: 'F2', fields: { duns: 'D-1' } }, spec.who))).toMatchObject({
      status: 409,
      details: [{ field: 'fields.duns', existingId: a.id }],
    });
    // A contact may hold the same value: the objects are separate.
    expect((await contacts.create({ name: 'C', email: email(), fields: { duns: 'D-1' } }, spec.who)).fields).toMatchObject({ duns: 'D-1' });
    const b = await companies.create({ name: 'F3' }, spec.who);
    expect((await companies.patch(b.id, { fields: { tier: 'silver' } }, spec.who)).fields).toEqual({ tier: 'silver', region: 'emea' });
    expect((await spec.ctx.failure(companies.patch(b.id, { fields: { duns: 'D-1' } }, spec.who))).status).toBe(409);
  });

  it("company field changes check and rewrite the companies' values (type, unique identifier, rename, delete)", async () => {
    const fields = spec.ctx.get(FieldsService);
    const note = await fields.create({ label: 'Note', alias: 'co_note', type: 'text' }, spec.who, 'company');
    const a = await companies.create({ name: 'N1', fields: { co_note: 'same' } }, spec.who);
    await companies.create({ name: 'N2', fields: { co_note: 'same' } }, spec.who);
    expect(await spec.ctx.failure(fields.patch(note.id, { type: 'number' }, spec.who, 'company'))).toMatchObject({ status: 409, details: [{ field: 'type' }] });
    expect(await spec.ctx.failure(fields.patch(note.id, { isUniqueIdentifier: true }, spec.who, 'company'))).toMatchObject({
      status: 409,
      details: [{ field: 'isUniqueIdentifier', message: 'companies already share a value of this field' }],
    });
    await fields.patch(note.id, { alias: 'co_memo' }, spec.who, 'company');
    expect((await companies.get(a.id)).fields).toMatchObject({ co_memo: 'same' });
    await fields.remove(note.id, 'company');
    expect((await companies.get(a.id)).fields).not.toHaveProperty('co_memo');
  });

  it('PATCH keeps what is not given; PUT replaces or creates; parallel PATCHes all land', async () => {
    const c = await companies.create({ name: 'P', industry: 'Retail', city: 'Paris' }, spec.who);
    expect(await companies.patch(c.id, { size: 5 }, spec.who)).toMatchObject({ industry: 'Retail', city: 'Paris', size: 5 });
    expect((await spec.ctx.failure(companies.patch(c.id, { name: null } as never, spec.who))).details?.[0].field).toBe('name');
    const put = await companies.put(c.id, { name: 'P2' }, spec.who);
    expect(put).toMatchObject({ created: false, company: { id: c.id, name: 'P2', industry: null, city: null, size: null, fields: { region: 'emea' } } });
    const created = await companies.put(987654, { name: 'New' }, spec.who);
    expect(created.created).toBe(true);
    expect(created.company.id).not.toBe(987654);
    await Promise.all([
      companies.patch(c.id, { industry: 'I' }, spec.who),
      companies.patch(c.id, { city: 'C' }, spec.who),
      companies.patch(c.id, { country: 'FR' }, spec.who),
      companies.patch(c.id, { fields: { tier: 'gold' } }, spec.who),
      companies.patch(c.id, { description: 'D' }, spec.who),
    ]);
    expect(await companies.get(c.id)).toMatchObject({ industry: 'I', city: 'C', country: 'FR', description: 'D', fields: { tier: 'gold' } });
    await expect(companies.patch(987654, { name: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it("contacts' companyId: companyRef, the company name when company is not given, 400 for a missing company", async () => {
    const co = await companies.create({ name: 'Initech' }, spec.who);
    const c = await contacts.create({ name: 'Peter', email: email(), companyId: co.id }, spec.who);
    expect(c).toMatchObject({ company: 'Initech', companyId: co.id, companyRef: { id: co.id, name: 'Initech' } });
    const own = await contacts.create({ name: 'Bill', email: email(), companyId: co.id, company: 'Initech LLC' }, spec.who);
    expect(own.company).toBe('Initech LLC');
    const missing = await spec.ctx.failure(contacts.create({ name: 'X', email: email(), companyId: 987654 }, spec.who));
    expect([missing.status, missing.details?.[0].field, missing.details?.[0].message]).toEqual([400, 'companyId', 'company 987654 does not exist']);
    expect((await spec.ctx.failure(contacts.patch(c.id, { companyId: 987654 }, spec.who))).details?.[0].field).toBe('companyId');
    // A PATCH that keeps the company keeps the contact's own company text; PUT derives it again.
    expect((await contacts.patch(own.id, { companyId: co.id, title: 'CTO' }, spec.who)).company).toBe('Initech LLC');
    expect((await contacts.put(own.id, { name: 'Bill', email: own.email!, companyId: co.id }, spec.who)).contact.company).toBe('Initech');
    const cleared = await contacts.patch(c.id, { companyId: null }, spec.who);
    expect(cleared).toMatchObject({ company: 'Initech', companyId: null, companyRef: null });
    const listed = await contacts.list({ search: 'initech' });
    expect(listed.contacts.find((x) => x.id === own.id)?.companyRef).toEqual({ id: co.id, name: 'Initech' });
  });

  it('membership: add (twice is fine), list, remove (a non-member is a 404), in parallel', async () => {
    const co = await companies.create({ name: 'Members' }, spec.who);
    const ids = await Promise.all(Array.from({ length: 6 }, async () => (await contacts.create({ name: 'M', email: email() }, spec.who)).id));
    await Promise.all(ids.map((id) => companies.addContact(co.id, id, spec.who)));
    await expect(companies.addContact(co.id, ids[0], spec.who)).resolves.toEqual({ success: true });
    const page = await companies.listContacts(co.id, { orderBy: 'id' });
    expect(page.total).toBe(6);
    expect(page.contacts.map((c) => c.id)).toEqual(ids.slice().sort((a, b) => a - b));
    expect(page.contacts[0]).toMatchObject({ company: 'Members', companyRef: { id: co.id, name: 'Members' } });
    await Promise.all(ids.slice(0, 3).map((id) => companies.removeContact(co.id, id, spec.who)));
    expect((await companies.listContacts(co.id, {})).total).toBe(3);
    expect((await spec.ctx.failure(companies.removeContact(co.id, ids[0], spec.who))).status).toBe(404);
    expect((await spec.ctx.failure(companies.addContact(987654, ids[0], spec.who))).status).toBe(404);
    expect((await spec.ctx.failure(companies.addContact(co.id, 987654, spec.who))).status).toBe(404);
    expect((await spec.ctx.failure(companies.listContacts(987654, {}))).status).toBe(404);
    const removes = await Promise.allSettled(Array.from({ length: 5 }, () => companies.removeContact(co.id, ids[3], spec.who)));
    expect(removes.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });

  it('delete detaches contacts and deals (modifiedAt set); parallel deletes: exactly one succeeds', async () => {
    const co = await companies.create({ name: 'Doomed' }, spec.who);
    const c = await contacts.create({ name: 'D', email: email(), companyId: co.id }, spec.who);
    const d = await deals.create({ title: 'Deal', value: 1, contact_id: c.id, company_id: co.id }, spec.who);
    expect(d.company_id).toBe(co.id);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => companies.remove(co.id, spec.who)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
    const after = await contacts.get(c.id);
    expect(after).toMatchObject({ companyId: null, companyRef: null, company: 'Doomed' });
    expect(after.modifiedAt).not.toBeNull();
    const deal = await deals.get(d.id);
    expect(deal.company_id).toBeNull();
    expect(deal.modifiedAt).not.toBeNull();
  });

  it('a company deleted while contacts and deals are moved to it: every call a 200, 400 or 404 (no deadlock), nothing left pointing at it', async () => {
    for (let round = 0; round < 4; round++) {
      const co = await companies.create({ name: `Busy ${round}` }, spec.who);
      const cs = await Promise.all(Array.from({ length: 3 }, () => contacts.create({ name: 'B', email: email(), companyId: co.id }, spec.who)));
      const d = await deals.create({ title: 'T', value: 1, contact_id: cs[0].id, company_id: co.id }, spec.who);
      const results = await Promise.allSettled([
        ...cs.map((c) => contacts.patch(c.id, { companyId: co.id, title: `t${round}` }, spec.who)),
        companies.remove(co.id, spec.who),
        deals.patch(d.id, { company_id: co.id, stage: 's' }, spec.who),
        ...cs.map((c) => companies.addContact(co.id, c.id, spec.who)),
        contacts.put(cs[1].id, { name: 'B', email: cs[1].email!, companyId: co.id }, spec.who),
      ]);
      for (const r of results) if (r.status === 'rejected') expect([400, 404]).toContain((await spec.ctx.failure(Promise.reject(r.reason as Error))).status);
      expect(results.filter((r) => r.status === 'fulfilled').length).toBeGreaterThan(0);
      const [{ n }] = await spec.ctx.query<{ n: string }>(
        `SELECT (SELECT count(*) FROM contacts WHERE company_id = $1) + (SELECT count(*) FROM deals WHERE company_id = $1) AS n`,
        [co.id],
      );
      expect(Number(n)).toBe(0);
    }
  });

  it('backfill: companies from distinct strings (case-insensitive, trimmed, first spelling), contacts linked; idempotent', async () => {
    const a = await contacts.create({ name: 'B1', email: email(), company: ' Globex ' }, spec.who);
    const b = await contacts.create({ name: 'B2', email: email(), company: 'GLOBEX' }, spec.who);
    const existing = await companies.create({ name: 'Hooli' }, spec.who);
    const h = await contacts.create({ name: 'B3', email: email(), company: 'hooli' }, spec.who);
    const run = await companies.backfillNow();
    expect(run).toMatchObject({ status: 'completed', trigger: 'cli' });
    const globex = await spec.ctx.query<{ id: number; name: string }>(`SELECT id, name FROM companies WHERE lower(name) = 'globex'`);
    expect(globex).toHaveLength(1);
    expect(globex[0].name).toBe('Globex');
    expect((await contacts.get(a.id)).companyRef).toEqual({ id: globex[0].id, name: 'Globex' });
    expect((await contacts.get(b.id)).companyId).toBe(globex[0].id);
    expect((await contacts.get(h.id)).companyId).toBe(existing.id);
    expect((await contacts.get(b.id)).company).toBe('GLOBEX');
    const again = await companies.backfillNow();
    expect(again).toMatchObject({ status: 'completed', companiesCreated: 0, contactsLinked: 0 });
    expect(await companies.getBackfill(run.id)).toEqual(run);
    await expect(companies.getBackfill(987654)).rejects.toMatchObject({ status: 404 });
  });
});
