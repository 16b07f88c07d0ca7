import { beforeAll, describe, expect, it } from '@jest/globals';
import { Clock } from '../common/clock.js';
import { Transactions } from '../database/transactions.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { PointGroupsService } from '../point-groups/point-groups.service.js';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { waitUntil } from '../../test/support/wait.js';
import { ScoringJobsService } from './scoring-jobs.service.js';
import { ScoringRulesService } from './scoring-rules.service.js';
import { ScoringService } from './scoring.service.js';

const DAY = 86_400_000;

describe('ScoringService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let scoring: ScoringService;
  let rules: ScoringRulesService;
  let jobs: ScoringJobsService;
  let contacts: ContactsService;
  let groups: PointGroupsService;
  let clock: Clock;

  beforeAll(() => {
    scoring = spec.ctx.get(ScoringService);
    rules = spec.ctx.get(ScoringRulesService);
    jobs = spec.ctx.get(ScoringJobsService);
    contacts = spec.ctx.get(ContactsService);
    groups = spec.ctx.get(PointGroupsService);
    clock = spec.ctx.get(Clock);
  });

  const points = async (id: number) => (await contacts.get(id)).points;
  const ledgerSum = async (id: number) =>
    Number((await spec.ctx.query<{ s: string }>(`SELECT coalesce(sum(delta), 0)::text AS s FROM point_ledger WHERE contact_id = $1`, [id]))[0].s);
  const tierEvents = async (id: number) =>
    (
      await spec.ctx.query<{ type: string; data: { pointGroup: { id: number }; points: number } }>(
        `SELECT type, data FROM events WHERE type LIKE 'contact.point_group_%' AND (data->>'contactId')::int = $1 ORDER BY insert_order`,
        [id],
      )
    ).map((e) => `${e.type.slice('contact.point_group_'.length)}:${e.data.pointGroup.id}@${e.data.points}`);

  it('adds points with a ledger row, answers them on the record, and keeps the history newest first', async () => {
    const id = await spec.ctx.contact('Ledger');
    const first = await scoring.addManualPoints(id, 5, ' first ', spec.who);
    expect(first).toMatchObject({ points: 5, pointChange: { contactId: id, delta: 5, reason: 'first', source: 'manual', by: { id: spec.who.userId } } });
    await scoring.addManualPoints(id, -2, 'second', spec.who);
    expect(await points(id)).toBe(3);
    const h = await scoring.history(id, {});
    expect(h.total).toBe(2);
    expect(h.pointChanges.map((c) => c.delta)).toEqual([-2, 5]);
    const paged = await scoring.history(id, { after: '', limit: '1' });
    expect(paged.pointChanges.map((c) => c.delta)).toEqual([-2]);
    const next = await scoring.history(id, { after: paged.next, limit: '1' });
    expect(next.pointChanges.map((c) => c.delta)).toEqual([5]);
  });

  it('refuses delta 0, beyond ±1,000,000 and beyond ±2^31, naming delta; 404 for a missing contact', async () => {
    const id = await spec.ctx.contact('Bounds');
    for (const delta of [0, 1_000_001, -1_000_001, 1.5]) {
      expect((await spec.ctx.failure(scoring.addManualPoints(id, delta, 'x', spec.who))).details?.[0].field).toBe('delta');
    }
    await spec.ctx.query(`INSERT INTO point_ledger (contact_id, delta, reason, source, at) VALUES ($1, 2147483000, 'arrange', 'import', now())`, [id]);
    await spec.ctx.query(`UPDATE contacts SET points = 2147483000 WHERE id = $1`, [id]);
    const e = await spec.ctx.failure(scoring.addManualPoints(id, 1000, 'too far', spec.who));
    expect(e.status).toBe(400);
    expect(e.details?.[0].field).toBe('delta');
    expect(await points(id)).toBe(2147483000);
    expect((await spec.ctx.failure(scoring.addManualPoints(987654321, 1, 'x', spec.who))).status).toBe(404);
  });

  it('never loses a delta: 100 parallel changes of one contact sum exactly, and points equal the ledger', async () => {
    const id = await spec.ctx.contact('Parallel');
    const deltas = Array.from({ length: 100 }, (_, i) => (i % 3 === 0 ? -(i + 1) : i + 1));
    await Promise.all(deltas.map((d) => scoring.addManualPoints(id, d, 'parallel', spec.who)));
    const expected = deltas.reduce((a, b) => a + b, 0);
    expect(await points(id)).toBe(expected);
    expect(await ledgerSum(id)).toBe(expected);
  });

  it('writes point_group_entered / _left every time the points cross a published range, both directions', async () => {
    const warm = await groups.create({ name: 'Warm', minimumPoints: 10, maximumPoints: 19 }, spec.who);
    const hot = await groups.create({ name: 'Hot', minimumPoints: 20, maximumPoints: 100 }, spec.who);
    await groups.create({ name: 'Draft', minimumPoints: 0, maximumPoints: 1000, isPublished: false }, spec.who);
    const id = await spec.ctx.contact('Tiers');
    for (let round = 0; round < 2; round++) {
      await scoring.addPoints(id, 15, { source: 'manual', reason: 'up' });
      await scoring.addPoints(id, 10, { source: 'workflow', reason: 'up more', details: { enrollmentId: 1, stepId: 's1' } });
      await scoring.addPoints(id, -25, { source: 'manual', reason: 'down' });
    }
    expect(await tierEvents(id)).toEqual([
      `entered:${warm.id}@15`,
      `left:${warm.id}@25`,
      `entered:${hot.id}@25`,
      `left:${hot.id}@0`,
      `entered:${warm.id}@15`,
      `left:${warm.id}@25`,
      `entered:${hot.id}@25`,
      `left:${hot.id}@0`,
    ]);
    await scoring.addPoints(id, 12, { source: 'manual', reason: 'warm' });
    const c = await contacts.get(id);
    expect(c.pointGroups).toEqual([{ id: warm.id, name: 'Warm', color: null }]);
    expect((await contacts.list({ filter: `pointGroup.id[eq]:${warm.id}`, limit: '200' })).contacts.map((x) => x.id)).toContain(id);
    expect((await contacts.list({ filter: `pointGroup.id[eq]:${hot.id}`, limit: '200' })).contacts.map((x) => x.id)).not.toContain(id);
    expect((await contacts.list({ filter: 'points[gte]:12', orderBy: 'points', limit: '200' })).contacts.map((x) => x.id)).toContain(id);
    await groups.remove(warm.id);
    await groups.remove(hot.id);
  });

  it('addPointsMany: many contacts in one transaction, each change as one at a time, with the tier events of every step', async () => {
    const warm = await groups.create({ name: 'Many warm', minimumPoints: 10, maximumPoints: 19 }, spec.who);
    const [a, b] = [await spec.ctx.contact('Many A'), await spec.ctx.contact('Many B')];
    await spec.ctx.query(`INSERT INTO point_ledger (contact_id, delta, reason, source, at) VALUES ($1, 2147483000, 'arrange', 'import', now())`, [b]);
    await spec.ctx.query(`UPDATE contacts SET points = 2147483000 WHERE id = $1`, [b]);
    const rule = { source: 'rule' as const, reason: 'batch', ruleId: 987_001, sourceEventId: `many-${Date.now()}` };
    const wf = { source: 'workflow' as const, reason: 'step', details: { enrollmentId: 7, stepId: 's1' } };
    const outcomes = await scoring.addPointsMany([
      { contactId: a, delta: 12, context: wf },
      { contactId: b, delta: 600, context: wf },
      { contactId: 987654321, delta: 1, context: wf },
      { contactId: a, delta: 0, context: wf },
      { contactId: a, delta: -10, context: rule },
      { contactId: a, delta: 5, context: rule }, // the same (rule, event) pair again
      { contactId: b, delta: 1000, context: wf }, // beyond 2^31 after the first
      { contactId: a, delta: 9, context: wf },
    ]);
    expect(outcomes.map((o) => `${o.status}:${o.points}`)).toEqual([
      'applied:12',
      'applied:2147483600',
      'not_found:null',
      'invalid_delta:12',
      'applied:2',
      'duplicate:2',
      'out_of_bounds:2147483600',
      'applied:11',
    ]);
    expect([await points(a), await points(b)]).toEqual([11, 2147483600]);
    expect([await ledgerSum(a), await ledgerSum(b)]).toEqual([11, 2147483600]);
    expect(await tierEvents(a)).toEqual([`entered:${warm.id}@12`, `left:${warm.id}@2`, `entered:${warm.id}@11`]);
    expect((await scoring.history(a, {})).pointChanges.map((c) => [c.delta, c.source])).toEqual([
      [9, 'workflow'],
      [-10, 'rule'],
      [12, 'workflow'],
    ]);
    // Again: the rule's pair is taken, the others apply again.
    const again = await scoring.addPointsMany([{ contactId: a, delta: -10, context: rule }]);
    expect(again.map((o) => o.status)).toEqual(['duplicate']);
    await groups.remove(warm.id);
  });

  it('addPointsMany never loses a delta: parallel batches over the same contacts sum exactly', async () => {
    const ids = [await spec.ctx.contact('Many P1'), await spec.ctx.contact('Many P2'), await spec.ctx.contact('Many P3')];
    const wf = { source: 'workflow' as const, reason: 'parallel' };
    const batches = Array.from({ length: 20 }, (_, i) =>
      (i % 2 ? [...ids] : [...ids].reverse()).map((contactId, k) => ({ contactId, delta: i + k + 1, context: wf })),
    );
    await Promise.all(batches.map((batch) => scoring.addPointsMany(batch)));
    for (const id of ids) {
      const expected = batches.reduce((sum, batch) => sum + (batch.find((c) => c.contactId === id)?.delta ?? 0), 0);
      expect(await points(id)).toBe(expected);
      expect(await ledgerSum(id)).toBe(expected);
    }
  });

  it('validates rules: exactly one source, a known event type, a filter that compiles, delta not 0', async () => {
    const bad = async (body: object) => (await spec.ctx.failure(rules.create({ name: 'r', delta: 1, on: {}, ...body }, spec.who))).details?.[0].field;
    expect(await bad({ on: {} })).toBe('on');
    expect(await bad({ on: { recordEvent: 'contact.updated', trackedEvent: 'x' } })).toBe('on');
    expect(await bad({ on: { recordEvent: 'contact.nope' } })).toBe('on.recordEvent');
    expect(await bad({ on: { recordEvent: 'contact.updated', filter: 'nope[eq]:1' } })).toMatch(/^on\.filter/);
    expect(await bad({ on: { trackedEvent: 'Viewed', filter: 'name[eq]:x' } })).toMatch(/^on\.filter/);
    expect(await bad({ on: { recordEvent: 'contact.updated' }, delta: 0 })).toBe('delta');
    const r = await rules.create({ name: 'ok', on: { trackedEvent: 'Viewed', filter: 'properties.plan[eq]:pro' }, delta: 3 }, spec.who);
    expect(r.on).toEqual({ trackedEvent: 'Viewed', filter: { field: 'properties.plan', op: 'eq', value: 'pro' } });
    await rules.remove(r.id);
  });

  it('applyTrackedEvent: once per (rule, event), within maxPerContact and the cooldown (clock moved)', async () => {
    const id = await spec.ctx.contact('Tracked');
    const rule = await rules.create(
      { name: 'pricing', on: { trackedEvent: 'Pricing Viewed', filter: 'properties.plan[eq]:pro' }, delta: 7, maxPerContact: 2, cooldown: '1d' },
      spec.who,
    );
    const ev = (eventId: string, plan = 'pro') =>
      scoring.applyTrackedEvent({ source: 'tracked', name: 'Pricing Viewed', properties: { plan }, contactId: id, eventId, occurredAt: clock.now() });
    expect(await ev('t1')).toBe(1);
    expect(await ev('t1')).toBe(0); // the same event again
    expect(await ev('t2')).toBe(0); // within the cooldown
    expect(await ev('t3', 'free')).toBe(0); // the filter does not match
    clock.travel(DAY + 1000);
    expect(await ev('t4')).toBe(1);
    clock.travel(DAY + 1000);
    expect(await ev('t5')).toBe(0); // maxPerContact reached
    expect(await points(id)).toBe(14);
    const h = await scoring.history(id, {});
    expect(h.pointChanges.map((c) => [c.source, c.ruleId, c.sourceEventId])).toEqual([
      ['rule', rule.id, 't4'],
      ['rule', rule.id, 't1'],
    ]);
    await rules.remove(rule.id);
  });

  it('applyTrackedEvents: a batch of names and properties, each rule on its name and filter, in order; the batch again applies nothing', async () => {
    const [a, b] = [await spec.ctx.contact('Batch A'), await spec.ctx.contact('Batch B')];
    const pro = await rules.create({ name: 'pro', on: { trackedEvent: 'Viewed', filter: 'properties.seats[gte]:5' }, delta: 10, maxPerContact: 2 }, spec.who);
    const any = await rules.create({ name: 'signup', on: { trackedEvent: 'Signed Up' }, delta: 3 }, spec.who);
    const ev = (eventId: string, contactId: number, name: string, properties: Record<string, unknown> = {}) => ({
      source: 'tracked' as const,
      name,
      properties,
      contactId,
      eventId,
      occurredAt: clock.now(),
    });
    const batch = [
      ev('b1', a, 'Viewed', { seats: 10 }),
      ev('b2', a, 'Viewed', { seats: 1 }),
      ev('b3', b, 'Signed Up'),
      ev('b4', a, 'Viewed', { seats: 7 }),
      ev('b5', a, 'Viewed', { seats: 9 }), // maxPerContact 2 reached by b1 and b4
      ev('b6', b, 'Other', { seats: 50 }),
    ];
    expect(await spec.ctx.get(Transactions).run((tx) => scoring.applyTrackedEvents(batch, tx))).toBe(3);
    expect(await spec.ctx.get(Transactions).run((tx) => scoring.applyTrackedEvents(batch, tx))).toBe(0);
    expect([await points(a), await points(b)]).toEqual([20, 3]);
    expect((await scoring.history(a, {})).pointChanges.map((c) => c.sourceEventId)).toEqual(['b4', 'b1']);
    await rules.remove(pro.id);
    await rules.remove(any.id);
  });

  it('applies a recordEvent rule with a contact filter from the change feed, exactly once', async () => {
    const rule = await rules.create({ name: 'cto', on: { recordEvent: 'contact.updated', filter: 'title[eq]:CTO' }, delta: 4 }, spec.who);
    const a = await contacts.create({ name: 'A', email: `a-${Date.now()}@x.test` }, spec.who);
    const b = await contacts.create({ name: 'B', email: `b-${Date.now()}@x.test` }, spec.who);
    await contacts.patch(a.id, { title: 'CTO' }, spec.who);
    await contacts.patch(b.id, { title: 'Intern' }, spec.who);
    await contacts.patch(a.id, { name: 'A2' }, spec.who);
    await waitUntil(
      'the applier caught up',
      async () => {
        const read = await scoring.applyFeed();
        return read === 0 && (await points(a.id)) === 8;
      },
      10_000,
    );
    expect(await points(b.id)).toBe(0);
    // A replay of the same events (the cursor moved back) applies nothing twice.
    await spec.ctx.query(`UPDATE scoring_state SET last_sequence = 0`);
    await waitUntil('the replay', async () => (await scoring.applyFeed()) === 0, 10_000);
    expect(await points(a.id)).toBe(8);
    expect(await ledgerSum(a.id)).toBe(8);
    await rules.remove(rule.id);
  });

  it('decays once per contact and period (clock moved), as ledger rows source decay', async () => {
    const id = await spec.ctx.contact('Decay');
    await scoring.addManualPoints(id, 100, 'base', spec.who);
    await jobs.setSettings({ decay: { percent: 10, every: '30d' } });
    expect(await jobs.runDecay()).toBe(0);
    clock.travel(30 * DAY + 1000);
    await Promise.all([jobs.runDecay(), jobs.runDecay()]);
    await jobs.runDecay();
    expect(await points(id)).toBe(90);
    clock.travel(60 * DAY);
    await jobs.runDecay();
    expect(await points(id)).toBe(72); // two more periods: 90 → 81 → 72
    const decays = (await scoring.history(id, { filter: 'source[eq]:decay' })).pointChanges;
    expect(decays.map((c) => c.delta)).toEqual([-9, -9, -10]);
    expect(await ledgerSum(id)).toBe(72);
    await jobs.setSettings({ decay: null });
  });

  it('keeps points out of every index of contacts, so a change of points is a heap-only update', async () => {
    // docs/decisions/scoring-application.md: an index that reads `points` (a column, an expression or
    // a partial index's predicate) would make each change of points write an entry in all of them.
    const indexes = await spec.ctx.query<{ name: string }>(
      `SELECT i.indexrelid::regclass::text AS name FROM pg_index i
        WHERE i.indrelid = 'contacts'::regclass
          AND (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = 'points' AND a.attnum = ANY(i.indkey))
               OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') ~ '\\mpoints\\M'
               OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') ~ '\\mpoints\\M')`,
    );
    expect(indexes.map((i) => i.name)).toEqual([]);
    const options = await spec.ctx.query<{ o: string[] | null }>(`SELECT reloptions AS o FROM pg_class WHERE oid = 'contacts'::regclass`);
    expect(options[0].o).toContain('fillfactor=90');
  });

  it('recompute repairs a contact whose points differ from its ledger', async () => {
    const id = await spec.ctx.contact('Repair');
    await scoring.addManualPoints(id, 3, 'ok', spec.who);
    expect((await jobs.recompute()).repaired).toBe(0);
    await spec.ctx.query(`UPDATE contacts SET points = 50 WHERE id = $1`, [id]);
    const r = await jobs.recompute();
    expect(r.repaired).toBe(1);
    expect(await points(id)).toBe(3);
  });

  it('what-if predicts the point groups that publishing the drafts then gives', async () => {
    const g = await groups.create({ name: 'WhatIf', minimumPoints: 5, maximumPoints: 9 }, spec.who);
    // Events are stamped by the database's clock (not the business clock this file moves).
    const since = new Date(Date.now() - 1000).toISOString();
    const ids = [await spec.ctx.contact('W1'), await spec.ctx.contact('W2')];
    await contacts.patch(ids[0], { title: 'VP' }, spec.who);
    await contacts.patch(ids[0], { title: 'VP2' }, spec.who);
    await contacts.patch(ids[1], { title: 'VP' }, spec.who);
    const draft = { name: 'vp', on: { recordEvent: 'contact.updated', filter: 'title[startsWith]:VP' }, delta: 3 };
    const result = await jobs.whatIf(undefined, { rules: [draft], since });
    const outcome = (result.pointGroups as { id: number; now: number; wouldBe: number; entering: number; leaving: number }[]).find((x) => x.id === g.id);
    const before = (await contacts.list({ filter: `pointGroup.id[eq]:${g.id}`, limit: '200' })).contacts.length;
    expect(outcome).toMatchObject({ now: before, wouldBe: before + 1, entering: 1, leaving: 0 });
    // Published, then the same events again: the contacts end where the what-if said.
    const rule = await rules.create(draft, spec.who);
    await contacts.patch(ids[0], { title: 'VP' }, spec.who);
    await contacts.patch(ids[0], { title: 'VP2' }, spec.who);
    await contacts.patch(ids[1], { title: 'VP' }, spec.who);
    await waitUntil('the rules applied', async () => (await scoring.applyFeed()) === 0 && (await points(ids[1])) === 3, 10_000);
    const inGroup = (await contacts.list({ filter: `pointGroup.id[eq]:${g.id}`, limit: '200' })).contacts.length;
    expect(inGroup).toBe(outcome?.wouldBe);
    await rules.remove(rule.id);
    await groups.remove(g.id);
  });
});
