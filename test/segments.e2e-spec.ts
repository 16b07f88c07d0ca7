/**
 * Segments: CRUD in every route form, the rules of dynamic and static segments,
 * the materialised membership (built after a filter change, kept fresh as contacts change), the
 * static batch, the preview, GET /api/contacts/{id}/segments, the `segment.id` filter on contacts,
 * campaigns that mirror a segment, and parallel edits and deletes.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, createContact, tokenFor, uniqueEmail, ISO, feedHead, feedSince } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

interface Membership {
  status: string;
  builtAt: string | null;
  count: number;
  error: string | null;
}
interface Segment {
  id: number;
  name: string;
  description: string | null;
  type: string;
  filter: Record<string, unknown> | null;
  membership: Membership;
  [k: string]: unknown;
}
let tagSeq = 0;

describe('segments', () => {
  let app: TestApp;
  let auth: string;
  let reader: string;
  let contactReader: string;
  let writer: string;

  beforeAll(async () => {
    app = await startApp({ env: { SEGMENT_REFRESH_INTERVAL_MS: '200' } });
    auth = await adminToken(app);
    reader = await tokenFor(app, 'segments:read', { user: 'seg-reader@example.com', plan: 'enterprise' });
    contactReader = await tokenFor(app, 'segments:read,contacts:read', { user: 'seg-reader@example.com', plan: 'enterprise' });
    writer = await tokenFor(app, 'segments:read,segments:write', { user: 'seg-writer@example.com', plan: 'enterprise' });
  }, 120000);
  afterAll(async () => {
    if (process.env.SEGMENTS_E2E_LOGS)
      console.log(
        app.logs
          .join('')
          .split('\n')
          .filter((l) => /egment/.test(l))
          .slice(0, 50)
          .join('\n'),
      );
    await app?.stop();
  });

  const post = (path: string, body: object, token = auth) => app.http.post(path).set('Authorization', token).send(body);
  const patch = (path: string, body: object, token = auth) => app.http.patch(path).set('Authorization', token).send(body);
  const put = (path: string, body: object, token = auth) => app.http.put(path).set('Authorization', token).send(body);
  const get = (path: string, token = auth) => app.http.get(path).set('Authorization', token);
  const del = (path: string, token = auth) => app.http.delete(path).set('Authorization', token);
  /** A marker no other test's contacts carry (their title). */
  const tag = () => `seg-${++tagSeq}-${Date.now()}`;
  const byTitle = (title: string) => ({ field: 'title', op: 'eq', value: title });
  const newContact = (body: Record<string, unknown> = {}) => createContact(app, auth, { email: uniqueEmail('segments.test'), ...body });
  /** Contacts created one after the other (ascending ids). */
  const contactsInOrder = async (bodies: Record<string, unknown>[]): Promise<number[]> => {
    const out: number[] = [];
    for (const b of bodies) out.push(await newContact(b));
    return out;
  };
  const newSegment = async (body: Record<string, unknown>): Promise<Segment> => {
    const res = await post('/api/segments', { name: 'Segment', ...body });
    expect(res.status).toBe(201);
    return res.body.segment as Segment;
  };
  const segment = async (id: number): Promise<Segment> => {
    const res = await get(`/api/segments/${id}`);
    expect(res.status).toBe(200);
    return res.body.segment as Segment;
  };
  const ready = (id: number, ms = 20000) =>
    waitUntil(
      `segment ${id} ready`,
      async () => {
        const s = await segment(id);
        return s.membership.status === 'ready' ? s : undefined;
      },
      ms,
    );
  const memberIds = async (id: number): Promise<number[]> => {
    const res = await get(`/api/segments/${id}/contacts?limit=200&orderBy=id`);
    expect(res.status).toBe(200);
    return (res.body.contacts as { id: number }[]).map((c) => c.id);
  };
  const campaignMemberIds = async (id: number): Promise<number[]> => {
    const res = await get(`/api/campaigns/${id}/contacts?limit=200&orderBy=id`);
    expect(res.status).toBe(200);
    return (res.body.contacts as { id: number }[]).map((c) => c.id);
  };
  /** Waits until the segment's members are exactly `ids` (ascending). */
  const membersBecome = (id: number, ids: number[], ms = 20000) =>
    waitUntil(
      `segment ${id} members ${JSON.stringify(ids)}`,
      async () => {
        const now = await memberIds(id);
        return JSON.stringify(now) === JSON.stringify([...ids].sort((a, b) => a - b)) ? now : undefined;
      },
      ms,
    );

  const head = () => feedHead(app, auth);
  const eventsSince = (cursor: string, types: string) => feedSince(app, auth, cursor, types);

  describe('route forms', () => {
    it('creates (both paths), reads, lists, edits (both paths), replaces or creates with PUT (both paths), deletes (both paths), with events', async () => {
      const since = await head();
      const t = tag();
      const a = await newContact({ title: t });
      const res = await post('/api/segments/new', { name: ' Buyers ', description: 'People who buy', type: 'dynamic', filter: `title[eq]:${t}` });
      expect(res.status).toBe(201);
      const s = res.body.segment as Segment;
      expect(s).toMatchObject({ name: 'Buyers', description: 'People who buy', type: 'dynamic', filter: byTitle(t) });
      expect(['building', 'ready']).toContain(s.membership.status);
      expect(s.createdAt).toMatch(ISO);
      const built = await ready(s.id);
      expect(built.membership).toMatchObject({ status: 'ready', count: 1, error: null });
      expect(built.membership.builtAt).toMatch(ISO);
      expect(await memberIds(s.id)).toEqual([a]);

      const st = await post('/api/segments', { name: 'Hand picked', type: 'static' });
      expect(st.status).toBe(201);
      expect(st.body.segment).toMatchObject({ type: 'static', filter: null, membership: { status: 'ready', count: 0, builtAt: null } });

      const list = await get(`/api/segments?search=hand%20picked`);
      expect(list.status).toBe(200);
      expect((list.body.segments as Segment[]).map((x) => x.id)).toEqual([st.body.segment.id]);
      const search = await post('/api/segments/search', { filter: { field: 'type', op: 'eq', value: 'static' }, limit: 200 });
      expect(search.status).toBe(200);
      expect((search.body.segments as Segment[]).every((x) => x.type === 'static')).toBe(true);

      const e1 = await patch(`/api/segments/${s.id}/edit`, { description: 'Changed' });
      expect(e1.status).toBe(200);
      expect(e1.body.segment).toMatchObject({ name: 'Buyers', description: 'Changed', membership: { status: 'ready', count: 1 } });
      const e2 = await patch(`/api/segments/${s.id}`, { name: 'Buyers 2' });
      expect(e2.body.segment).toMatchObject({ name: 'Buyers 2', description: 'Changed' });

      const r1 = await put(`/api/segments/${st.body.segment.id}/edit`, { name: 'Replaced', type: 'static' });
      expect(r1.status).toBe(200);
      expect(r1.body.segment).toMatchObject({ id: st.body.segment.id, name: 'Replaced', description: null });
      const r2 = await put(`/api/segments/999999`, { name: 'Made by PUT', type: 'static' });
      expect(r2.status).toBe(201);
      expect(r2.body.segment.id).not.toBe(999999);

      expect((await del(`/api/segments/${r2.body.segment.id}/delete`)).status).toBe(200);
      const gone = await del(`/api/segments/${s.id}`);
      expect(gone.status).toBe(200);
      expect(gone.body.segment).toMatchObject({ id: s.id, name: 'Buyers 2' });
      expectError(await get(`/api/segments/${s.id}`), 404, 'not_found');
      expectError(await del(`/api/segments/${s.id}`), 404, 'not_found');
      // The memberships went with the segment; the contact stays.
      expect(await app.sql(`SELECT 1 FROM segment_members WHERE segment_id = $1`, [s.id])).toHaveLength(0);
      expect((await get(`/api/contacts/${a}`)).status).toBe(200);

      const events = (await eventsSince(since, 'segment.created,segment.updated,segment.deleted')).filter((e) => e.data.id === s.id);
      expect(events.map((e) => e.type)).toEqual(['segment.created', 'segment.updated', 'segment.updated', 'segment.deleted']);
      expect(events[1].previous).toMatchObject({ description: 'People who buy' });
      expect(events[2].previous).toMatchObject({ name: 'Buyers' });
    });

    it('answers 400 for bad bodies, 404 for unknown ids, 403 without the permission', async () => {
      for (const body of [
        {},
        { name: 'x' },
        { name: '', type: 'static' },
        { name: 'x', type: 'smart' },
        { name: 'x', type: 'dynamic' },
        { name: 'x', type: 'dynamic', filter: null },
        { name: 'x', type: 'dynamic', filter: '' },
        { name: 'x', type: 'dynamic', filter: 'nope[eq]:1' },
        { name: 'x', type: 'dynamic', filter: { field: 'name', op: 'like', value: 'a' } },
        { name: 'x', type: 'dynamic', filter: 'segment.id[eq]:1' },
        { name: 'x', type: 'dynamic', filter: 42 },
        { name: 'x', type: 'static', filter: 'name[eq]:a' },
        { name: 'x', type: 'static', description: 5 },
      ]) {
        expectError(await post('/api/segments', body), 400, 'validation_failed');
      }
      const s = await newSegment({ type: 'static' });
      expectError(await patch(`/api/segments/${s.id}`, { name: null }), 400, 'validation_failed');
      expectError(await patch(`/api/segments/${s.id}`, { type: 'dynamic' }), 400, 'validation_failed');
      expectError(await patch(`/api/segments/${s.id}`, { filter: 'name[eq]:a' }), 400, 'validation_failed');
      expectError(await patch(`/api/segments/999999`, { name: 'x' }), 404, 'not_found');
      expectError(await get(`/api/segments/999999/contacts`), 404, 'not_found');
      expectError(await get(`/api/segments/999999/count`), 404, 'not_found');
      expectError(await get(`/api/segments/${s.id}/contacts?orderBy=nope`), 400, 'validation_failed');
      expectError(await get(`/api/segments/abc`), 404, 'not_found');

      expect((await get('/api/segments', reader)).status).toBe(200);
      expectError(await post('/api/segments', { name: 'x', type: 'static' }, reader), 403, 'forbidden');
      expectError(await del(`/api/segments/${s.id}`, writer), 403, 'forbidden');
      const noSegments = await tokenFor(app, 'contacts:read', { user: 'seg-none@example.com', plan: 'enterprise' });
      expectError(await get('/api/segments', noSegments), 403, 'forbidden');
      expectError(await post('/api/segments/preview', { filter: 'name[eq]:a' }, noSegments), 403, 'forbidden');
      // The preview and the member lists answer contact records: segments:read alone is a 403 naming contacts:read.
      expect(expectError(await post('/api/segments/preview', { filter: 'name[eq]:a' }, reader), 403, 'forbidden').message).toContain('contacts:read');
      expect(expectError(await get(`/api/segments/${s.id}/contacts`, reader), 403, 'forbidden').message).toContain('contacts:read');
      expectError(await post(`/api/segments/${s.id}/contacts/search`, {}, reader), 403, 'forbidden');
      expect((await get(`/api/segments/${s.id}/count`, reader)).status).toBe(200);
    });
  });

  describe('dynamic membership', () => {
    it('reflects a contact change within seconds: an update in, an update out, a new contact, a deletion', async () => {
      const t = tag();
      const a = await newContact({ title: t });
      const b = await newContact({ title: 'other' });
      const s = await newSegment({ type: 'dynamic', filter: byTitle(t) });
      await ready(s.id);
      await membersBecome(s.id, [a]);

      const start = Date.now();
      expect((await patch(`/api/contacts/${b}`, { title: t })).status).toBe(200);
      await membersBecome(s.id, [a, b], 10000);
      const delay = Date.now() - start;
      expect(delay).toBeLessThan(10000);

      expect((await patch(`/api/contacts/${a}`, { title: 'left' })).status).toBe(200);
      await membersBecome(s.id, [b], 10000);

      const c = await newContact({ title: t });
      await membersBecome(s.id, [b, c], 10000);

      expect((await del(`/api/contacts/${b}`)).status).toBe(200);
      await membersBecome(s.id, [c], 10000);
      const count = await get(`/api/segments/${s.id}/count`);
      expect(count.status).toBe(200);
      expect(count.body).toEqual({ count: 1, status: 'ready' });
      expect((await segment(s.id)).membership.count).toBe(1);
    });

    it('rebuilds on a filter change (and only then), with the status building until the new members are in', async () => {
      const t1 = tag();
      const t2 = tag();
      const a = await newContact({ title: t1 });
      const b = await newContact({ title: t2 });
      const c = await newContact({ title: t2 });
      const s = await newSegment({ type: 'dynamic', filter: byTitle(t1) });
      const first = await ready(s.id);
      expect(await memberIds(s.id)).toEqual([a]);

      // Same filter in the other form: no rebuild.
      const same = await patch(`/api/segments/${s.id}`, { filter: `title[eq]:${t1}`, description: 'same filter' });
      expect(same.status).toBe(200);
      expect(same.body.segment.membership).toMatchObject({ status: 'ready', builtAt: first.membership.builtAt });

      const changed = await patch(`/api/segments/${s.id}`, { filter: { or: [byTitle(t2), { field: 'id', op: 'eq', value: a }] } });
      expect(changed.status).toBe(200);
      expect(changed.body.segment.membership.status).toBe('building');
      await ready(s.id);
      expect(await memberIds(s.id)).toEqual([a, b, c]);
      await patch(`/api/segments/${s.id}`, { filter: byTitle(t2) });
      const rebuilt = await ready(s.id);
      expect(rebuilt.membership.count).toBe(2);
      expect(await memberIds(s.id)).toEqual([b, c]);

      // Rebuild on request: the same members; a static segment refuses it.
      const again = await post(`/api/segments/${s.id}/rebuild`, {});
      expect(again.status).toBe(202);
      expect(again.body.segment.membership.status).toBe('building');
      await ready(s.id);
      expect(await memberIds(s.id)).toEqual([b, c]);
      const st = await newSegment({ type: 'static' });
      expectError(await post(`/api/segments/${st.id}/rebuild`, {}), 409, 'conflict');

      // Dynamic made static keeps its members; static made dynamic is rebuilt from its filter.
      const toStatic = await patch(`/api/segments/${s.id}`, { type: 'static' });
      expect(toStatic.body.segment).toMatchObject({ type: 'static', filter: null, membership: { status: 'ready', count: 2 } });
      const d = await newContact({ title: t2 });
      await new Promise((r) => setTimeout(r, 1500));
      expect(await memberIds(s.id)).toEqual([b, c]);
      const toDynamic = await patch(`/api/segments/${s.id}`, { type: 'dynamic', filter: byTitle(t1) });
      expect(toDynamic.body.segment.membership.status).toBe('building');
      await ready(s.id);
      expect(await memberIds(s.id)).toEqual([a]);
      expect(d).toBeGreaterThan(0);
    });

    it('builds on custom field filters, and a filter whose field was unpublished fails with the reason', async () => {
      const alias = `segplan${Date.now() % 100000}`;
      const field = await post('/api/fields/contact/new', { label: alias, alias, type: 'text' });
      expect(field.status).toBe(201);
      const a = await newContact({ fields: { [alias]: 'gold' } });
      await newContact({ fields: { [alias]: 'silver' } });
      const s = await newSegment({ type: 'dynamic', filter: `fields.${alias}[eq]:gold` });
      await ready(s.id);
      expect(await memberIds(s.id)).toEqual([a]);
      expect((await del(`/api/fields/${field.body.field.id}`)).status).toBe(200);
      expect((await post(`/api/segments/${s.id}/rebuild`, {})).status).toBe(202);
      const failed = await waitUntil(
        'failed build',
        async () => {
          const x = await segment(s.id);
          return x.membership.status === 'failed' ? x : undefined;
        },
        20000,
      );
      expect(failed.membership.error).toContain(alias);
      // The members of the last good build stay.
      expect(await memberIds(s.id)).toEqual([a]);
    });
  });

  describe('static segments', () => {
    it('batch adds and removes, counts, 404s, 400s, 413 over 10,000 ids, 409 on a dynamic segment', async () => {
      const s = await newSegment({ type: 'static' });
      const ids = await contactsInOrder([{}, {}, {}]);
      const r1 = await post(`/api/segments/${s.id}/contacts/batch`, { add: [...ids, ids[0], 999999] });
      expect(r1.status).toBe(200);
      expect(r1.body).toEqual({ added: 3, alreadyMember: 0, removed: 0, notMember: 0, notFound: [999999] });
      const r2 = await post(`/api/segments/${s.id}/contacts/batch`, { add: [ids[0]], remove: [ids[1], 999998] });
      expect(r2.body).toEqual({ added: 0, alreadyMember: 1, removed: 1, notMember: 0, notFound: [999998] });
      const r3 = await post(`/api/segments/${s.id}/contacts/batch`, { remove: [ids[1]] });
      expect(r3.body).toEqual({ added: 0, alreadyMember: 0, removed: 0, notMember: 1, notFound: [] });
      expect(await memberIds(s.id)).toEqual([ids[0], ids[2]]);
      expect((await get(`/api/segments/${s.id}/count`)).body).toEqual({ count: 2, status: 'ready' });

      expectError(await post(`/api/segments/${s.id}/contacts/batch`, { add: [ids[0]], remove: [ids[0]] }), 400, 'validation_failed');
      expectError(await post(`/api/segments/${s.id}/contacts/batch`, { add: ['x'] }), 400, 'validation_failed');
      expectError(await post(`/api/segments/${s.id}/contacts/batch`, { add: [0] }), 400, 'validation_failed');
      const tooMany = Array.from({ length: 10_001 }, (_, i) => i + 1);
      expectError(await post(`/api/segments/${s.id}/contacts/batch`, { add: tooMany }), 413, 'payload_too_large');
      expectError(await post(`/api/segments/${s.id}/contacts/batch`, { remove: tooMany }), 413, 'payload_too_large');
      expectError(await post(`/api/segments/999999/contacts/batch`, { add: [ids[0]] }), 404, 'not_found');
      const dyn = await newSegment({ type: 'dynamic', filter: 'title[eq]:nobody-has-this' });
      expectError(await post(`/api/segments/${dyn.id}/contacts/batch`, { add: [ids[0]] }), 409, 'conflict');

      // Exactly 10,000 ids are taken.
      const full = await post(`/api/segments/${s.id}/contacts/batch`, { remove: tooMany.slice(0, 10_000) });
      expect(full.status).toBe(200);
    });

    it('parallel batches of different contacts all land', async () => {
      const s = await newSegment({ type: 'static' });
      const ids = await Promise.all(Array.from({ length: 12 }, () => newContact()));
      const results = await Promise.all(ids.map((id) => post(`/api/segments/${s.id}/contacts/batch`, { add: [id] })));
      expect(results.map((r) => r.status)).toEqual(ids.map(() => 200));
      expect(await memberIds(s.id)).toEqual([...ids].sort((x, y) => x - y));
      const removes = await Promise.all(Array.from({ length: 6 }, () => post(`/api/segments/${s.id}/contacts/batch`, { remove: [ids[0]] })));
      expect(removes.map((r) => r.body.removed as number).sort()).toEqual([0, 0, 0, 0, 0, 1]);
    });
  });

  describe('reading membership', () => {
    it("lists a segment's contacts with the contacts list parameters (filters, cursors, fields), and a contact's segments", async () => {
      const t = tag();
      const ids = await contactsInOrder(['Ann', 'Ben', 'Cat', 'Dan'].map((name) => ({ name, title: t })));
      const s = await newSegment({ type: 'dynamic', filter: byTitle(t) });
      const st = await newSegment({ type: 'static', name: 'Picked' });
      await post(`/api/segments/${st.id}/contacts/batch`, { add: [ids[0]] });
      await ready(s.id);
      const filtered = await get(`/api/segments/${s.id}/contacts?filter=name[in]:[Ben,Dan]&fields=name`);
      expect(filtered.status).toBe(200);
      expect(filtered.body).toEqual({
        total: 2,
        contacts: [
          { id: ids[1], name: 'Ben' },
          { id: ids[3], name: 'Dan' },
        ],
      });
      const page1 = await get(`/api/segments/${s.id}/contacts?after=&limit=3&orderBy=name&orderByDir=desc`);
      expect(page1.body.contacts.map((c: { name: string }) => c.name)).toEqual(['Dan', 'Cat', 'Ben']);
      const page2 = await get(`/api/segments/${s.id}/contacts?after=${page1.body.next}&limit=3&orderBy=name&orderByDir=desc`);
      expect(page2.body.contacts.map((c: { name: string }) => c.name)).toEqual(['Ann']);
      expect(page2.body.next).toBeNull();
      const searched = await post(`/api/segments/${s.id}/contacts/search`, { filter: { field: 'name', op: 'eq', value: 'Cat' } });
      expect(searched.status).toBe(200);
      expect(searched.body.contacts.map((c: { id: number }) => c.id)).toEqual([ids[2]]);

      const mine = await get(`/api/contacts/${ids[0]}/segments`);
      expect(mine.status).toBe(200);
      expect(mine.body.total).toBe(2);
      expect(mine.body.segments.map((x: { id: number; type: string }) => [x.id, x.type])).toEqual([
        [s.id, 'dynamic'],
        [st.id, 'static'],
      ]);
      expect(mine.body.segments[0].addedAt).toMatch(ISO);
      expect((await get(`/api/contacts/${ids[1]}/segments`, reader)).body.segments).toHaveLength(1);
      expectError(await get(`/api/contacts/999999/segments`), 404, 'not_found');
      expectError(await get(`/api/contacts/${ids[0]}/segments?orderBy=id`), 400, 'validation_failed');
    });

    it('filters contacts by segment.id (eq, in, neq, nin, isEmpty), with bound values', async () => {
      const t = tag();
      const [a, b, c] = await contactsInOrder([{ title: t }, { title: t }, { title: t }]);
      const s1 = await newSegment({ type: 'static' });
      const s2 = await newSegment({ type: 'static' });
      await post(`/api/segments/${s1.id}/contacts/batch`, { add: [a, b] });
      await post(`/api/segments/${s2.id}/contacts/batch`, { add: [c] });
      const ids = async (f: string) => {
        const res = await get(`/api/contacts?filter=${encodeURIComponent(`and(title[eq]:${t},${f})`)}&orderBy=id`);
        expect(res.status).toBe(200);
        return (res.body.contacts as { id: number }[]).map((x) => x.id);
      };
      expect(await ids(`segment.id[eq]:${s1.id}`)).toEqual([a, b]);
      expect(await ids(`segment.id[in]:[${s1.id},${s2.id}]`)).toEqual([a, b, c]);
      expect(await ids(`segment.id[neq]:${s1.id}`)).toEqual([c]);
      expect(await ids(`segment.id[nin]:[${s2.id}]`)).toEqual([a, b]);
      expect(await ids(`segment.id[eq]:999999`)).toEqual([]);
      expectError(await get(`/api/contacts?filter=${encodeURIComponent("segment.id[eq]:1' OR 1=1")}`), 400, 'validation_failed');
    });

    it('previews a filter without saving anything', async () => {
      const t = tag();
      const [a, b] = await contactsInOrder([{ title: t }, { title: t }]);
      const before = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM segments`);
      const res = await post('/api/segments/preview', { filter: byTitle(t) }, contactReader);
      expect(res.status).toBe(200);
      expect(res.body.count).toBe(2);
      expect(res.body.sample.map((x: { id: number }) => x.id)).toEqual([a, b]);
      const after = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM segments`);
      expect(after[0].n).toBe(before[0].n);
      expectError(await post('/api/segments/preview', { filter: 'segment.id[eq]:1' }), 400, 'validation_failed');
      expectError(await post('/api/segments/preview', {}), 400, 'validation_failed');
    });
  });

  describe('campaigns that mirror a segment', () => {
    it("take the segment's members on set, follow its changes, refuse changes by hand, and keep their members when detached", async () => {
      const since = await head();
      const s = await newSegment({ type: 'static' });
      const [a, b, c, d] = await contactsInOrder([{}, {}, {}, {}]);
      await post(`/api/segments/${s.id}/contacts/batch`, { add: [a, b] });
      const cp = await post('/api/campaigns', { name: 'Mirror' });
      expect(cp.status).toBe(201);
      const campaignId = cp.body.campaign.id as number;
      expect((await post(`/api/campaigns/${campaignId}/contact/${c}/add`, {})).status).toBe(200);

      const set = await patch(`/api/campaigns/${campaignId}`, { segmentId: s.id });
      expect(set.status).toBe(200);
      expect(set.body.campaign.segmentId).toBe(s.id);
      // The hand-added member left, the segment's joined.
      expect(await campaignMemberIds(campaignId)).toEqual([a, b]);

      await post(`/api/segments/${s.id}/contacts/batch`, { add: [d], remove: [a] });
      expect(await campaignMemberIds(campaignId)).toEqual([b, d]);

      expectError(await post(`/api/campaigns/${campaignId}/contact/${c}/add`, {}), 409, 'conflict');
      expectError(await post(`/api/campaigns/${campaignId}/contact/${b}/remove`, {}), 409, 'conflict');
      expectError(await post(`/api/campaigns/${campaignId}/contacts/batch`, { add: [c] }), 409, 'conflict');
      expectError(await patch(`/api/campaigns/${campaignId}`, { segmentId: 999999 }), 400, 'validation_failed');

      const events = (await eventsSince(since, 'campaign.contact_added,campaign.contact_removed')).filter((e) => e.data.campaignId === campaignId);
      // One event per membership change: the hand add, the mirror on set, the segment's batch.
      const seen = events.map((e) => `${e.type}:${String(e.data.contactId)}`);
      expect(seen[0]).toBe(`campaign.contact_added:${c}`);
      expect(seen.slice(1, 4).sort()).toEqual([`campaign.contact_added:${a}`, `campaign.contact_added:${b}`, `campaign.contact_removed:${c}`].sort());
      expect(seen.slice(4).sort()).toEqual([`campaign.contact_added:${d}`, `campaign.contact_removed:${a}`].sort());

      // Cleared: the members stay and are managed by hand again.
      const cleared = await patch(`/api/campaigns/${campaignId}`, { segmentId: null });
      expect(cleared.body.campaign.segmentId).toBeNull();
      expect(await campaignMemberIds(campaignId)).toEqual([b, d]);
      expect((await post(`/api/campaigns/${campaignId}/contact/${c}/add`, {})).status).toBe(200);

      // A segment's deletion detaches the campaigns that mirror it (with campaign.updated).
      const again = await patch(`/api/campaigns/${campaignId}`, { segmentId: s.id });
      expect(again.body.campaign.segmentId).toBe(s.id);
      expect(await campaignMemberIds(campaignId)).toEqual([b, d]);
      expect((await del(`/api/segments/${s.id}`)).status).toBe(200);
      const after = await get(`/api/campaigns/${campaignId}`);
      expect(after.body.campaign.segmentId).toBeNull();
      expect(await campaignMemberIds(campaignId)).toEqual([b, d]);
    });

    it('a campaign created with a dynamic segment follows contact changes', async () => {
      const t = tag();
      const a = await newContact({ title: t });
      const b = await newContact({ title: 'not yet' });
      const s = await newSegment({ type: 'dynamic', filter: byTitle(t) });
      const cp = await post('/api/campaigns/new', { name: 'Dynamic mirror', segmentId: s.id });
      expect(cp.status).toBe(201);
      const campaignId = cp.body.campaign.id as number;
      await waitUntil('campaign built', async () => ((await campaignMemberIds(campaignId)).join() === String(a) ? true : undefined), 20000);
      // What the refresher saw, printed when a wait below times out (it failed once in CI with no trace).
      const explain = async () =>
        JSON.stringify({
          segment: await app.sql(`SELECT built_version, filter_version, build_status, build_error FROM segments WHERE id = $1`, [s.id]),
          members: await app.sql(`SELECT contact_id FROM segment_members WHERE segment_id = $1 ORDER BY 1`, [s.id]),
          cursor: await app.sql(`SELECT r.last_sequence, f.last_sequence AS feed, f.pruned_through FROM segment_refresh_state r, event_feed_state f`),
          unnumbered: await app.sql(`SELECT count(*)::int AS n FROM events e WHERE NOT EXISTS (SELECT 1 FROM event_transactions t WHERE t.tx = e.tx)`),
          logs: app.logs
            .join('')
            .split('\n')
            .filter((l) => /"level":"(warn|error)"/.test(l))
            .slice(-10),
        });
      const joins = async (what: string, ids: number[]) => {
        try {
          await waitUntil(what, async () => ((await campaignMemberIds(campaignId)).join() === ids.join() ? true : undefined), 20000);
        } catch (e) {
          throw new Error(`${(e as Error).message}: ${await explain()}`, { cause: e });
        }
      };
      await patch(`/api/contacts/${b}`, { title: t });
      await joins('b joins the campaign', [a, b]);
      await patch(`/api/contacts/${a}`, { title: 'gone' });
      await joins('a leaves the campaign', [b]);
    });
  });

  describe('concurrency', () => {
    it('parallel edits of different properties all land; parallel filter changes end built for the last filter', async () => {
      const s = await newSegment({ type: 'static', name: 'Race' });
      const [n, d] = await Promise.all([patch(`/api/segments/${s.id}`, { name: 'Race 2' }), patch(`/api/segments/${s.id}`, { description: 'desc' })]);
      expect([n.status, d.status]).toEqual([200, 200]);
      expect(await segment(s.id)).toMatchObject({ name: 'Race 2', description: 'desc' });

      const tags = Array.from({ length: 6 }, () => tag());
      const contacts = await Promise.all(tags.map((t) => newContact({ title: t })));
      const dyn = await newSegment({ type: 'dynamic', filter: byTitle(tags[0]) });
      const edits = await Promise.all(tags.map((t) => patch(`/api/segments/${dyn.id}`, { filter: byTitle(t) })));
      expect(edits.map((r) => r.status)).toEqual(tags.map(() => 200));
      const final = await ready(dyn.id);
      const winner = tags.indexOf((final.filter as { value: string }).value);
      expect(winner).toBeGreaterThanOrEqual(0);
      expect(await memberIds(dyn.id)).toEqual([contacts[winner]]);
    });

    it('a segment deleted while campaigns are pointed at it: every request answers (200 or 400), none deadlocks', async () => {
      const s = await newSegment({ type: 'static' });
      const a = await newContact();
      await post(`/api/segments/${s.id}/contacts/batch`, { add: [a] });
      const campaigns = await Promise.all([1, 2, 3].map((i) => post('/api/campaigns', { name: `Race mirror ${i}` })));
      const results = await Promise.all([
        ...campaigns.map((c) => patch(`/api/campaigns/${c.body.campaign.id as number}`, { segmentId: s.id })),
        del(`/api/segments/${s.id}`),
        ...campaigns.map((c) => patch(`/api/campaigns/${c.body.campaign.id as number}`, { name: 'Renamed' })),
      ]);
      for (const r of results) expect([200, 400]).toContain(r.status);
      expect(results[3].status).toBe(200);
      for (const c of campaigns) expect((await get(`/api/campaigns/${c.body.campaign.id as number}`)).body.campaign.segmentId).toBeNull();
    });

    it('parallel deletes: exactly one 200, the others 404; a delete during a rebuild waits for it', async () => {
      const t = tag();
      await contactsInOrder([{ title: t }, { title: t }, { title: t }]);
      const s = await newSegment({ type: 'dynamic', filter: byTitle(t) });
      const results = await Promise.all(Array.from({ length: 8 }, () => del(`/api/segments/${s.id}`)));
      expect(results.map((r) => r.status).sort()).toEqual([200, 404, 404, 404, 404, 404, 404, 404]);
      expect(await app.sql(`SELECT 1 FROM segment_members WHERE segment_id = $1`, [s.id])).toHaveLength(0);
    });
  });
});
