import { describe, expect, it } from '@jest/globals';
import { appError, useServiceSpec } from '../../test/support/service-testing.js';
import { Clock } from '../common/clock.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { TrackedEventQueue } from './tracked-event-queue.repository.js';
import { TrackingIntakeService } from './tracking-intake.service.js';
import { TrackingService } from './tracking.service.js';
import { partitionName, monthStart } from './tracking.rules.js';

const DAY = 86_400_000;

/**
 * Tracked events on the real database: monthly partitions (ahead, on demand, dropped past the
 * retention by the injected clock), messageId dedupe, the daily counts and definitions written
 * with the insert, and the identity rules (userId, email, anonymousId; never a merge).
 */
describe('Tracking (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec({ TRACKING_RETENTION_DAYS: '60' });
  const intake = () => spec.ctx.get(TrackingIntakeService);
  const tracking = () => spec.ctx.get(TrackingService);
  const contacts = () => spec.ctx.get(ContactsService);
  const clock = () => spec.ctx.get(Clock);
  const events = () => spec.ctx.get(EventsService);
  let seq = 0;
  const uid = (p = 'u') => `${p}-${++seq}-${Date.now()}`;
  const partitions = async () =>
    (
      await spec.ctx.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'tracked_events'::regclass`,
      )
    ).map((r) => r.name);

  it('creates partitions ahead, on demand for a late event, and drops whole partitions past the retention (by the clock)', async () => {
    const now = clock().now();
    await tracking().maintain();
    const names = await partitions();
    for (let i = 0; i <= 2; i++) expect(names).toContain(partitionName(monthStart(now, i)));
    // A late event (40 days ago, within the 60-day retention) lands in its own month's partition.
    const past = new Date(now.getTime() - 40 * DAY);
    await intake().ingest('track', { event: 'late', userId: uid(), timestamp: past.toISOString() }, spec.who);
    expect(await partitions()).toContain(partitionName(monthStart(past)));
    const stored = await spec.ctx.query<{ tableoid: string }>(`SELECT tableoid::regclass::text AS tableoid FROM tracked_events WHERE name = 'late'`);
    expect(stored).toEqual([{ tableoid: partitionName(monthStart(past)) }]);
    // 130 days later, that month is past the retention: its partition is dropped, not its rows deleted.
    clock().travel(130 * DAY);
    try {
      const r = await tracking().maintain();
      expect(r.dropped).toContain(partitionName(monthStart(past)));
      expect(await partitions()).not.toContain(partitionName(monthStart(past)));
      expect(await spec.ctx.query(`SELECT 1 FROM tracked_events WHERE name = 'late'`)).toEqual([]);
    } finally {
      clock().travel(-130 * DAY);
    }
  });

  it('stores a retried batch once (messageId), with daily counts and definitions in the same transaction', async () => {
    const userId = uid();
    const batch = {
      batch: [
        { type: 'track', event: 'pricing_viewed', userId, messageId: `${userId}-1`, properties: { plan: 'pro', seats: 3 } },
        { type: 'track', event: 'pricing_viewed', userId, messageId: `${userId}-2`, properties: { plan: 'team', beta: true } },
        { type: 'track', event: 'pricing_viewed', userId, messageId: `${userId}-2`, properties: { plan: 'again' } },
      ],
    };
    // Sent three times, two of them at once: each messageId is stored once.
    await Promise.all([intake().ingest('batch', batch, spec.who), intake().ingest('batch', batch, spec.who)]);
    await intake().ingest('batch', batch, spec.who);
    const rows = await spec.ctx.query<{ contact_id: number }>(`SELECT contact_id FROM tracked_events WHERE user_id = $1`, [userId]);
    expect(rows).toHaveLength(2);
    const daily = await spec.ctx.query<{ count: number }>(`SELECT count FROM tracked_event_daily WHERE contact_id = $1 AND name = 'pricing_viewed'`, [
      rows[0].contact_id,
    ]);
    expect(daily).toEqual([{ count: 2 }]);
    const defs = await tracking().definitions();
    const def = defs.definitions.find((d) => d.name === 'pricing_viewed');
    expect(def).toMatchObject({ count: 2, properties: { plan: ['string'], seats: ['number'], beta: ['boolean'] } });
  });

  it('refuses a bad call naming its index and field, storing nothing of the batch', async () => {
    const userId = uid();
    const err = await appError(
      intake().ingest(
        'batch',
        {
          batch: [
            { type: 'track', event: 'ok', userId },
            { type: 'track', userId },
            { type: 'track', event: 'x', properties: [] },
          ],
        },
        spec.who,
      ),
    );
    expect(err.status).toBe(400);
    expect(err.details?.map((d) => d.field)).toEqual(['batch.1.event', 'batch.2.userId', 'batch.2.properties']);
    expect(await spec.ctx.query(`SELECT 1 FROM tracked_events WHERE user_id = $1`, [userId])).toEqual([]);
  });

  it('identify finds the contact by externalId, else by email (setting externalId), else creates it; track creates an unknown userId', async () => {
    const known = await contacts().create({ name: 'Ada', email: `${uid('ada')}@t.test` }, spec.who);
    const userId = uid();
    await intake().ingest('identify', { userId, traits: { email: known.email, firstName: 'Ada', lastName: 'Lovelace', title: 'Countess' } }, spec.who);
    expect(await contacts().get(known.id)).toMatchObject({ externalId: userId, name: 'Ada Lovelace', title: 'Countess' });
    // A second identify by userId finds it by externalId.
    await intake().ingest('identify', { userId, traits: { company: { name: 'Analytical Engines' } } }, spec.who);
    expect(await contacts().get(known.id)).toMatchObject({ company: 'Analytical Engines' });
    // track with an unknown userId creates the contact, named by the userId, without an email.
    const newcomer = uid();
    await intake().ingest('track', { userId: newcomer, event: 'signed_up' }, spec.who);
    const [row] = await spec.ctx.query<{ id: number; name: string; email: string | null }>(`SELECT id, name, email FROM contacts WHERE external_id = $1`, [
      newcomer,
    ]);
    expect(row).toMatchObject({ name: newcomer, email: null });
  });

  it('an invalid trait is reported on the stored call and the valid ones are applied', async () => {
    const userId = uid();
    await intake().ingest('identify', { userId, messageId: userId, traits: { email: 'not-an-email', name: 'Grace', title: 'x'.repeat(300) } }, spec.who);
    const [c] = await spec.ctx.query<{ name: string; email: string | null; title: string | null }>(
      `SELECT name, email, title FROM contacts WHERE external_id = $1`,
      [userId],
    );
    expect(c).toEqual({ name: 'Grace', email: null, title: null });
    const [stored] = await spec.ctx.query<{ flags: { problems: { field: string }[] } }>(`SELECT flags FROM tracked_events WHERE message_id = $1`, [userId]);
    expect(stored.flags.problems.map((p) => p.field).sort()).toEqual(['traits.email', 'traits.title']);
  });

  it('anonymous events are attributed on identify and counted; a linked anonymousId is never moved to another contact', async () => {
    const anon = uid('anon');
    const userId = uid();
    await intake().ingest(
      'batch',
      {
        batch: [
          { type: 'track', event: 'viewed', anonymousId: anon },
          { type: 'track', event: 'viewed', anonymousId: anon },
        ],
      },
      spec.who,
    );
    expect(await spec.ctx.query(`SELECT contact_id FROM tracked_events WHERE anonymous_id = $1`, [anon])).toEqual([{ contact_id: null }, { contact_id: null }]);
    await intake().ingest('identify', { userId, anonymousId: anon, traits: { name: 'Linked' } }, spec.who);
    const [c] = await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = $1`, [userId]);
    const attributed = await spec.ctx.query<{ contact_id: number }>(`SELECT DISTINCT contact_id FROM tracked_events WHERE anonymous_id = $1`, [anon]);
    expect(attributed).toEqual([{ contact_id: c.id }]);
    expect(await spec.ctx.query(`SELECT count FROM tracked_event_daily WHERE contact_id = $1 AND name = 'viewed'`, [c.id])).toEqual([{ count: 2 }]);
    // Later anonymous events go straight to the contact.
    await intake().ingest('track', { event: 'viewed', anonymousId: anon }, spec.who);
    expect(await spec.ctx.query(`SELECT count FROM tracked_event_daily WHERE contact_id = $1 AND name = 'viewed'`, [c.id])).toEqual([{ count: 3 }]);
    // Another userId with the same anonymousId: a new contact, the link stays, the conflict is reported.
    const other = uid();
    await intake().ingest('identify', { userId: other, anonymousId: anon, messageId: other }, spec.who);
    const [o] = await spec.ctx.query<{ flags: { problems: { field: string }[] }; contact_id: number }>(
      `SELECT flags, contact_id FROM tracked_events WHERE message_id = $1`,
      [other],
    );
    expect(o.contact_id).not.toBe(c.id);
    expect(o.flags.problems[0].field).toBe('anonymousId');
    expect(await spec.ctx.query(`SELECT contact_id FROM anonymous_ids WHERE anonymous_id = $1`, [anon])).toEqual([{ contact_id: c.id }]);
  });

  it('parallel identifies of one userId create one contact', async () => {
    const userId = uid();
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => intake().ingest('identify', { userId, traits: { email: `${userId}@par.test`, name: `P${i}` } }, spec.who)),
    );
    expect(
      await spec.ctx.query(`SELECT count(*)::int AS n FROM contacts WHERE external_id = $1 OR lower(email) = lower($2)`, [userId, `${userId}@par.test`]),
    ).toEqual([{ n: 1 }]);
  });

  it('clamps a timestamp more than 24 h ahead to the receive time and flags it; honours a past one', async () => {
    const userId = uid();
    const ahead = new Date(clock().nowMs() + 3 * DAY).toISOString();
    await intake().ingest('track', { userId, event: 'future', messageId: `${userId}-f`, timestamp: ahead }, spec.who);
    const [f] = await spec.ctx.query<{ occurred_at: Date; flags: { timestampClamped: { given: string } } }>(
      `SELECT occurred_at, flags FROM tracked_events WHERE message_id = $1`,
      [`${userId}-f`],
    );
    expect(Math.abs(f.occurred_at.getTime() - clock().nowMs())).toBeLessThan(60_000);
    expect(f.flags.timestampClamped.given).toBe(ahead);
  });

  it('parallel batches on the same names and contacts (in different orders) count every event once, without deadlock', async () => {
    const users = Array.from({ length: 6 }, () => uid('par'));
    const name = uid('par_event');
    // Creates the contacts first (unknown userIds are locked); then 8 batches at once, each over every contact in its own order.
    await intake().ingest('batch', { batch: users.map((userId) => ({ type: 'track', event: name, userId })) }, spec.who);
    await Promise.all(
      Array.from({ length: 8 }, (_, k) =>
        intake().ingest(
          'batch',
          { batch: [...users, ...users].map((_, i) => ({ type: 'track', event: name, userId: users[(i * (k + 1)) % users.length], properties: { k } })) },
          spec.who,
        ),
      ),
    );
    const total = users.length + 8 * 2 * users.length;
    const [{ n }] = await spec.ctx.query<{ n: number }>(`SELECT sum(count)::int AS n FROM tracked_event_daily WHERE name = $1`, [name]);
    expect(n).toBe(total);
    expect((await tracking().definitions()).definitions.find((d) => d.name === name)).toMatchObject({ count: total, properties: { k: ['number'] } });
    // The deltas were folded by that read: what is left waiting belongs to no call of this test.
    expect(await spec.ctx.query(`SELECT 1 FROM tracked_definition_deltas WHERE name = $1`, [name])).toEqual([]);
  });

  it('parallel tracks of one unknown userId create one contact; parallel anonymous tracks and an identify attribute every event', async () => {
    const userId = uid();
    await Promise.all(Array.from({ length: 6 }, () => intake().ingest('track', { userId, event: 'first_seen' }, spec.who)));
    expect(await spec.ctx.query(`SELECT count(*)::int AS n FROM contacts WHERE external_id = $1`, [userId])).toEqual([{ n: 1 }]);
    const anon = uid('anon');
    const other = uid();
    await Promise.all([
      ...Array.from({ length: 6 }, () => intake().ingest('track', { anonymousId: anon, event: 'anon_seen' }, spec.who)),
      intake().ingest('identify', { userId: other, anonymousId: anon }, spec.who),
      ...Array.from({ length: 6 }, () => intake().ingest('track', { anonymousId: anon, event: 'anon_seen' }, spec.who)),
    ]);
    const [c] = await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = $1`, [other]);
    expect(await spec.ctx.query(`SELECT DISTINCT contact_id FROM tracked_events WHERE anonymous_id = $1`, [anon])).toEqual([{ contact_id: c.id }]);
    expect(await spec.ctx.query(`SELECT count FROM tracked_event_daily WHERE contact_id = $1 AND name = 'anon_seen'`, [c.id])).toEqual([{ count: 12 }]);
  });

  it('track calls of known people are stored in one statement with every write of the transaction path; identity work and subscribed webhooks take the transaction', async () => {
    const userId = uid();
    const anon = uid('anon');
    const name = uid('fast');
    await intake().ingest('identify', { userId, anonymousId: anon, traits: { name: 'Known' } }, spec.who);
    const [c] = await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = $1`, [userId]);
    // A consumer interested in the name (as a scoring rule or a workflow trigger declares it).
    await spec.ctx.get(Transactions).run((tx) => spec.ctx.get(TrackedEventQueue).declare('spec-fast', async () => [name], tx));
    const paths = () => ({ ...intake().paths });
    const before = paths();
    const ahead = new Date(clock().nowMs() + 3 * DAY).toISOString();
    const batch = {
      batch: [
        { type: 'track', event: name, userId, messageId: `${userId}-1`, properties: { plan: 'pro' } },
        { type: 'track', event: name, userId, anonymousId: anon, messageId: `${userId}-2`, properties: { seats: 3 }, timestamp: ahead },
        { type: 'track', event: name, userId, messageId: `${userId}-2`, properties: { plan: 'twice in the request' } },
        { type: 'track', event: `${name}_other`, anonymousId: anon, messageId: `${userId}-3`, properties: { flag: true } },
      ],
    };
    await intake().ingest('batch', batch, spec.who);
    expect(paths()).toEqual({ ...before, oneStatement: before.oneStatement + 1 });
    const stored = await spec.ctx.query<{
      message_id: string;
      contact_id: number;
      flags: { timestampClamped?: { given: string } } | null;
      properties: unknown;
    }>(`SELECT message_id, contact_id, flags, properties FROM tracked_events WHERE message_id LIKE $1 ORDER BY message_id`, [`${userId}-%`]);
    expect(stored.map((r) => [r.message_id, r.contact_id, r.properties])).toEqual([
      [`${userId}-1`, c.id, { plan: 'pro' }],
      [`${userId}-2`, c.id, { seats: 3 }],
      [`${userId}-3`, c.id, { flag: true }],
    ]);
    expect(stored[1].flags?.timestampClamped?.given).toBe(ahead);
    const daily = await spec.ctx.query<{ name: string; n: number }>(
      `SELECT name, sum(count)::int AS n FROM tracked_event_daily WHERE contact_id = $1 AND name LIKE $2 GROUP BY name ORDER BY name`,
      [c.id, `${name}%`],
    );
    expect(daily).toEqual([
      { name, n: 2 },
      { name: `${name}_other`, n: 1 },
    ]);
    const queued = await spec.ctx.query<{ event_id: string }>(`SELECT event_id::text FROM tracked_event_queue WHERE consumer = 'spec-fast' ORDER BY id`);
    const ids = await spec.ctx.query<{ id: string }>(`SELECT id::text FROM tracked_events WHERE name = $1 ORDER BY id`, [name]);
    expect(queued.map((q) => q.event_id)).toEqual(ids.map((r) => r.id));
    const defs = (await tracking().definitions()).definitions;
    expect(defs.find((d) => d.name === name)).toMatchObject({ count: 2, properties: { plan: ['string'], seats: ['number'] } });
    expect(defs.find((d) => d.name === `${name}_other`)).toMatchObject({ count: 1, properties: { flag: ['boolean'] } });

    // Retried: the same path, nothing stored twice, no count or queue row added.
    await intake().ingest('batch', batch, spec.who);
    expect(paths().oneStatement).toBe(before.oneStatement + 2);
    expect(await spec.ctx.query(`SELECT count(*)::int AS n FROM tracked_events WHERE message_id LIKE $1`, [`${userId}-%`])).toEqual([{ n: 3 }]);
    expect((await tracking().definitions()).definitions.find((d) => d.name === name)).toMatchObject({ count: 2 });
    expect(await spec.ctx.query(`SELECT count(*)::int AS n FROM tracked_event_queue WHERE consumer = 'spec-fast'`)).toEqual([{ n: 2 }]);

    // Identity work (an unknown userId; a known one with an anonymousId not linked yet): the transaction, which creates and links.
    const newcomer = uid();
    const fresh = uid('anon');
    await intake().ingest('batch', { batch: [{ type: 'track', event: name, userId: newcomer }] }, spec.who);
    await intake().ingest('batch', { batch: [{ type: 'track', event: name, userId, anonymousId: fresh }] }, spec.who);
    expect(paths()).toEqual({ oneStatement: before.oneStatement + 2, transaction: before.transaction + 2 });
    expect(await spec.ctx.query(`SELECT count(*)::int AS n FROM contacts WHERE external_id = $1`, [newcomer])).toEqual([{ n: 1 }]);
    expect(await spec.ctx.query(`SELECT contact_id FROM anonymous_ids WHERE anonymous_id = $1`, [fresh])).toEqual([{ contact_id: c.id }]);

    // A webhook subscribed to the name: the transaction path, which writes its delivery; another name stays on the one statement.
    const [hook] = await spec.ctx.query<{ id: number }>(
      `INSERT INTO webhooks (url, events, secret) VALUES ('http://127.0.0.1:9/spec', $1, 'whsec_c3BlYw==') RETURNING id`,
      [[`tracked.${name}`]],
    );
    try {
      await intake().ingest('track', { event: name, userId, messageId: `${userId}-hooked` }, spec.who);
      await intake().ingest('track', { event: `${name}_other`, userId, messageId: `${userId}-unhooked` }, spec.who);
      expect(paths()).toEqual({ oneStatement: before.oneStatement + 3, transaction: before.transaction + 3 });
      expect(await spec.ctx.query(`SELECT event_type FROM webhook_deliveries WHERE webhook_id = $1`, [hook.id])).toEqual([{ event_type: `tracked.${name}` }]);
    } finally {
      await spec.ctx.query(`UPDATE webhooks SET is_active = false WHERE id = $1`, [hook.id]);
    }
  });

  it('listeners hear every contact of batches committed back to back (told at most every 50 ms, merged meanwhile)', async () => {
    const users = [uid(), uid(), uid()];
    for (const userId of users) await intake().ingest('track', { userId, event: 'told' }, spec.who);
    const heard = new Set<number>();
    let calls = 0;
    const off = intake().onTracked((b) => {
      calls++;
      for (const id of b.contactIds) heard.add(id);
    });
    try {
      for (const userId of users) await intake().ingest('track', { userId, event: 'told' }, spec.who);
      const ids = (await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = ANY($1)`, [users])).map((r) => r.id);
      for (let i = 0; i < 100 && heard.size < ids.length; i++) await new Promise((r) => setTimeout(r, 10));
      expect([...heard].sort()).toEqual(ids.sort());
      expect(calls).toBeGreaterThanOrEqual(1);
      expect(calls).toBeLessThanOrEqual(3);
    } finally {
      off();
    }
  });

  // Last: it prunes the whole change feed.
  it("keeps a contact's record events in its timeline beyond the feed's retention: the prune moves them to its record history", async () => {
    const userId = uid();
    await intake().ingest('identify', { userId, traits: { email: `${userId}@history.test`, title: 'CTO' } }, spec.who);
    await intake().ingest('identify', { userId, traits: { title: 'CEO' } }, spec.who);
    await intake().ingest('track', { userId, event: 'history_viewed' }, spec.who);
    const [{ id }] = await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = $1`, [userId]);
    await events().sequenceNow();
    const before = await tracking().timeline(id, {});
    expect(before.items.map((i) => `${i.kind}:${i.type}`).sort()).toEqual(
      ['record:contact.created', 'record:contact.updated', 'tracked:history_viewed', 'tracked:identify', 'tracked:identify'].sort(),
    );
    // The retention passes for every event of the feed (what the events.prune job does EVENT_RETENTION_DAYS later),
    // while the timeline is read: each read answers the same items, from the feed or from the history, never both or neither.
    // (The clock moved a minute on, so "older than 0 days" takes every event.)
    clock().travel(60_000);
    const [pruned, ...reads] = await Promise.all([events().prune(0), ...Array.from({ length: 4 }, () => tracking().timeline(id, {}))]).finally(() =>
      clock().travel(-60_000),
    );
    expect(pruned).toBeGreaterThan(0);
    for (const r of reads) expect(r).toEqual(before);
    expect(await spec.ctx.query(`SELECT count(*)::int AS n FROM events`)).toEqual([{ n: 0 }]);
    expect(await tracking().timeline(id, {})).toEqual(before);
    // Paged one item at a time, across the history: the same items in the same order.
    const walked: unknown[] = [];
    let after: string | null = '';
    while (after !== null) {
      const page = await tracking().timeline(id, { limit: '1', ...(after ? { after } : {}) });
      walked.push(...page.items);
      after = page.next;
    }
    expect(walked).toEqual(before.items);
    expect((await tracking().timeline(id, { types: 'contact.updated' })).items.map((i) => i.type)).toEqual(['contact.updated']);
    // The history goes with its contact.
    await spec.ctx.query(`DELETE FROM contacts WHERE id = $1`, [id]);
    expect(await spec.ctx.query(`SELECT 1 FROM contact_record_history WHERE contact_id = $1`, [id])).toEqual([]);
  });
});
