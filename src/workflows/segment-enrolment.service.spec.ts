import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { SegmentsService } from '../segments/segments.service.js';
import { ENROL_INLINE, SegmentEnrolment } from './segment-enrolment.js';
import type { CreateWorkflowDto } from './workflow.dto.js';
import { WorkflowsService } from './workflows.service.js';

/**
 * Activating a segment_entered workflow over a segment larger than one inline chunk: the first
 * ENROL_INLINE members before the activation answers, the rest by the background job (run here
 * also by hand, several runs at once), each member once with one workflow.enrolled event, under the
 * reenrollment rule, a member a trigger enrolled meanwhile not twice, and a paused workflow's
 * enrolment stopped. On the real database (the jobs in process).
 */
describe('segment enrolment on activation (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let workflows: WorkflowsService;
  let segments: SegmentsService;
  let enrolment: SegmentEnrolment;
  let who: Principal;
  let seq = 0;
  const MEMBERS = ENROL_INLINE + 2_500;

  beforeAll(async () => {
    ctx = await startServiceContext({ WORKFLOW_POLL_INTERVAL_MS: '60000' });
    workflows = ctx.get(WorkflowsService);
    segments = ctx.get(SegmentsService);
    enrolment = ctx.get(SegmentEnrolment);
    who = await ctx.principal();
  });
  afterAll(async () => ctx?.close());

  /** A static segment of `n` new contacts (seeded in SQL); answers its id and the contacts in id order. */
  const segmentOf = async (n: number) => {
    const tag = `se${++seq}x${Date.now()}`;
    await ctx.query(`INSERT INTO contacts (name, email) SELECT 'M' || g, '${tag}-' || g || '@enrol.test' FROM generate_series(1, $1::int) g`, [n]);
    const ids = (await ctx.query<{ id: number }>(`SELECT id FROM contacts WHERE email LIKE '${tag}-%' ORDER BY id`)).map((r) => r.id);
    const s = await segments.create({ name: `members ${tag}`, type: 'static' }, who);
    await ctx.query(`INSERT INTO segment_members (segment_id, contact_id) SELECT $1, unnest($2::int[])`, [s.id, ids]);
    return { segmentId: s.id, ids };
  };
  const create = (segmentId: number, extra: Partial<CreateWorkflowDto> = {}) =>
    workflows.create(
      { name: `enrol ${++seq}`, trigger: { type: 'segment_entered', segmentId }, steps: [{ key: 'wait', type: 'wait', duration: '30d' }], ...extra },
      who,
    );
  const counts = async (workflowId: number) =>
    (
      await ctx.query<{ enrollments: number; contacts: number; events: number }>(
        `SELECT (SELECT count(*) FROM workflow_enrollments WHERE workflow_id = $1)::int AS enrollments,
                (SELECT count(DISTINCT contact_id) FROM workflow_enrollments WHERE workflow_id = $1)::int AS contacts,
                (SELECT count(*) FROM events WHERE type = 'workflow.enrolled' AND (data->>'workflowId')::int = $1)::int AS events`,
        [workflowId],
      )
    )[0];
  const finished = async (workflowId: number) => {
    for (let i = 0; i < 300; i++) {
      const r = (await ctx.query<{ finished_at: Date | null }>(`SELECT finished_at FROM workflow_segment_enrolments WHERE workflow_id = $1`, [workflowId]))[0];
      if (r?.finished_at) return;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error('the segment enrolment did not finish');
  };

  it('enrols the first members at once and the rest in the background, each once with its event, whatever runs race', async () => {
    const { segmentId, ids } = await segmentOf(MEMBERS);
    const w = await create(segmentId, { status: 'active' });
    // The activation answered with the first chunk enrolled.
    expect(w.stats.entered).toBe(ENROL_INLINE);
    // The background job and three more runs at once: the cursor's row lock orders them.
    await Promise.all([1, 2, 3].map(() => enrolment.run(w.id, Date.now())));
    await finished(w.id);
    expect(await counts(w.id)).toEqual({ enrollments: MEMBERS, contacts: MEMBERS, events: MEMBERS });
    const firstAndLast = await ctx.query<{ contact_id: number; status: string; step_key: string }>(
      `SELECT contact_id, status, step_key FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = ANY($2::int[]) ORDER BY contact_id`,
      [w.id, [ids[0], ids[ids.length - 1]]],
    );
    expect(firstAndLast.map((r) => [r.contact_id, r.step_key])).toEqual([
      [ids[0], 'wait'],
      [ids[ids.length - 1], 'wait'],
    ]);
    const row = (
      await ctx.query<{ enrolled: string; after_contact_id: number }>(
        `SELECT enrolled, after_contact_id FROM workflow_segment_enrolments WHERE workflow_id = $1`,
        [w.id],
      )
    )[0];
    expect(row).toEqual({ enrolled: String(MEMBERS), after_contact_id: ids[ids.length - 1] });
  });

  it('follows the reenrollment rule and skips members a trigger enrolled meanwhile', async () => {
    const { segmentId, ids } = await segmentOf(MEMBERS);
    // never: activated, paused, resumed: nobody twice.
    const never = await create(segmentId, { status: 'active' });
    await finished(never.id);
    await workflows.patch(never.id, { status: 'paused' }, who);
    await workflows.patch(never.id, { status: 'active' }, who);
    await finished(never.id);
    expect(await counts(never.id)).toEqual({ enrollments: MEMBERS, contacts: MEMBERS, events: MEMBERS });

    // afterExit: a member whose enrollment ended (before the activation) enters again; one running does not.
    const after = await create(segmentId, { settings: { reenrollment: 'afterExit', timezone: 'UTC', sendWindow: null } });
    const late = ids[ids.length - 1];
    const running = ids[ids.length - 2];
    await ctx.query(
      `INSERT INTO workflow_enrollments (workflow_id, version, contact_id, status, step_key, next_at, entered_at, ended_at)
       VALUES ($1, 1, $2, 'completed', 'wait', NULL, now() - interval '1 day', now() - interval '1 hour'),
              ($1, 1, $3, 'waiting', 'wait', now() + interval '1 day', now() - interval '1 day', NULL)`,
      [after.id, late, running],
    );
    await workflows.patch(after.id, { status: 'active' }, who);
    await finished(after.id);
    const byContact = await ctx.query<{ contact_id: number; n: number }>(
      `SELECT contact_id, count(*)::int AS n FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = ANY($2::int[]) GROUP BY contact_id ORDER BY contact_id`,
      [after.id, [running, late]],
    );
    expect(byContact).toEqual([
      { contact_id: running, n: 1 },
      { contact_id: late, n: 2 },
    ]);
    // Every member has one running enrollment.
    const runningNow = await ctx.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status IN ('active', 'waiting')`,
      [after.id],
    );
    expect(runningNow[0].n).toBe(MEMBERS);
  });

  it('skips a member a trigger enrolled after the activation, and a run finds a paused workflow and stops', async () => {
    const { segmentId, ids } = await segmentOf(MEMBERS);
    const w = await create(segmentId, { settings: { reenrollment: 'always', timezone: 'UTC', sendWindow: null } });
    // A member a trigger enrolled (and that ended) after the activation began: not enrolled again by it.
    const last = ids[ids.length - 1];
    await ctx.query(
      `INSERT INTO workflow_enrollments (workflow_id, version, contact_id, status, step_key, next_at, entered_at, ended_at)
       VALUES ($1, 1, $2, 'completed', 'wait', NULL, now() + interval '1 minute', now() + interval '2 minutes')`,
      [w.id, last],
    );
    await workflows.patch(w.id, { status: 'active' }, who);
    await finished(w.id);
    const lastRows = await ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM workflow_enrollments WHERE workflow_id = $1 AND contact_id = $2`, [
      w.id,
      last,
    ]);
    expect(lastRows[0].n).toBe(1);
    expect(await counts(w.id)).toMatchObject({ enrollments: MEMBERS, contacts: MEMBERS, events: MEMBERS - 1 });
    // Paused with its enrolment unfinished: a run ends it without enrolling anyone.
    await workflows.patch(w.id, { status: 'paused' }, who);
    await ctx.query(`UPDATE workflow_segment_enrolments SET finished_at = NULL, after_contact_id = 0 WHERE workflow_id = $1`, [w.id]);
    await enrolment.run(w.id, Date.now());
    await finished(w.id);
    expect(await counts(w.id)).toMatchObject({ enrollments: MEMBERS, events: MEMBERS - 1 });
  });
});
