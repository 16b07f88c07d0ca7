import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { waitUntil } from '../../test/support/wait.js';
import { CampaignsService } from '../campaigns/campaigns.service.js';
import type { Principal } from '../common/request.js';
import { EventsService } from '../events/events.service.js';
import { SegmentsService } from '../segments/segments.service.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowRunner } from './workflow-runner.js';
import type { CreateWorkflowDto } from './workflow.dto.js';
import { WorkflowsService } from './workflows.service.js';

/**
 * The engine's batch execution (WorkflowEngine.processBatch) on the real database: a batch of
 * enrollments goes through each set-based step type as one group, each effect exactly once per
 * enrollment (ledger rows, memberships, text messages with their provider calls and idempotency
 * keys, events); an enrollment of a group that fails marks only itself failed. The background
 * runner is off (APP_ROLE=api: no loop), so each batch is the one runDue claims here; the jobs (the
 * SMS sends) still run in process.
 */
describe('WorkflowEngine batches (service layer, real PostgreSQL)', () => {
  const N = 40;
  let ctx: ServiceContext;
  let workflows: WorkflowsService;
  let enrollments: EnrollmentsService;
  let runner: WorkflowRunner;
  let events: EventsService;
  let who: Principal;
  let seq = 0;

  beforeAll(async () => {
    ctx = await startServiceContext({ APP_ROLE: 'api', WORKFLOW_POLL_INTERVAL_MS: '60000' });
    workflows = ctx.get(WorkflowsService);
    enrollments = ctx.get(EnrollmentsService);
    runner = ctx.get(WorkflowRunner);
    events = ctx.get(EventsService);
    who = await ctx.principal();
  });
  afterAll(async () => ctx?.close());

  const create = (body: Partial<CreateWorkflowDto> & { steps: Record<string, unknown>[] }) =>
    workflows.create({ name: `batch wf ${++seq}`, trigger: { type: 'manual' }, status: 'active', ...body }, who);
  /** `n` contacts with distinct phones, half of them CEOs. */
  const contacts = async (n: number): Promise<number[]> => {
    const base = ++seq * 1000;
    const rows = await ctx.query<{ id: number }>(
      `INSERT INTO contacts (name, email, phone, title)
       SELECT 'Batch ' || g, 'batch' || $1::int || '-' || g || '@svc.test', '+1415' || lpad(($1::int + g)::text, 7, '0'), CASE WHEN g % 2 = 0 THEN 'CEO' ELSE 'CTO' END
         FROM generate_series(1, $2) g RETURNING id`,
      [base, n],
    );
    return rows.map((r) => r.id).sort((a, b) => a - b);
  };
  const runAll = async () => {
    for (let i = 0; i < 20 && (await runner.runDue()) > 0; i++);
  };
  const enrollmentsOf = (workflowId: number) =>
    ctx.query<{ id: string; contact_id: number; status: string; error: string | null }>(
      `SELECT id, contact_id, status, error FROM workflow_enrollments WHERE workflow_id = $1 ORDER BY contact_id`,
      [workflowId],
    );
  const countEvents = async (type: string, where: string, params: unknown[]) => {
    await events.sequenceNow(true);
    const rows = await ctx.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE type = $1 AND ${where}`, [type, ...params]);
    return Number(rows[0].n);
  };

  it('runs each set-based step type over a batch as one group, each effect exactly once per enrollment', async () => {
    const campaign = await ctx.get(CampaignsService).create({ name: `batch campaign ${++seq}` }, who);
    const segment = await ctx.get(SegmentsService).create({ name: `batch segment ${++seq}`, type: 'static' }, who);
    const w = await create({
      steps: [
        { key: 'split', type: 'branch', branches: [{ filter: 'title[eq]:CEO', next: 'ceo' }], defaultNext: 'other' },
        { key: 'ceo', type: 'update_contact', set: { title: 'Lead CEO' }, next: 'points' },
        { key: 'other', type: 'update_contact', set: { title: 'Lead' }, next: 'points' },
        { key: 'points', type: 'add_points', points: 5, reason: 'batch', next: 'join' },
        { key: 'join', type: 'add_to_campaign', campaignId: campaign.id, next: 'seg' },
        { key: 'seg', type: 'add_to_segment', segmentId: segment.id, next: 'sms' },
        { key: 'sms', type: 'send_sms', body: 'Hello {{contact.name}}' },
      ],
    });
    const ids = await contacts(N);
    expect((await enrollments.enrolByHand(w.id, ids)).enrolled).toBe(N);
    await runAll();

    const rows = await enrollmentsOf(w.id);
    expect(rows.map((r) => r.status)).toEqual(Array<string>(N).fill('completed'));
    const byContact = new Map(rows.map((r) => [r.contact_id, Number(r.id)]));

    // History: six runs per enrollment, in order; the branch routed by title.
    const runs = await ctx.query<{ enrollment_id: string; seq: number; step_key: string; detail: Record<string, unknown> }>(
      `SELECT r.enrollment_id, r.seq, r.step_key, r.detail FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id
        WHERE e.workflow_id = $1 ORDER BY r.enrollment_id, r.seq`,
      [w.id],
    );
    expect(runs).toHaveLength(N * 6);
    const titles = await ctx.query<{ id: number; title: string }>(`SELECT id, title FROM contacts WHERE id = ANY($1::int[]) ORDER BY id`, [ids]);
    for (const [i, t] of titles.entries()) expect(t.title).toBe(i % 2 === 1 ? 'Lead CEO' : 'Lead');
    // The campaign and segment steps ran as one statement for the whole group (its count is the group's).
    const join = runs.filter((r) => r.step_key === 'join');
    expect(join.every((r) => r.detail.addedInGroup === N && r.detail.group === N)).toBe(true);
    expect(runs.filter((r) => r.step_key === 'seg').every((r) => r.detail.addedInGroup === N)).toBe(true);

    // Points: one ledger row per enrollment, source workflow, naming its enrollment; each contact's points once.
    const ledger = await ctx.query<{ contact_id: number; delta: number; source: string; details: { enrollmentId: number; stepKey: string } }>(
      `SELECT contact_id, delta, source, details FROM point_ledger WHERE contact_id = ANY($1::int[]) ORDER BY contact_id`,
      [ids],
    );
    expect(ledger).toHaveLength(N);
    for (const l of ledger) {
      expect(l).toMatchObject({ delta: 5, source: 'workflow', details: { enrollmentId: byContact.get(l.contact_id), stepKey: 'points' } });
    }
    const points = await ctx.query<{ points: number }>(`SELECT points FROM contacts WHERE id = ANY($1::int[])`, [ids]);
    expect(points.every((p) => p.points === 5)).toBe(true);

    // Memberships: once each.
    expect(await ctx.query(`SELECT 1 FROM campaign_members WHERE campaign_id = $1 AND contact_id = ANY($2::int[])`, [campaign.id, ids])).toHaveLength(N);
    expect(await ctx.query(`SELECT 1 FROM segment_members WHERE segment_id = $1 AND contact_id = ANY($2::int[])`, [segment.id, ids])).toHaveLength(N);

    // SMS: one message per enrollment, named by its step run, rendered for its contact, handed to the provider once with its key.
    const messages = await ctx.query<{ id: number; contact_id: number; content: string }>(
      `SELECT id, contact_id, content FROM text_messages WHERE contact_id = ANY($1::int[]) ORDER BY contact_id`,
      [ids],
    );
    expect(messages).toHaveLength(N);
    const smsRuns = new Map(runs.filter((r) => r.step_key === 'sms').map((r) => [Number(r.enrollment_id), r.detail.textMessageId]));
    for (const m of messages) {
      expect(smsRuns.get(byContact.get(m.contact_id) as number)).toBe(m.id);
      expect(m.content).toMatch(/^Hello Batch \d+$/);
    }
    const messageIds = new Set(messages.map((m) => m.id));
    await waitUntil('the provider calls', async () => ctx.sms.sent.filter((s) => messageIds.has(s.messageId)).length >= N || null, 15000, 50);
    const calls = ctx.sms.sent.filter((s) => messageIds.has(s.messageId));
    expect(calls).toHaveLength(N);
    expect(new Set(calls.map((c) => c.idempotencyKey))).toEqual(new Set(messages.map((m) => `textmessage-${m.id}-1`)));

    // Events: one workflow.step_completed per step run, one workflow.completed per enrollment, the effects' own events once each.
    expect(await countEvents('workflow.step_completed', `(data->'enrollment'->>'workflowId')::int = $2`, [w.id])).toBe(N * 6);
    expect(await countEvents('workflow.completed', `(data->>'workflowId')::int = $2`, [w.id])).toBe(N);
    expect(await countEvents('contact.updated', `(data->>'id')::int = ANY($2::int[])`, [ids])).toBe(N);
    expect(await countEvents('campaign.contact_added', `(data->>'campaignId')::int = $2`, [campaign.id])).toBe(N);
    expect(await countEvents('text_message.queued', `(data->>'id')::int = ANY($2::int[])`, [[...messageIds]])).toBe(N);
    // A second pass finds nothing due and writes nothing more.
    expect(await runner.runDue()).toBe(0);
    expect(await ctx.query(`SELECT 1 FROM point_ledger WHERE contact_id = ANY($1::int[])`, [ids])).toHaveLength(N);
  });

  it('fails only the enrollment whose step fails in a group; the others complete with their effects once', async () => {
    const campaign = await ctx.get(CampaignsService).create({ name: `batch campaign ${++seq}` }, who);
    const w = await create({
      steps: [
        { key: 'points', type: 'add_points', points: 1000, next: 'sms' },
        { key: 'sms', type: 'send_sms', body: 'Hi {{contact.name}}', next: 'join' },
        { key: 'join', type: 'add_to_campaign', campaignId: campaign.id },
      ],
    });
    const ids = await contacts(12);
    // One contact whose points would pass 2^31 (the set-based ledger write fails; the group runs one by one),
    // one without a phone (the SMS batch tells it apart).
    const [full, phoneless] = [ids[3], ids[7]];
    await ctx.query(`UPDATE contacts SET points = 2147483000 WHERE id = $1`, [full]);
    await ctx.query(`UPDATE contacts SET phone = NULL WHERE id = $1`, [phoneless]);
    await enrollments.enrolByHand(w.id, ids);
    await runAll();

    const rows = await enrollmentsOf(w.id);
    for (const r of rows) {
      if (r.contact_id === full) {
        expect(r.status).toBe('failed');
        expect(r.error).toContain('delta');
      } else if (r.contact_id === phoneless) {
        expect(r.status).toBe('failed');
        expect(r.error).toContain('phone');
      } else expect(r.status).toBe('completed');
    }
    const good = ids.filter((id) => id !== full && id !== phoneless);
    const ledger = await ctx.query<{ contact_id: number }>(`SELECT contact_id FROM point_ledger WHERE contact_id = ANY($1::int[]) ORDER BY contact_id`, [ids]);
    expect(ledger.map((l) => l.contact_id)).toEqual([...good, phoneless].sort((a, b) => a - b));
    expect((await ctx.query<{ points: number }>(`SELECT points FROM contacts WHERE id = $1`, [full]))[0].points).toBe(2147483000);
    const texted = await ctx.query<{ contact_id: number }>(`SELECT contact_id FROM text_messages WHERE contact_id = ANY($1::int[]) ORDER BY contact_id`, [ids]);
    expect(texted.map((t) => t.contact_id)).toEqual(good);
    const members = await ctx.query<{ contact_id: number }>(`SELECT contact_id FROM campaign_members WHERE campaign_id = $1 ORDER BY contact_id`, [
      campaign.id,
    ]);
    expect(members.map((m) => m.contact_id)).toEqual(good);
    expect(await countEvents('workflow.failed', `(data->>'workflowId')::int = $2`, [w.id])).toBe(2);
    expect(await countEvents('workflow.completed', `(data->>'workflowId')::int = $2`, [w.id])).toBe(good.length);
    const stats = await workflows.stats(w.id);
    expect(stats.failed).toBe(2);
    expect(stats.steps.find((s) => s.key === 'points')?.failed).toBe(1);
    expect(stats.steps.find((s) => s.key === 'sms')?.failed).toBe(1);
  });
});
