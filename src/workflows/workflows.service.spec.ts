import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import { Clock } from '../common/clock.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { EventsService } from '../events/events.service.js';
import { FieldsService } from '../fields/fields.service.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowEngine } from './workflow-engine.js';
import { WorkflowRunner } from './workflow-runner.js';
import { WorkflowTriggers } from './workflow-triggers.js';
import type { CreateWorkflowDto } from './workflow.dto.js';
import { WorkflowsService } from './workflows.service.js';

/**
 * The engine on the real database: definitions checked against other records, versions, enrolment
 * rules, the runner's steps with their effects and events, waits on the injected clock, branches on
 * a custom field, goals, failures that do not block others, and two runners racing. The background
 * runner loop runs too (a long poll interval): every check is on the resulting state.
 */
describe('WorkflowsService and the engine (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let workflows: WorkflowsService;
  let enrollments: EnrollmentsService;
  let runner: WorkflowRunner;
  let triggers: WorkflowTriggers;
  let contacts: ContactsService;
  let campaigns: CampaignsService;
  let events: EventsService;
  let clock: Clock;
  let who: Principal;
  let seq = 0;
  const email = () => `wf${++seq}-${Date.now()}@svc.test`;

  beforeAll(async () => {
    ctx = await startServiceContext({ WORKFLOW_POLL_INTERVAL_MS: '60000' });
    workflows = ctx.get(WorkflowsService);
    enrollments = ctx.get(EnrollmentsService);
    runner = ctx.get(WorkflowRunner);
    triggers = ctx.get(WorkflowTriggers);
    contacts = ctx.get(ContactsService);
    campaigns = ctx.get(CampaignsService);
    events = ctx.get(EventsService);
    clock = ctx.get(Clock);
    who = await ctx.principal();
  });
  afterAll(async () => ctx?.close());

  const create = (body: Partial<CreateWorkflowDto> & { steps: Record<string, unknown>[] }) =>
    workflows.create({ name: `wf ${++seq}`, trigger: { type: 'manual' }, status: 'active', ...body }, who);
  const contact = async (extra: Record<string, unknown> = {}) => (await contacts.create({ name: 'C', email: email(), ...extra }, who)).id;
  const enrollmentOf = async (workflowId: number, contactId: number) =>
    (
      await ctx.query<{ id: string; status: string; step_key: string; version: number; error: string | null; next_at: Date | null }>(
        `SELECT id, status, step_key, version, error, next_at FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = $2 ORDER BY id DESC LIMIT 1`,
        [workflowId, contactId],
      )
    )[0];
  /** Runs due steps until nothing is due (the background loop may take some: claims keep them apart). */
  const settle = async () => {
    for (let i = 0; i < 50; i++) {
      await runner.runDue();
      const due = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM workflow_enrollments WHERE status IN ('active', 'waiting') AND next_at <= $1`, [
        clock.now(),
      ]);
      if (due[0].n === '0') return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('the runner did not settle');
  };

  it('refuses a definition naming a segment or campaign that does not exist, or a filter that does not compile, naming step and field', async () => {
    const missingCampaign = await ctx.failure(create({ steps: [{ key: 'add', type: 'add_to_campaign', campaignId: 999999 }] }));
    expect(missingCampaign.status).toBe(400);
    expect(missingCampaign.details?.[0]).toMatchObject({ field: 'steps.0.campaignId', stepKey: 'add' });
    const badFilter = await ctx.failure(
      create({
        steps: [
          { key: 'b', type: 'branch', branches: [{ filter: 'nope[eq]:1', next: 'x' }] },
          { key: 'x', type: 'exit' },
        ],
      }),
    );
    expect(badFilter.details?.[0]).toMatchObject({ field: 'steps.0.branches.0.filter', stepKey: 'b' });
    const badSegment = await ctx.failure(create({ trigger: { type: 'segment_entered', segmentId: 999999 }, steps: [{ key: 'x', type: 'exit' }] }));
    expect(badSegment.details?.[0]).toMatchObject({ field: 'trigger.segmentId' });
    const badCron = await ctx.failure(create({ trigger: { type: 'schedule', cron: 'every day', segmentId: 1 }, steps: [{ key: 'x', type: 'exit' }] }));
    expect(badCron.details?.[0]).toMatchObject({ field: 'trigger.cron' });
  });

  it('runs actions in order, each once, with its history and events, and completes', async () => {
    const campaign = await campaigns.create({ name: `wf campaign ${++seq}` }, who);
    const w = await create({
      steps: [
        { key: 'title', type: 'update_contact', set: { title: 'Lead' }, next: 'join' },
        { key: 'join', type: 'add_to_campaign', campaignId: campaign.id, next: 'call' },
        { key: 'call', type: 'create_activity', activityType: 'call', subject: 'Call them', due: '+2d', next: 'tell' },
        { key: 'tell', type: 'notify_user', userId: who.userId, message: 'A lead' },
      ],
    });
    const c = await contact();
    const r = await enrollments.enrolByHand(w.id, [c]);
    expect(r.enrolled).toBe(1);
    await settle();
    const e = await enrollmentOf(w.id, c);
    expect(e.status).toBe('completed');
    expect((await contacts.get(c)).title).toBe('Lead');
    const members = await ctx.query(`SELECT 1 FROM campaign_members WHERE campaign_id = $1 AND contact_id = $2`, [campaign.id, c]);
    expect(members).toHaveLength(1);
    const activities = await ctx.query<{ due_date: Date }>(`SELECT due_date FROM activities WHERE contact_id = $1`, [c]);
    expect(activities).toHaveLength(1);
    const detail = await enrollments.get(w.id, Number(e.id));
    expect(detail.history.map((h) => [h.stepKey, h.outcome])).toEqual([
      ['title', 'completed'],
      ['join', 'completed'],
      ['call', 'completed'],
      ['tell', 'completed'],
    ]);
    await events.sequenceNow(true);
    const types = await ctx.query<{ type: string }>(
      `SELECT type FROM events WHERE type LIKE 'workflow.%' AND type NOT IN ('workflow.created', 'workflow.updated', 'workflow.deleted')
          AND (data->>'id' = $1 OR data->'enrollment'->>'id' = $1) ORDER BY (SELECT t.first_sequence FROM event_transactions t WHERE t.tx = events.tx), insert_order`,
      [e.id],
    );
    expect(types.map((t) => t.type)).toEqual(['workflow.enrolled', ...Array<string>(4).fill('workflow.step_completed'), 'workflow.completed']);
    const notes = await ctx.query(`SELECT 1 FROM notifications WHERE user_id = $1 AND type = 'workflow'`, [who.userId]);
    expect(notes.length).toBeGreaterThan(0);
  });

  it('waits on the injected clock, then goes on; a branch on a custom field decides the way', async () => {
    await ctx.get(FieldsService).create({ label: `Plan ${++seq}`, alias: `plan${seq}`, type: 'text' }, who, 'contact');
    const alias = `plan${seq}`;
    const w = await create({
      steps: [
        { key: 'wait', type: 'wait', duration: '2d', next: 'check' },
        { key: 'check', type: 'branch', branches: [{ filter: `fields.${alias}[eq]:gold`, next: 'vip' }], defaultNext: 'other' },
        { key: 'vip', type: 'update_contact', set: { title: 'VIP' } },
        { key: 'other', type: 'update_contact', set: { title: 'Other' } },
      ],
    });
    const gold = await contact({ fields: { [alias]: 'gold' } });
    const plain = await contact();
    await enrollments.enrolByHand(w.id, [gold, plain]);
    await settle();
    expect((await enrollmentOf(w.id, gold)).status).toBe('waiting');
    clock.travel(2 * 86_400_000 + 1000);
    await settle();
    expect((await enrollmentOf(w.id, gold)).status).toBe('completed');
    expect((await contacts.get(gold)).title).toBe('VIP');
    expect((await contacts.get(plain)).title).toBe('Other');
  });

  it('keeps enrollments on their version when the steps of an active workflow change, and migrates them on request', async () => {
    const w = await create({
      steps: [
        { key: 'w1', type: 'wait', duration: '1d', next: 'a' },
        { key: 'a', type: 'update_contact', set: { title: 'v1' } },
      ],
    });
    const c = await contact();
    await enrollments.enrolByHand(w.id, [c]);
    await settle();
    const before = await enrollmentOf(w.id, c);
    const edited = await workflows.patch(
      w.id,
      {
        steps: [
          { key: 'w2', type: 'wait', duration: '1d', next: 'b' },
          { key: 'b', type: 'update_contact', set: { title: 'v2' } },
        ],
      },
      who,
    );
    expect(edited.version).toBe(2);
    expect((await enrollmentOf(w.id, c)).version).toBe(1);
    const refused = await ctx.failure(workflows.migrate(w.id, { fromVersion: 1, map: {} }));
    expect(refused.details?.[0].field).toBe('map.w1');
    expect(await workflows.migrate(w.id, { fromVersion: 1, map: { w1: 'w2' } })).toEqual({ migrated: 1, fromVersion: 1, toVersion: 2 });
    const moved = await enrollmentOf(w.id, c);
    expect(moved).toMatchObject({ version: 2, step_key: 'w2', status: 'waiting' });
    expect(moved.next_at?.getTime()).toBe(before.next_at?.getTime());
    clock.travel(86_400_000 + 1000);
    await settle();
    expect((await contacts.get(c)).title).toBe('v2');
  });

  it('converts an enrollment whose contact comes to match a goal', async () => {
    const w = await create({
      steps: [
        { key: 'wait', type: 'wait', duration: '7d', next: 'nudge' },
        { key: 'nudge', type: 'update_contact', set: { title: 'nudged' } },
        { key: 'won', type: 'goal', filter: 'title[eq]:Customer' },
      ],
    });
    const c = await contact();
    await enrollments.enrolByHand(w.id, [c]);
    await settle();
    await contacts.patch(c, { title: 'Customer' }, who);
    // The background loop may hold the follower's cursor at this moment: follow until the change was read.
    for (let i = 0; i < 100 && (await enrollmentOf(w.id, c)).status !== 'converted'; i++) {
      await triggers.follow();
      await new Promise((r) => setTimeout(r, 20));
    }
    const e = await enrollmentOf(w.id, c);
    expect(e.status).toBe('converted');
    expect((await workflows.stats(w.id)).converted).toBe(1);
  });

  it('marks a failing step failed with its error without blocking the other enrollments', async () => {
    const campaign = await campaigns.create({ name: `doomed ${++seq}` }, who);
    const w = await create({
      steps: [
        { key: 'title', type: 'update_contact', set: { title: 'before' }, next: 'join' },
        { key: 'join', type: 'add_to_campaign', campaignId: campaign.id },
      ],
    });
    await campaigns.remove(campaign.id);
    const [a, b] = [await contact(), await contact()];
    await enrollments.enrolByHand(w.id, [a, b]);
    await settle();
    for (const c of [a, b]) {
      const e = await enrollmentOf(w.id, c);
      expect(e.status).toBe('failed');
      expect(e.error).toContain(`${campaign.id}`);
      expect((await contacts.get(c)).title).toBe('before');
    }
    const stats = await workflows.stats(w.id);
    expect(stats.failed).toBe(2);
    expect(stats.steps.find((s) => s.key === 'join')?.failed).toBe(2);
  });

  it('enrols a contact once when enrolments race, and refuses the next with a 409 naming the enrollment', async () => {
    const w = await create({ steps: [{ key: 'wait', type: 'wait', duration: '1d' }] });
    const c = await contact();
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => enrollments.enrolByHand(w.id, [c])));
    const running = await ctx.query(`SELECT id FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = $2`, [w.id, c]);
    expect(running).toHaveLength(1);
    expect(results.filter((r) => r.status === 'fulfilled' && r.value.enrolled === 1)).toHaveLength(1);
    const again = await ctx.failure(enrollments.enrolByHand(w.id, [c]));
    expect(again.status).toBe(409);
    expect(again.details?.[0]).toMatchObject({ contactId: c, enrollmentId: Number((running[0] as { id: string }).id) });
  });

  it('runs each step once when two runners race over the same due enrollments', async () => {
    const campaign = await campaigns.create({ name: `race ${++seq}` }, who);
    const w = await create({
      steps: [
        { key: 'join', type: 'add_to_campaign', campaignId: campaign.id, next: 'leave' },
        { key: 'leave', type: 'remove_from_campaign', campaignId: campaign.id, next: 'again' },
        { key: 'again', type: 'add_to_campaign', campaignId: campaign.id },
      ],
    });
    const ids = await Promise.all(Array.from({ length: 40 }, () => contact()));
    await enrollments.enrolByHand(w.id, ids);
    await Promise.all([runner.runDue(), runner.runDue(), runner.runDue()]);
    await settle();
    const runs = await ctx.query<{ n: string }>(
      `SELECT count(*) AS n FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id WHERE e.workflow_id = $1`,
      [w.id],
    );
    expect(Number(runs[0].n)).toBe(120);
    await events.sequenceNow(true);
    const added = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE type = 'campaign.contact_added' AND (data->>'campaignId')::int = $1`, [
      campaign.id,
    ]);
    expect(Number(added[0].n)).toBe(80);
    const done = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status = 'completed'`, [w.id]);
    expect(Number(done[0].n)).toBe(40);
  });

  it('takes over the claim of a runner that died once its lease passed; the dead runner cannot run the step after that', async () => {
    const w = await create({
      steps: [
        { key: 'wait', type: 'wait', duration: '1h', next: 'mark' },
        { key: 'mark', type: 'update_contact', set: { title: 'once' } },
      ],
    });
    const c = await contact();
    const repo = ctx.get(EnrollmentsRepository);
    const engine = ctx.get(WorkflowEngine);
    const enrolled = await enrollments.enrolByHand(w.id, [c]);
    const id = enrolled.enrollments[0].id;
    await settle();
    expect((await enrollmentOf(w.id, c)).status).toBe('waiting');
    // The wait is over; a runner claims the enrollment without running it (it "dies"): nobody else may take it during the lease.
    clock.travel(3_600_000 + 1000);
    const dead = 'd0000000-0000-4000-8000-000000000000';
    const claimed = await repo.claimDue(clock.now(), 500, dead, 60_000);
    expect(claimed).toContain(id);
    await runner.runDue();
    expect((await enrollmentOf(w.id, c)).status).toBe('waiting');
    // The lease passes (the database's clock decides leases).
    await ctx.query(`UPDATE workflow_enrollments SET claimed_until = now() - interval '1 second' WHERE id = $1`, [id]);
    await settle();
    expect((await enrollmentOf(w.id, c)).status).toBe('completed');
    expect(await engine.process(id, dead)).toBe('lost');
    const runs = await ctx.query(`SELECT step_key FROM workflow_step_runs WHERE enrollment_id = $1 ORDER BY seq`, [id]);
    expect(runs).toEqual([{ step_key: 'wait' }, { step_key: 'wait' }, { step_key: 'mark' }]);
  });

  it('refuses to delete a workflow with running enrollments unless forced, which exits them', async () => {
    const w = await create({ steps: [{ key: 'wait', type: 'wait', duration: '1d' }] });
    const c = await contact();
    await enrollments.enrolByHand(w.id, [c]);
    expect((await ctx.failure(workflows.remove(w.id, false))).status).toBe(409);
    const results = await Promise.allSettled([workflows.remove(w.id, true), workflows.remove(w.id, true)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    await events.sequenceNow(true);
    const exited = await ctx.query(`SELECT 1 FROM events WHERE type = 'workflow.exited' AND (data->>'workflowId')::int = $1`, [w.id]);
    expect(exited).toHaveLength(1);
  });

  it('does not run steps of a paused workflow; waits keep counting and run on resume', async () => {
    const w = await create({
      steps: [
        { key: 'wait', type: 'wait', duration: '1h', next: 'mark' },
        { key: 'mark', type: 'update_contact', set: { title: 'resumed' } },
      ],
    });
    const c = await contact();
    await enrollments.enrolByHand(w.id, [c]);
    await settle();
    await workflows.patch(w.id, { status: 'paused' }, who);
    clock.travel(2 * 3_600_000);
    await runner.runDue();
    expect((await enrollmentOf(w.id, c)).status).toBe('waiting');
    await workflows.patch(w.id, { status: 'active' }, who);
    await settle();
    expect((await enrollmentOf(w.id, c)).status).toBe('completed');
    expect((await contacts.get(c)).title).toBe('resumed');
  });

  it('adds points in the step transaction: a ledger row per step run, source workflow; beyond the bounds the enrollment fails and nothing is written', async () => {
    const w = await create({ steps: [{ key: 'p', type: 'add_points', points: 7, reason: 'hello' }] });
    const c = await contact();
    await enrollments.enrolByHand(w.id, [c]);
    await settle();
    const e = await enrollmentOf(w.id, c);
    expect(e.status).toBe('completed');
    const ledger = await ctx.query<{ delta: number; source: string; details: Record<string, unknown> }>(
      `SELECT delta, source, details FROM point_ledger WHERE contact_id = $1`,
      [c],
    );
    expect(ledger).toEqual([{ delta: 7, source: 'workflow', details: expect.objectContaining({ enrollmentId: Number(e.id), stepKey: 'p' }) }]);
    const full = await contact();
    await ctx.query(`UPDATE contacts SET points = 2147483000 WHERE id = $1`, [full]);
    const over = await create({ steps: [{ key: 'p', type: 'add_points', points: 1000 }] });
    await enrollments.enrolByHand(over.id, [full]);
    await settle();
    const failed = await enrollmentOf(over.id, full);
    expect(failed.status).toBe('failed');
    expect(failed.error).toContain('delta');
    expect(await ctx.query(`SELECT 1 FROM point_ledger WHERE contact_id = $1`, [full])).toHaveLength(0);
  });

  it('an untilEvent wait racing its timeout ends one way only, once; an event before the wait began does not wake it', async () => {
    const w = await create({
      steps: [
        { key: 'ask', type: 'update_contact', set: { title: 'asked' }, next: 'w' },
        { key: 'w', type: 'wait', untilEvent: { record: 'contact.updated' }, timeout: '1h', next: 'yes', timeoutNext: 'no' },
        { key: 'yes', type: 'add_points', points: 1 },
        { key: 'no', type: 'add_points', points: -1 },
      ],
    });
    const ids = await Promise.all(Array.from({ length: 6 }, () => contact()));
    await enrollments.enrolByHand(w.id, ids);
    await settle();
    // The step's own contact.updated precedes each wait: following the feed wakes nobody.
    await triggers.follow();
    for (const c of ids) expect((await enrollmentOf(w.id, c)).status).toBe('waiting');
    for (const c of ids) await contacts.patch(c, { title: 'answered' }, who);
    clock.travel(3_600_000 + 1000);
    // The follower (waking) and two runners (timing out) at once.
    await Promise.all([triggers.follow(), runner.runDue(), runner.runDue(), triggers.follow()]);
    await triggers.follow();
    await settle();
    for (const c of ids) {
      const e = await enrollmentOf(w.id, c);
      expect(e.status).toBe('completed');
      const runs = await ctx.query<{ step_key: string; outcome: string }>(
        `SELECT step_key, outcome FROM workflow_step_runs WHERE enrollment_id = $1 ORDER BY seq`,
        [e.id],
      );
      expect(runs.filter((r) => r.step_key === 'w' && r.outcome === 'completed')).toHaveLength(1);
      expect(runs.filter((r) => r.step_key === 'yes' || r.step_key === 'no')).toHaveLength(1);
      const points = await ctx.query<{ delta: number }>(`SELECT delta FROM point_ledger WHERE contact_id = $1`, [c]);
      expect(points).toHaveLength(1);
    }
  });
});
