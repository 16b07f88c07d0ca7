import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { testClock } from './support/clock.js';
import { adminToken, createContact, feedHead, feedSince, tokenFor } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe('lead scoring', () => {
  const clock = testClock();
  let app: TestApp;
  let auth: string;
  let contactsOnly: string;
  let scoringRead: string;

  beforeAll(async () => {
    app = await startApp({ env: { ...clock.env, SCORING_DECAY_CHECK_MS: '300', SCORING_APPLY_INTERVAL_MS: '200' } });
    auth = await adminToken(app);
    contactsOnly = await tokenFor(app, 'contacts:read', { user: 'reader@example.com', plan: 'enterprise' });
    scoringRead = await tokenFor(app, 'scoring:read', { user: 'scorer@example.com', plan: 'enterprise' });
  });
  afterAll(async () => app?.stop());

  const post = (path: string, body: object, token = auth) => app.http.post(path).set('Authorization', token).send(body);
  const contactPoints = async (id: number) => {
    const res = await app.http.get(`/api/contacts/${id}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    return res.body.contact as { points: number; pointGroups: { id: number; name: string }[] };
  };
  const group = async (name: string, min: number, max: number) =>
    (await post('/api/point-groups', { name, minimumPoints: min, maximumPoints: max })).body.pointGroup.id as number;
  const job = (id: number) =>
    waitUntil(
      `scoring job ${id}`,
      async () => {
        const r = await app.http.get(`/api/scoring/jobs/${id}`).set('Authorization', auth);
        return r.body.job?.status === 'completed' || r.body.job?.status === 'failed' ? r.body.job : null;
      },
      20_000,
    );

  it('answers points and pointGroups on the record; points are not writable (400 naming the route)', async () => {
    const id = await createContact(app, auth);
    expect(await contactPoints(id)).toMatchObject({ points: 0, pointGroups: [] });
    const create = expectError(await post('/api/contacts', { name: 'P', email: 'p-points@x.test', points: 5 }), 400, 'validation_failed');
    expect(create.details).toEqual([{ field: 'points', message: expect.stringContaining('POST /api/contacts/{id}/points') }]);
    const patch = expectError(await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ points: 5 }), 400, 'validation_failed');
    expect(patch.details?.[0].field).toBe('points');
  });

  it('POST /api/contacts/{id}/points writes the ledger; history is cursor-paged newest first; bad input is a 400', async () => {
    const id = await createContact(app, auth);
    const res = await post(`/api/contacts/${id}/points`, { delta: 10, reason: 'webinar' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ points: 10, pointChange: { contactId: id, delta: 10, reason: 'webinar', source: 'manual', ruleId: null } });
    await post(`/api/contacts/${id}/points`, { delta: -3, reason: 'bounced' });
    expect((await contactPoints(id)).points).toBe(7);
    const page1 = await app.http.get(`/api/contacts/${id}/points/history?after=&limit=1`).set('Authorization', contactsOnly);
    expect(page1.status).toBe(200);
    expect(page1.body.pointChanges.map((c: { delta: number }) => c.delta)).toEqual([-3]);
    const page2 = await app.http.get(`/api/contacts/${id}/points/history?after=${page1.body.next}&limit=1`).set('Authorization', auth);
    expect(page2.body.pointChanges.map((c: { delta: number }) => c.delta)).toEqual([10]);
    for (const body of [
      { delta: 0, reason: 'x' },
      { delta: 1_000_001, reason: 'x' },
      { delta: 1, reason: ' ' },
      { delta: '1', reason: 'x' },
      { reason: 'x' },
    ]) {
      expectError(await post(`/api/contacts/${id}/points`, body), 400, 'validation_failed');
    }
    expectError(await post('/api/contacts/99999999/points', { delta: 1, reason: 'x' }), 404, 'not_found');
    expectError(await post(`/api/contacts/${id}/points`, { delta: 1, reason: 'x' }, contactsOnly), 403, 'forbidden');
    expectError(await app.http.get('/api/contacts/99999999/points/history').set('Authorization', auth), 404, 'not_found');
  });

  it('100 parallel point changes of one contact sum exactly', async () => {
    const id = await createContact(app, auth);
    const deltas = Array.from({ length: 100 }, (_, i) => (i % 4 === 0 ? -(i + 1) : i + 1));
    const answers = await Promise.all(deltas.map((delta) => post(`/api/contacts/${id}/points`, { delta, reason: 'parallel' })));
    expect(answers.map((a) => a.status).filter((s) => s !== 201)).toEqual([]);
    const expected = deltas.reduce((a, b) => a + b, 0);
    expect((await contactPoints(id)).points).toBe(expected);
    const history = await app.http.get(`/api/contacts/${id}/points/history?limit=200`).set('Authorization', auth);
    expect(history.body.total).toBe(100);
    expect(history.body.pointChanges.reduce((a: number, c: { delta: number }) => a + c.delta, 0)).toBe(expected);
  });

  it('tiers: entered and left in both directions, twice, with the contacts filter on points and pointGroup.id', async () => {
    const cold = await group('Cold', 0, 9);
    const hot = await group('Hot', 10, 1000);
    const id = await createContact(app, auth);
    const cursor = await feedHead(app, auth);
    for (let i = 0; i < 2; i++) {
      await post(`/api/contacts/${id}/points`, { delta: 12, reason: 'up' });
      expect((await contactPoints(id)).pointGroups.map((g) => g.id)).toEqual([hot]);
      await post(`/api/contacts/${id}/points`, { delta: -12, reason: 'down' });
      expect((await contactPoints(id)).pointGroups.map((g) => g.id)).toEqual([cold]);
    }
    const events = (await feedSince(app, auth, cursor, 'contact.point_group_entered,contact.point_group_left')).filter((e) => e.data.contactId === id);
    const seen = events.map((e) => `${e.type.slice(20)}:${(e.data.pointGroup as { id: number }).id}`);
    expect(seen).toEqual([
      `left:${cold}`,
      `entered:${hot}`,
      `left:${hot}`,
      `entered:${cold}`,
      `left:${cold}`,
      `entered:${hot}`,
      `left:${hot}`,
      `entered:${cold}`,
    ]);
    expect(events[1].data).toMatchObject({ id, contactId: id, points: 12, previousPoints: 0, pointGroup: { id: hot, name: 'Hot', minimumPoints: 10 } });
    await post(`/api/contacts/${id}/points`, { delta: 15, reason: 'up' });
    const inHot = await app.http.get(`/api/contacts?filter=pointGroup.id[eq]:${hot}&limit=200`).set('Authorization', auth);
    expect(inHot.body.contacts.map((c: { id: number }) => c.id)).toContain(id);
    const byPoints = await app.http.get('/api/contacts?filter=points[gte]:15&orderBy=points&orderByDir=desc&limit=200').set('Authorization', auth);
    expect(byPoints.body.contacts.map((c: { id: number }) => c.id)).toContain(id);
    await app.http.delete(`/api/point-groups/${cold}`).set('Authorization', auth);
    await app.http.delete(`/api/point-groups/${hot}`).set('Authorization', auth);
  });

  it('scoring rules: every route form, permissions, events and bad input', async () => {
    const cursor = await feedHead(app, auth);
    const body = { name: 'Demo', on: { recordEvent: 'deal.won' }, delta: 5 };
    const created = await post('/api/scoring-rules/new', body);
    expect(created.status).toBe(201);
    expect(created.body.scoringRule).toMatchObject({
      name: 'Demo',
      isPublished: true,
      on: { recordEvent: 'deal.won', filter: null },
      repeatable: true,
      maxPerContact: null,
    });
    const id = created.body.scoringRule.id as number;
    expect((await post('/api/scoring_rules', { ...body, name: 'Other spelling' })).status).toBe(201);
    expect((await app.http.get(`/api/scoring-rules/${id}`).set('Authorization', scoringRead)).body.scoringRule.id).toBe(id);
    expect((await app.http.get('/api/scoring-rules?filter=name[eq]:Demo').set('Authorization', scoringRead)).body.total).toBe(1);
    expect((await post('/api/scoring-rules/search', { filter: { field: 'on.recordEvent', op: 'eq', value: 'deal.won' } }, scoringRead)).body.total).toBe(2);
    expectError(await post('/api/scoring-rules', body, scoringRead), 403, 'forbidden');
    const patched = await app.http.patch(`/api/scoring-rules/${id}/edit`).set('Authorization', auth).send({ delta: 6, cooldown: '1d' });
    expect(patched.body.scoringRule).toMatchObject({ delta: 6, cooldown: '1d', name: 'Demo' });
    const replaced = await app.http
      .put(`/api/scoring-rules/${id}`)
      .set('Authorization', auth)
      .send({ ...body, name: 'Replaced' });
    expect(replaced.status).toBe(200);
    expect(replaced.body.scoringRule).toMatchObject({ name: 'Replaced', cooldown: null, delta: 5 });
    expect((await app.http.put('/api/scoring-rules/987654').set('Authorization', auth).send(body)).status).toBe(201);
    const bad: [object, string][] = [
      [{ ...body, on: {} }, 'on'],
      [{ ...body, on: { recordEvent: 'contact.nope' } }, 'on.recordEvent'],
      [{ ...body, on: { recordEvent: 'contact.updated', filter: 'nope[eq]:1' } }, 'on.filter.field'],
      [{ ...body, delta: 0 }, 'delta'],
      [{ ...body, delta: 1_000_001 }, 'delta'],
      [{ ...body, cooldown: 'soon' }, 'cooldown'],
    ];
    for (const [b, field] of bad)
      expect(expectError(await post('/api/scoring-rules', b), 400, 'validation_failed').details?.map((d) => d.field)).toContain(field);
    const deletes = await Promise.all([1, 2, 3].map(() => app.http.delete(`/api/scoring-rules/${id}/delete`).set('Authorization', auth)));
    expect(deletes.map((d) => d.status).sort()).toEqual([200, 404, 404]);
    const types = (await feedSince(app, auth, cursor, 'scoring_rule.created,scoring_rule.updated,scoring_rule.deleted')).map((e) => e.type);
    expect(types.filter((t) => t === 'scoring_rule.deleted')).toHaveLength(1);
    expect(types).toContain('scoring_rule.updated');
    for (const r of (await app.http.get('/api/scoring-rules?limit=200').set('Authorization', auth)).body.scoringRules as { id: number }[]) {
      await app.http.delete(`/api/scoring-rules/${r.id}`).set('Authorization', auth);
    }
  });

  it('a rule on contact.updated with a filter gives points within 5 s, to matching contacts only', async () => {
    const rule = (await post('/api/scoring-rules', { name: 'CTO', on: { recordEvent: 'contact.updated', filter: 'title[eq]:CTO' }, delta: 20 })).body
      .scoringRule;
    const cto = await createContact(app, auth);
    const intern = await createContact(app, auth);
    await app.http.patch(`/api/contacts/${cto}`).set('Authorization', auth).send({ title: 'CTO' });
    await app.http.patch(`/api/contacts/${intern}`).set('Authorization', auth).send({ title: 'Intern' });
    await waitUntil('the rule applied', async () => (await contactPoints(cto)).points === 20, 5_000);
    const history = await app.http.get(`/api/contacts/${cto}/points/history`).set('Authorization', auth);
    expect(history.body.pointChanges[0]).toMatchObject({ source: 'rule', ruleId: rule.id, delta: 20, sourceEventId: expect.any(String) });
    expect((await contactPoints(intern)).points).toBe(0);
    await app.http.delete(`/api/scoring-rules/${rule.id}`).set('Authorization', auth);
  });

  it('a rule on a tracked event, through the intake: properties filter, maxPerContact and cooldown (clock moved), a replayed messageId applied once', async () => {
    const writeKey = `Basic ${Buffer.from(`${auth.slice('Bearer '.length)}:`).toString('base64')}`;
    const pricing = (
      await post('/api/scoring-rules', {
        name: 'Pricing pro',
        on: { trackedEvent: 'Pricing Viewed', filter: 'properties.plan[eq]:pro' },
        delta: 100,
        maxPerContact: 2,
        cooldown: '1d',
      })
    ).body.scoringRule;
    // Every stored view gives 1 point (no filter, no limit): the points tell how many events were applied.
    const anyView = (await post('/api/scoring-rules', { name: 'Any view', on: { trackedEvent: 'Pricing Viewed' }, delta: 1 })).body.scoringRule;
    const userId = `scored-${Date.now()}`;
    let n = 0;
    const track = async (plan: string, messageId = `${userId}-${++n}`) => {
      const r = await app.http
        .post('/api/ingest/v1/track')
        .set('Authorization', writeKey)
        .send({ userId, event: 'Pricing Viewed', properties: { plan }, messageId, timestamp: clock.now().toISOString() });
      expect(r.status).toBe(200);
      return messageId;
    };
    const applied = (points: number) =>
      waitUntil(
        `${points} points`,
        async () => {
          const c = (await app.http.get(`/api/contacts?filter=externalId[eq]:${userId}`).set('Authorization', auth)).body.contacts[0] as
            { id: number; points: number } | undefined;
          return c?.points === points ? c.id : null;
        },
        5_000,
      );
    const first = await track('pro');
    const id = await applied(101);
    await track('pro', first); // the same messageId again: stored once, applied once
    await track('pro'); // within the cooldown: only the 1 point
    await track('free'); // the filter does not match: only the 1 point
    await applied(103);
    clock.travel(DAY + 1_000);
    await track('pro'); // the cooldown passed: the second of maxPerContact 2
    await applied(204);
    clock.travel(DAY + 1_000);
    await track('pro'); // maxPerContact reached
    await applied(205);
    const history = await app.http.get(`/api/contacts/${id}/points/history?filter=ruleId[eq]:${pricing.id}`).set('Authorization', auth);
    expect(history.body.total).toBe(2);
    expect(history.body.pointChanges[0]).toMatchObject({ source: 'rule', delta: 100, details: { trackedEvent: 'Pricing Viewed' } });
    expect(new Set(history.body.pointChanges.map((c: { sourceEventId: string }) => c.sourceEventId)).size).toBe(2);
    for (const r of [pricing, anyView]) await app.http.delete(`/api/scoring-rules/${r.id}`).set('Authorization', auth);
  });

  it('decays once per contact and period as ledger rows (clock moved)', async () => {
    const id = await createContact(app, auth);
    await post(`/api/contacts/${id}/points`, { delta: 200, reason: 'base' });
    expectError(await post('/api/scoring/settings', { decay: { percent: 0, every: '30d' } }), 400, 'validation_failed');
    expectError(await post('/api/scoring/settings', { decay: { percent: 10, every: 'monthly' } }), 400, 'validation_failed');
    const set = await post('/api/scoring/settings', { decay: { percent: 10, every: '30d' } });
    expect(set.status).toBe(200);
    expect((await app.http.get('/api/scoring/settings').set('Authorization', scoringRead)).body.settings.decay).toMatchObject({ percent: 10, every: '30d' });
    clock.travel(30 * DAY + 5_000);
    await waitUntil('the first decay', async () => (await contactPoints(id)).points === 180, 10_000);
    clock.travel(30 * DAY);
    await waitUntil('the second decay', async () => (await contactPoints(id)).points === 162, 10_000);
    // More runs of the job within the same period change nothing.
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await contactPoints(id)).points).toBe(162);
    const decays = await app.http.get(`/api/contacts/${id}/points/history?filter=source[eq]:decay`).set('Authorization', auth);
    expect(decays.body.pointChanges.map((c: { delta: number }) => c.delta)).toEqual([-18, -20]);
    expect((await post('/api/scoring/settings', { decay: null })).body.settings).toEqual({ decay: null });
  });

  it('recompute (202) finds nothing to repair; what-if (202) answers per point group', async () => {
    const started = await post('/api/scoring/recompute', {});
    expect(started.status).toBe(202);
    expect(started.body.job).toMatchObject({ kind: 'recompute', status: 'queued' });
    expect(await job(started.body.job.id)).toMatchObject({ status: 'completed', result: { repaired: 0 } });
    const g = await group('Engaged', 3, 5);
    const since = new Date(Date.now() - 1_000).toISOString();
    const id = await createContact(app, auth);
    await app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ title: 'Buyer' });
    const whatIf = await post(
      '/api/scoring/what-if',
      { since, rules: [{ name: 'draft', on: { recordEvent: 'contact.updated', filter: 'title[eq]:Buyer' }, delta: 4 }] },
      scoringRead,
    );
    expect(whatIf.status).toBe(202);
    const done = await job(whatIf.body.job.id);
    const before = (await app.http.get(`/api/contacts?filter=pointGroup.id[eq]:${g}`).set('Authorization', auth)).body.total as number;
    expect(done.result.pointGroups).toEqual(expect.arrayContaining([{ id: g, name: 'Engaged', now: before, wouldBe: before + 1, entering: 1, leaving: 0 }]));
    expect((await contactPoints(id)).points).toBe(0);
    expectError(await post('/api/scoring/what-if', { since, rules: [{ name: 'x', on: { recordEvent: 'nope' }, delta: 1 }] }), 400, 'validation_failed');
    expectError(await post('/api/scoring/what-if', { since: 'yesterday', rules: [] }), 400, 'validation_failed');
  });

  it('what-if over record and tracked events equals what happens when its drafts are published and the same events come again (clock moved)', async () => {
    const warm = await group('WI warm', 5, 9);
    const hot = await group('WI hot', 10, 1000);
    const stamp = Date.now();
    const users = [0, 1, 2].map((i) => `wi-${stamp}-${i}`);
    const ids: number[] = [];
    for (const externalId of users) ids.push(await createContact(app, auth, { externalId }));
    await post(`/api/contacts/${ids[2]}/points`, { delta: 12, reason: 'was hot' });
    const title = (id: number, t: string) => app.http.patch(`/api/contacts/${id}`).set('Authorization', auth).send({ title: t });
    const writeKey = `Basic ${Buffer.from(`${auth.slice('Bearer '.length)}:`).toString('base64')}`;
    let sent = 0;
    const track = async (contact: number, plan: string) => {
      const r = await app.http
        .post('/api/ingest/v1/track')
        .set('Authorization', writeKey)
        .send({
          userId: users[contact],
          event: 'WI Pricing Viewed',
          properties: { plan },
          messageId: `${users[contact]}-${++sent}`,
          timestamp: clock.now().toISOString(),
        });
      expect(r.status).toBe(200);
    };
    // The tracked steps, each after the clock moved (from the previous step): [contact, plan] events.
    const steps: { after: number; events: [number, string][] }[] = [
      {
        after: 0,
        events: [
          [1, 'pro'],
          [2, 'pro'],
        ],
      },
      {
        after: HOUR,
        events: [
          [1, 'pro'],
          [2, 'free'],
        ],
      },
      {
        after: DAY + HOUR,
        events: [
          [1, 'pro'],
          [2, 'pro'],
        ],
      },
      { after: DAY + HOUR, events: [[1, 'pro']] },
    ];
    const recordEvents = async () => {
      for (const [i, t] of [
        [0, 'VP'],
        [0, 'VP Sales'],
        [1, 'VP'],
        [2, 'Intern'],
      ] as const)
        expect((await title(ids[i], t)).status).toBe(200);
    };
    /** The tracked steps; with `applied`, each step waits until its events were applied (the clock moves only then). */
    const trackedEvents = async (applied?: (contact: number, events: number) => Promise<unknown>) => {
      const seen = [0, 0, 0];
      for (const step of steps) {
        clock.travel(step.after);
        for (const [contact, plan] of step.events) {
          await track(contact, plan);
          seen[contact]++;
        }
        if (applied) for (const contact of new Set(step.events.map(([c]) => c))) await applied(contact, seen[contact]);
      }
    };
    const reset = async () => {
      for (const id of ids) expect((await title(id, 'Start')).status).toBe(200);
    };
    const drafts = [
      { name: 'WI vp', on: { recordEvent: 'contact.updated', filter: 'title[startsWith]:VP' }, delta: 6, maxPerContact: 1 },
      { name: 'WI intern', on: { recordEvent: 'contact.updated', filter: 'title[eq]:Intern' }, delta: -5, cooldown: '1h' },
      { name: 'WI pricing', on: { trackedEvent: 'WI Pricing Viewed', filter: 'properties.plan[eq]:pro' }, delta: 3, maxPerContact: 2, cooldown: '1d' },
      { name: 'WI any view', on: { trackedEvent: 'WI Pricing Viewed' }, delta: 1 },
    ];
    await reset();
    // Record events are stamped by the database (this machine's clock), tracked events by the moved
    // clock (ahead of it): the replay starts after the reset and holds both.
    const since = new Date().toISOString();
    await recordEvents();
    await trackedEvents();
    const started = await post('/api/scoring/what-if', { since, rules: drafts }, scoringRead);
    expect(started.status).toBe(202);
    const result = (await job(started.body.job.id)).result as {
      trackedEvents: number;
      applications: number;
      pointGroups: { id: number; now: number; wouldBe: number; entering: number; leaving: number }[];
    };
    expect(result.trackedEvents).toBe(7);
    const outcome = result.pointGroups;
    const inGroup = async (g: number) =>
      (await app.http.get(`/api/contacts?filter=pointGroup.id[eq]:${g}&limit=1`).set('Authorization', auth)).body.total as number;
    const [warmNow, hotNow] = [await inGroup(warm), await inGroup(hot)];
    // Contact 0 becomes warm (6); contact 1 hot (6 + 3+1, +1, +3+1, +1 = 16: the second pro view within the
    // cooldown, the fourth past maxPerContact); contact 2 stays hot (12 - 5 + 3+1, +1, +3+1 = 16).
    expect(outcome.find((o) => o.id === warm)).toEqual(expect.objectContaining({ now: warmNow, wouldBe: warmNow + 1, entering: 1, leaving: 0 }));
    expect(outcome.find((o) => o.id === hot)).toEqual(expect.objectContaining({ now: hotNow, wouldBe: hotNow + 1, entering: 1, leaving: 0 }));
    // What-if wrote nothing.
    expect((await Promise.all(ids.map(contactPoints))).map((c) => c.points)).toEqual([0, 0, 12]);

    // The drafts published, the same events again (the titles reset first, before the rules exist), the
    // clock moved as before, each tracked step applied before it moves on.
    await reset();
    const rules = await Promise.all(drafts.map(async (d) => (await post('/api/scoring-rules', d)).body.scoringRule.id as number));
    await recordEvents();
    await waitUntil('the record-event drafts applied', async () => (await Promise.all(ids.map(contactPoints))).map((c) => c.points).join() === '6,6,7', 5_000);
    const anyView = rules[3];
    await trackedEvents((contact, events) =>
      waitUntil(
        `${events} tracked events of contact ${contact} applied`,
        async () =>
          (await app.http.get(`/api/contacts/${ids[contact]}/points/history?filter=ruleId[eq]:${anyView}&limit=1`).set('Authorization', auth)).body.total ===
          events,
        5_000,
      ),
    );
    expect((await Promise.all(ids.map(contactPoints))).map((c) => c.points)).toEqual([6, 16, 16]);
    // As many applications as the what-if counted (3 record, 4 pricing, 7 any view).
    let applied = 0;
    for (const id of ids)
      applied += (await app.http.get(`/api/contacts/${id}/points/history?filter=source[eq]:rule&limit=1`).set('Authorization', auth)).body.total as number;
    expect(applied).toBe(result.applications);
    expect(result.applications).toBe(14);
    expect(await inGroup(warm)).toBe(outcome.find((o) => o.id === warm)?.wouldBe);
    expect(await inGroup(hot)).toBe(outcome.find((o) => o.id === hot)?.wouldBe);
    // The second VP event of the first contact gave nothing (maxPerContact 1), in the what-if as for real.
    const firstHistory = await app.http.get(`/api/contacts/${ids[0]}/points/history`).set('Authorization', auth);
    expect(firstHistory.body.pointChanges).toMatchObject([{ source: 'rule', ruleId: rules[0], delta: 6 }]);
    expect(firstHistory.body.total).toBe(1);
    const pricing = await app.http.get(`/api/contacts/${ids[1]}/points/history?filter=ruleId[eq]:${rules[2]}`).set('Authorization', auth);
    expect(pricing.body.total).toBe(2);
    for (const id of rules) await app.http.delete(`/api/scoring-rules/${id}`).set('Authorization', auth);
    for (const g of [warm, hot]) await app.http.delete(`/api/point-groups/${g}`).set('Authorization', auth);
  });
});
