import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { EventsService } from '../events/events.service.js';
import { SegmentRefreshService } from './segment-refresh.service.js';
import { SegmentsService } from './segments.service.js';

/**
 * The refresher's rules on the real database: what a refresh pass re-evaluates, where its cursor
 * goes, and what happens when it fell behind the event retention. The background loop runs too (it
 * only ever takes turns with these calls), so each check is on the resulting state.
 */
describe('SegmentsService refresh (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let segments: SegmentsService;
  let refresher: SegmentRefreshService;
  let contacts: ContactsService;
  let campaigns: CampaignsService;
  let events: EventsService;
  let who: Principal;
  let seq = 0;
  const email = () => `seg${++seq}-${Date.now()}@svc.test`;

  beforeAll(async () => {
    ctx = await startServiceContext({ SEGMENT_REFRESH_INTERVAL_MS: '60000' });
    segments = ctx.get(SegmentsService);
    refresher = ctx.get(SegmentRefreshService);
    contacts = ctx.get(ContactsService);
    campaigns = ctx.get(CampaignsService);
    events = ctx.get(EventsService);
    who = await ctx.principal();
  });
  afterAll(async () => ctx?.close());

  /** Numbers the committed events, then runs refresh passes until one ran here and found nothing left. */
  async function refresh(): Promise<void> {
    await events.sequenceNow(true);
    for (let i = 0; i < 200; i++) {
      await refresher.buildPending();
      const n = await refresher.refreshChanges();
      if (n === 0) {
        await refresher.buildPending();
        return;
      }
      if (n < 0) await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('refresh did not settle');
  }
  const members = async (id: number) =>
    (await ctx.query<{ contact_id: number }>(`SELECT contact_id FROM segment_members WHERE segment_id = $1 ORDER BY contact_id`, [id])).map(
      (r) => r.contact_id,
    );
  const cursor = async () => Number((await ctx.query<{ s: string }>(`SELECT last_sequence AS s FROM segment_refresh_state`))[0].s);

  it('re-evaluates a contact when its campaign membership changes (a campaign.id filter)', async () => {
    const campaign = await campaigns.create({ name: 'Spring' }, who);
    const a = await contacts.create({ name: 'A', email: email() }, who);
    const s = await segments.create({ name: 'In Spring', type: 'dynamic', filter: `campaign.id[eq]:${campaign.id}` }, who);
    await refresh();
    expect(await members(s.id)).toEqual([]);
    await campaigns.addContact(campaign.id, a.id);
    await refresh();
    expect(await members(s.id)).toEqual([a.id]);
    await campaigns.removeContact(campaign.id, a.id);
    await refresh();
    expect(await members(s.id)).toEqual([]);
    expect((await segments.get(s.id)).membership).toMatchObject({ status: 'ready', count: 0 });
  });

  it('moves its cursor to the feed position when no change event follows, so other events are not read again', async () => {
    await refresh();
    const other = await campaigns.create({ name: 'Not a contact change' }, who);
    await events.sequenceNow(true);
    const feed = Number((await ctx.query<{ s: string }>(`SELECT last_sequence AS s FROM event_feed_state`))[0].s);
    await refresh();
    expect(await cursor()).toBe(feed);
    expect(other.id).toBeGreaterThan(0);
  });

  it('rebuilds every dynamic segment when the cursor fell behind the event retention', async () => {
    const a = await contacts.create({ name: 'Retained', email: email(), title: 'retention' }, who);
    const s = await segments.create({ name: 'Retention', type: 'dynamic', filter: 'title[eq]:retention' }, who);
    await refresh();
    expect(await members(s.id)).toEqual([a.id]);
    // A membership row the events cannot explain, and a cursor below the pruned position.
    await ctx.query(`DELETE FROM segment_members WHERE segment_id = $1`, [s.id]);
    await ctx.query(`UPDATE event_feed_state SET pruned_through = last_sequence + 1000, last_sequence = last_sequence + 1000`);
    await refresh();
    expect(await members(s.id)).toEqual([a.id]);
    expect(await cursor()).toBeGreaterThanOrEqual(Number((await ctx.query<{ s: string }>(`SELECT pruned_through AS s FROM event_feed_state`))[0].s));
  });
});
