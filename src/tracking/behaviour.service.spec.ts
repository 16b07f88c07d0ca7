import { describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Clock } from '../common/clock.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { SegmentRefreshService } from '../segments/segment-refresh.service.js';
import { SegmentsService, TIME_REFRESH_MS } from '../segments/segments.service.js';
import { TrackingIntakeService } from './tracking-intake.service.js';

const DAY = 86_400_000;

/**
 * Behavioural filters on the real database: the contacts list and dynamic segments filter on
 * tracked events through the daily counts, a new event makes a contact join, and time alone (the
 * injected clock) makes it leave once its events age out of the window.
 */
describe('Behavioural filters and segments (service layer, real PostgreSQL)', () => {
  // The background refresher runs its passes only every minute here: the test calls them itself.
  const spec = useServiceSpec({ SEGMENT_REFRESH_INTERVAL_MS: '60000' });
  const intake = () => spec.ctx.get(TrackingIntakeService);
  const contacts = () => spec.ctx.get(ContactsService);
  const segments = () => spec.ctx.get(SegmentsService);
  const refresher = () => spec.ctx.get(SegmentRefreshService);
  const clock = () => spec.ctx.get(Clock);
  let seq = 0;
  const uid = () => `b-${++seq}-${Date.now()}`;
  const members = async (segmentId: number) =>
    (await spec.ctx.query<{ contact_id: number }>(`SELECT contact_id FROM segment_members WHERE segment_id = $1 ORDER BY 1`, [segmentId])).map(
      (r) => r.contact_id,
    );
  const contactOf = async (userId: string) => (await spec.ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE external_id = $1`, [userId]))[0].id;

  it('filters the contacts list by counts, windows, first and last times', async () => {
    const a = uid();
    const b = uid();
    const old = new Date(clock().nowMs() - 20 * DAY).toISOString();
    await intake().ingest(
      'batch',
      {
        batch: [
          { type: 'track', event: 'viewed', userId: a },
          { type: 'track', event: 'viewed', userId: a },
          { type: 'track', event: 'viewed', userId: b, timestamp: old },
          { type: 'track', event: 'bought', userId: b },
        ],
      },
      spec.who,
    );
    const [ida, idb] = [await contactOf(a), await contactOf(b)];
    const ids = async (filter: string) =>
      ((await contacts().list({ filter, limit: '200' })).contacts as { id: number }[]).map((c) => c.id).filter((id) => id === ida || id === idb);
    expect(await ids('events.viewed.count[gte]:1')).toEqual([ida, idb]);
    expect(await ids('events.viewed.count.7d[gte]:2')).toEqual([ida]);
    expect(await ids('events.viewed.count.30d[eq]:1')).toEqual([idb]);
    expect(await ids('and(events.viewed.count[gte]:1,events.bought.lastAt[isEmpty])')).toEqual([ida]);
    expect(await ids('events.viewed.firstAt[lt]:now-10d')).toEqual([idb]);
  });

  it('a window segment gains a contact on a new event and loses it when its events age out (clock moved, no other change)', async () => {
    const userId = uid();
    const seg = await segments().create({ name: `pricing ${userId}`, type: 'dynamic', filter: 'events.pricing.count.7d[gte]:2' }, spec.who);
    await refresher().buildPending();
    await intake().ingest('batch', { batch: [{ type: 'track', event: 'pricing', userId }] }, spec.who);
    const id = await contactOf(userId);
    await refresher().refreshTracked();
    expect(await members(seg.id)).toEqual([]);
    await intake().ingest('track', { event: 'pricing', userId }, spec.who);
    // The spec's own passes: the intake also kicks the background refresher, whose pass may hold the
    // queued contact (this one then finds nothing) until it commits.
    for (let i = 0; i < 100 && (await members(seg.id)).length === 0; i++) {
      await refresher().refreshTracked();
      if ((await members(seg.id)).length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(await members(seg.id)).toEqual([id]);
    // Not yet due: the window's evaluation is recent.
    await refresher().refreshTimeWindows();
    expect(await members(seg.id)).toEqual([id]);
    clock().travel(8 * DAY);
    try {
      expect(await refresher().refreshTimeWindows()).toBeGreaterThanOrEqual(1);
      expect(await members(seg.id)).toEqual([]);
    } finally {
      clock().travel(-8 * DAY);
    }
    // Back in time (the clock moved back), the next due evaluation restores it.
    clock().travel(TIME_REFRESH_MS + 1000);
    try {
      await refresher().refreshTimeWindows();
      expect(await members(seg.id)).toEqual([id]);
    } finally {
      clock().travel(-(TIME_REFRESH_MS + 1000));
    }
  });
});
