import { describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Transactions } from '../database/transactions.js';
import { microsIso, TrackedEventQueue } from './tracked-event-queue.repository.js';
import { TrackingIntakeService } from './tracking-intake.service.js';

/**
 * The tracked-event stream's per-consumer queues on the real database: only declared names are
 * queued, in the intake's transaction; anonymous events are queued once an identify attributes
 * them; a claim deletes what it answers in the claiming transaction (a rollback gives it back), and
 * parallel claims never share an event.
 */
describe('TrackedEventQueue (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  const queue = () => spec.ctx.get(TrackedEventQueue);
  const intake = () => spec.ctx.get(TrackingIntakeService);
  const run = <T>(work: Parameters<Transactions['run']>[0]) => spec.ctx.get(Transactions).run(work) as Promise<T>;
  let seq = 0;
  const uid = (p = 'q') => `${p}-${++seq}-${Date.now()}`;
  const declare = (consumer: string, names: string[]) => run((tx) => queue().declare(consumer, async () => names, tx));
  const drain = (consumer: string, limit = 1000) => run<Awaited<ReturnType<TrackedEventQueue['claim']>>>((tx) => queue().claim(consumer, limit, tx));

  it('queues only the names a consumer declared, for each interested consumer, with the stored event', async () => {
    await declare('spec-a', ['signed_up', 'paid']);
    await declare('spec-b', ['*']);
    const userId = uid();
    await intake().ingest(
      'batch',
      {
        batch: [
          { type: 'track', event: 'signed_up', userId, properties: { plan: 'pro' } },
          { type: 'track', event: 'browsed', userId },
          { type: 'identify', userId, traits: { email: `${userId}@queue.test` } },
          { type: 'track', event: 'paid', userId, properties: { amount: 9 } },
        ],
      },
      spec.who,
    );
    const a = await drain('spec-a');
    expect(a.map((e) => [e.name, e.properties])).toEqual([
      ['signed_up', { plan: 'pro' }],
      ['paid', { amount: 9 }],
    ]);
    expect(a[0].contactId).toEqual(expect.any(Number));
    expect((await drain('spec-b')).map((e) => e.name)).toEqual(['signed_up', 'browsed', 'paid']);
    expect(await drain('spec-a')).toEqual([]);
    expect(await queue().pending('spec-a')).toEqual({ count: 0, oldestQueuedAt: null });
  });

  it('queues anonymous events when an identify attributes them, not before', async () => {
    await declare('spec-anon', ['viewed']);
    const anonymousId = uid('anon');
    await intake().ingest('track', { event: 'viewed', anonymousId, properties: { page: '/pricing' } }, spec.who);
    expect((await queue().pending('spec-anon')).count).toBe(0);
    await intake().ingest('identify', { userId: uid(), anonymousId, traits: {} }, spec.who);
    const got = await drain('spec-anon');
    expect(got.map((e) => [e.name, e.anonymousId, e.properties])).toEqual([['viewed', anonymousId, { page: '/pricing' }]]);
    expect(got[0].contactId).toEqual(expect.any(Number));
  });

  it('gives claimed events back when the claiming transaction rolls back; parallel claims share nothing', async () => {
    await declare('spec-claim', ['tick']);
    const userId = uid();
    await intake().ingest('batch', { batch: Array.from({ length: 40 }, (_, i) => ({ type: 'track', event: 'tick', userId, properties: { i } })) }, spec.who);
    await expect(
      run(async (tx) => {
        expect(await queue().claim('spec-claim', 10, tx)).toHaveLength(10);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect((await queue().pending('spec-claim')).count).toBe(40);
    const parts = await Promise.all(Array.from({ length: 6 }, () => drain('spec-claim', 8)));
    const seen = parts.flat().map((e) => (e.properties as { i: number }).i);
    const rest = (await drain('spec-claim')).map((e) => (e.properties as { i: number }).i);
    expect([...seen, ...rest].sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i));
  });

  it('claims an event whose stored time has microseconds (written by SQL, not by the intake)', async () => {
    await declare('spec-micro', ['micro']);
    const userId = uid();
    await intake().ingest('track', { event: 'micro', userId, properties: { n: 1 } }, spec.who);
    // A time JavaScript cannot carry (its Date keeps milliseconds): the event and its queue row moved by 123 µs.
    await spec.ctx.query(
      `WITH q AS (UPDATE tracked_event_queue SET occurred_at = occurred_at + interval '123 microseconds' WHERE consumer = 'spec-micro' RETURNING event_id)
       UPDATE tracked_events SET occurred_at = occurred_at + interval '123 microseconds' WHERE id IN (SELECT event_id FROM q)`,
    );
    const got = await drain('spec-micro');
    expect(got.map((e) => [e.name, e.userId, e.properties])).toEqual([['micro', userId, { n: 1 }]]);
    expect((await queue().pending('spec-micro')).count).toBe(0);
  });

  it('serialises declarations: two computed at once both land, and a later one replaces the list', async () => {
    // Each declaration computes its names from a table inside the lock: the second sees the first's commit.
    await spec.ctx.query(`CREATE TABLE IF NOT EXISTS spec_rules (name text)`);
    const publish = (name: string) =>
      run(async (tx) => {
        await tx.query(`INSERT INTO spec_rules VALUES ($1)`, [name]);
        await queue().declare(
          'spec-race',
          async (t) => {
            const rows: { name: string }[] = await t.query(`SELECT name FROM spec_rules`);
            return rows.map((r) => r.name);
          },
          tx,
        );
      });
    await Promise.all([publish('x'), publish('y'), publish('z')]);
    expect(await queue().interests('spec-race')).toEqual(['x', 'y', 'z']);
    await declare('spec-race', ['y']);
    expect(await queue().interests('spec-race')).toEqual(['y']);
  });
  it('replays the stored track events of some names since a time, oldest first, page by page, each with the predicates that match it', async () => {
    const userId = uid('replay');
    const name = uid('Replay Viewed');
    const base = Date.UTC(2026, 10, 20, 10, 0, 0);
    // Out of time order in the request; two at the same instant (ordered by id), one before `since`, one of another name.
    const at = (ms: number) => new Date(base + ms).toISOString();
    await intake().ingest(
      'batch',
      {
        batch: [
          { type: 'track', event: name, userId, properties: { plan: 'pro', seats: 3 }, timestamp: at(3000) },
          { type: 'track', event: name, userId, properties: { plan: 'free' }, timestamp: at(1000) },
          { type: 'track', event: name, userId, properties: { plan: 'pro', seats: 9 }, timestamp: at(1000) },
          { type: 'track', event: name, userId, properties: { plan: 'pro' }, timestamp: at(-5000) },
          { type: 'track', event: `${name} other`, userId, properties: { plan: 'pro' }, timestamp: at(2000) },
          { type: 'track', event: name, anonymousId: uid('anon'), properties: { plan: 'pro' }, timestamp: at(2500) },
        ],
      },
      spec.who,
    );
    const predicates = [
      { name, sql: `(p.properties->>'plan' = :__flt0)`, params: { __flt0: 'pro' } },
      { name, sql: `((p.properties->>'seats')::int >= :__flt0)`, params: { __flt0: 5 } },
    ];
    const pages: Awaited<ReturnType<TrackedEventQueue['replay']>>[] = [];
    let after: { atMicros: number; id: string } | null = null;
    for (;;) {
      const page = await queue().replay({ names: [name, `${name} missing`], since: new Date(base), after, limit: 2, predicates });
      pages.push(page);
      if (page.length < 2) break;
      after = { atMicros: page[1].atMicros, id: page[1].id };
    }
    const all = pages.flat();
    // The anonymous event is not attributed: not replayed; the one before `since` neither.
    expect(all.map((e) => e.atMicros)).toEqual([(base + 1000) * 1000, (base + 1000) * 1000, (base + 3000) * 1000]);
    // The two at the same instant by id (one matches both predicates, one neither); the last only the first.
    expect(Number(all[0].id)).toBeLessThan(Number(all[1].id));
    expect([all[0].matches, all[1].matches].sort()).toEqual(['00', '11']);
    expect(all[2].matches).toBe('10');
    expect(new Set(all.map((e) => e.contactId)).size).toBe(1);
    expect(pages.map((p) => p.length)).toEqual([2, 1]);
    expect(microsIso(all[2].atMicros + 7)).toBe(new Date(base + 3000).toISOString().replace('Z', '007Z'));
  });
});
