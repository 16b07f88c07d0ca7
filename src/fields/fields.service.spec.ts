import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { appError, startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { ContactFieldValuesService } from './contact-field-values.service.js';
import { FieldsService } from './fields.service.js';

describe('FieldsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let fields: FieldsService;
  let contacts: ContactsService;
  let who: Principal;
  let seq = 0;
  const email = () => `f${++seq}@fields.test`;

  const detailFields = async (work: Promise<unknown>) => ((await appError(work)).details ?? []).map((d) => d.field).sort();

  beforeAll(async () => {
    ctx = await startServiceContext();
    fields = ctx.get(FieldsService);
    contacts = ctx.get(ContactsService);
    who = await ctx.principal();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('creates a field with defaults and the full record', async () => {
    const f = await fields.create({ label: '  Favourite Colour ' }, who, 'contact');
    expect(f).toMatchObject({
      label: 'Favourite Colour',
      alias: 'favourite_colour',
      type: 'text',
      object: 'contact',
      group: null,
      order: 0,
      description: null,
      defaultValue: null,
      isRequired: false,
      isPubliclyUpdatable: false,
      isUniqueIdentifier: false,
      isPublished: true,
      publishUp: null,
      publishDown: null,
      properties: [],
      createdBy: who.userId,
      dateModified: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/), // set on creation, as on every change
    });
    expect(await fields.get(f.id, 'contact')).toEqual(f);
    expect((await appError(fields.get(f.id, 'company'))).message).toBe(`Company field ${f.id} not found`);
  });

  it('generates aliases: folded from the label, prefixed when it starts with a digit, suffixed when taken', async () => {
    expect((await fields.create({ label: 'Öffnungszeit' }, who, 'company')).alias).toBe('offnungszeit');
    expect((await fields.create({ label: '2nd phone', type: 'tel' }, who, 'company')).alias).toBe('field_2nd_phone');
    expect((await fields.create({ label: '!!!' }, who, 'company')).alias).toBe('field');
    expect((await fields.create({ label: 'Öffnungszeit' }, who, 'company')).alias).toBe('offnungszeit_2');
    // The same alias on the other object is free.
    expect((await fields.create({ label: 'Öffnungszeit' }, who, 'contact')).alias).toBe('offnungszeit');
  });

  it('20 concurrent creates without an alias all succeed with distinct aliases (retry, never a 409)', async () => {
    const created = await Promise.all(Array.from({ length: 20 }, () => fields.create({ label: 'Twin' }, who, 'company')));
    expect(new Set(created.map((f) => f.alias)).size).toBe(20);
  });

  it('a given alias that is taken is the registered unique violation: 409 naming alias with the existing id', async () => {
    const first = await fields.create({ label: 'Plan', alias: 'plan' }, who, 'contact');
    const err = await ctx.failure(fields.create({ label: 'Plan 2', alias: 'plan' }, who, 'contact'));
    expect(err).toMatchObject({ status: 409, details: [{ field: 'alias', existingId: first.id }] });
    const other = await fields.create({ label: 'Other' }, who, 'contact');
    const renamed = await ctx.failure(fields.patch(other.id, { alias: 'plan' }, who));
    expect(renamed).toMatchObject({ status: 409, details: [{ field: 'alias', existingId: first.id }] });
  });

  it('checks the object: required for the collection style, must match the path, cannot change', async () => {
    expect(await detailFields(fields.create({ label: 'X' }, who))).toEqual(['object']);
    expect(await detailFields(fields.create({ label: 'X', object: 'company' }, who, 'contact'))).toEqual(['object']);
    const f = await fields.create({ label: 'Fixed', object: 'company' }, who);
    expect((await appError(fields.patch(f.id, { object: 'contact' }, who))).message).toMatch(/cannot be changed/);
    expect((await appError(fields.patch(f.id, { object: 'contact' }, who, 'company'))).message).toMatch(/must match the object in the path/);
    expect((await fields.patch(f.id, { object: 'company', label: 'Still' }, who)).label).toBe('Still');
  });

  it('checks the body as a whole: nulls, empty label, properties for the type, default value, publish window', async () => {
    expect(await detailFields(fields.create({ label: '   ' }, who, 'contact'))).toEqual(['label']);
    expect(await detailFields(fields.create({ label: 'S', type: 'select' }, who, 'contact'))).toEqual(['properties.list']);
    expect(await detailFields(fields.create({ label: 'T', properties: { list: [] } }, who, 'contact'))).toEqual(['properties']);
    expect(await detailFields(fields.create({ label: 'N', type: 'number', defaultValue: 'ten' }, who, 'contact'))).toEqual(['defaultValue']);
    expect(
      await detailFields(fields.create({ label: 'W', publishUp: '2026-02-01T00:00:00+00:00', publishDown: '2026-01-01T00:00:00+00:00' }, who, 'contact')),
    ).toEqual(['publishDown']);
    const f = await fields.create({ label: 'Nullable' }, who, 'company');
    expect(await detailFields(fields.patch(f.id, { label: null as never, isRequired: null as never }, who))).toEqual(['isRequired', 'label']);
    const sel = await fields.create(
      { label: 'Tier', type: 'select', defaultValue: 'gold', properties: { list: [{ label: 'Gold', value: 'gold' }] } },
      who,
      'company',
    );
    expect(sel).toMatchObject({ defaultValue: 'gold', properties: { list: [{ label: 'Gold', value: 'gold' }] } });
    // PATCH without properties keeps them while the type stays; a new type without properties resets them.
    expect((await fields.patch(sel.id, { label: 'Tier 2' }, who)).properties).toEqual({ list: [{ label: 'Gold', value: 'gold' }] });
    expect((await fields.patch(sel.id, { type: 'text', defaultValue: null }, who)).properties).toEqual([]);
  });

  it('PATCH changes only the given properties; 404 for a missing id or the other object', async () => {
    const f = await fields.create({ label: 'Patchable', description: 'd', group: 'core', order: 3 }, who, 'contact');
    const p = await fields.patch(f.id, { label: 'Patched', group: '  ' }, who, 'contact');
    expect(p).toMatchObject({ label: 'Patched', description: 'd', group: null, order: 3, alias: 'patchable', modifiedBy: who.userId });
    expect(p.dateModified).not.toBeNull();
    expect((await appError(fields.patch(424242, { label: 'x' }, who))).status).toBe(404);
    expect((await appError(fields.patch(f.id, { label: 'x' }, who, 'company'))).status).toBe(404);
  });

  it('concurrent PATCHes of different properties of one field all survive (row lock)', async () => {
    const f = await fields.create({ label: 'Racy' }, who, 'company');
    await Promise.all([
      fields.patch(f.id, { label: 'Racy 2' }, who),
      fields.patch(f.id, { description: 'described' }, who),
      fields.patch(f.id, { order: 9 }, who),
      fields.patch(f.id, { isPubliclyUpdatable: true }, who),
      fields.patch(f.id, { alias: 'racy_renamed' }, who),
      fields.patch(f.id, { defaultValue: 'x' }, who),
    ]);
    expect(await fields.get(f.id)).toMatchObject({
      label: 'Racy 2',
      description: 'described',
      order: 9,
      isPubliclyUpdatable: true,
      alias: 'racy_renamed',
      defaultValue: 'x',
    });
  });

  it('PUT replaces (alias kept when omitted, optional properties reset) or creates; a field of the other object counts as missing', async () => {
    const f = await fields.create({ label: 'Put me', description: 'x', isRequired: false, order: 5 }, who, 'company');
    const put = await fields.put(f.id, { label: 'Put again' }, who, 'company');
    expect(put).toMatchObject({ created: false, field: { id: f.id, alias: 'put_me', label: 'Put again', description: null, order: 0 } });
    const renamed = await fields.put(f.id, { label: 'Put again', alias: 'put_renamed' }, who);
    expect(renamed.field.alias).toBe('put_renamed');
    const created = await fields.put(999_999, { label: 'By put', object: 'contact' }, who);
    expect(created.created).toBe(true);
    expect(created.field.id).not.toBe(999_999);
    const elsewhere = await fields.put(f.id, { label: 'Other object' }, who, 'contact');
    expect(elsewhere.created).toBe(true);
    expect(elsewhere.field).toMatchObject({ object: 'contact', alias: 'other_object' });
  });

  it('contact values follow the field: rename moves them, type change and unique with shared values are 409s, delete removes them', async () => {
    const f = await fields.create({ label: 'Region' }, who, 'contact');
    const a = await contacts.create({ name: 'A', email: email(), fields: { region: 'north' } }, who);
    const b = await contacts.create({ name: 'B', email: email(), fields: { region: 'north' } }, who);

    const renamed = await fields.patch(f.id, { alias: 'area' }, who);
    expect(renamed.alias).toBe('area');
    expect((await contacts.get(a.id)).fields).toMatchObject({ area: 'north' });
    expect((await contacts.get(a.id)).fields).not.toHaveProperty('region');

    const typeChange = await appError(fields.patch(f.id, { type: 'number' }, who));
    expect(typeChange).toMatchObject({ status: 409, details: [{ field: 'type' }] });
    const unique = await appError(fields.patch(f.id, { isUniqueIdentifier: true }, who));
    expect(unique).toMatchObject({ status: 409, details: [{ field: 'isUniqueIdentifier' }] });
    // Both refusals rolled back: the field is as it was.
    expect(await fields.get(f.id)).toMatchObject({ type: 'text', isUniqueIdentifier: false, alias: 'area' });

    await contacts.patch(b.id, { fields: { area: 'south' } }, who);
    expect((await fields.patch(f.id, { isUniqueIdentifier: true }, who)).isUniqueIdentifier).toBe(true);

    const removed = await fields.remove(f.id, 'contact');
    expect(removed).toMatchObject({ id: f.id, alias: 'area' });
    expect((await contacts.get(a.id)).fields).not.toHaveProperty('area');
    expect((await contacts.get(b.id)).fields).not.toHaveProperty('area');
  });

  it('deletes once: one caller gets the field, the others 404; the other object is a 404', async () => {
    const f = await fields.create({ label: 'Doomed' }, who, 'company');
    expect((await appError(fields.remove(f.id, 'contact'))).status).toBe(404);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => fields.remove(f.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((r) => r.status === 'rejected')) expect(r.reason).toMatchObject({ status: 404 });
  });

  it('a field change reaches the contact rules at once (cache invalidated)', async () => {
    const rules = ctx.get(ContactFieldValuesService);
    await rules.publishedRules(); // warm the cache
    const f = await fields.create({ label: 'Fresh', type: 'number' }, who, 'contact');
    expect((await rules.publishedRules()).map((r) => r.alias)).toContain('fresh');
    await fields.patch(f.id, { isPublished: false }, who);
    expect((await rules.publishedRules()).map((r) => r.alias)).not.toContain('fresh');
    await fields.patch(f.id, { isPublished: true, publishUp: '2999-01-01T00:00:00+00:00' }, who);
    expect((await rules.publishedRules()).map((r) => r.alias)).not.toContain('fresh');
  });

  it('lists per object or both, and serves the /api/fields/<segment> shapes', async () => {
    const list = await fields.list({ search: 'öffnungszeit', orderBy: 'alias' }, 'company');
    expect(list.fields.map((f) => f.alias)).toEqual(['offnungszeit', 'offnungszeit_2']);
    expect(list.total).toBe(2);
    const both = await fields.list({ search: 'offnungszeit' });
    expect(both.total).toBe(3);
    const onlyContact = await fields.list({ search: 'offnungszeit', object: 'contact' });
    expect(onlyContact.fields.map((f) => f.object)).toEqual(['contact']);
    expect(await fields.listOrGet('company', { search: 'offnungszeit' })).toMatchObject({ total: 2 });
    const one = list.fields[0];
    expect(await fields.listOrGet(String(one.id), {})).toEqual({ field: one });
    expect((await appError(fields.listOrGet('people', {}))).status).toBe(404);
    expect((await appError(fields.listOrGet('99999999999', {}))).status).toBe(404);
  });
});
