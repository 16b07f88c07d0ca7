import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import { testClock, type TestClock } from './support/clock.js';
import { adminToken, createContact, createDeal, createRecord, uniqueEmail, userId } from './support/fixtures.js';

const HOUR = 3_600_000;

/**
 * Forecast, funnel and snapshot over a small data set whose numbers are computed by hand (below),
 * with time moved by the test clock. Pipeline: Lead 10%, Proposal 50%, Won (won), Lost (lost).
 *
 *   t0  A (1000), B (2000), C (3000, own probability 80), E (500, other owner) enter Lead
 *   t1  A, C → Proposal
 *   t2  B → Lost
 *   t3  A → Won
 *   t5  D (4000, a company) created in Proposal
 *   t6  the reports are read
 */
describe('pipeline reports (forecast, funnel, snapshot) on a hand-computed data set', () => {
  let app: TestApp;
  let clock: TestClock;
  let auth: string;
  let pipelineId: number;
  let stage: Record<string, number>;
  let t0: number;
  let otherOwner: number;
  let companyId: number;
  const deals: Record<string, { id: number }> = {};

  const get = (path: string) => app.http.get(path).set('Authorization', auth);
  const patch = (id: number, body: object) => app.http.patch(`/api/deals/${id}`).set('Authorization', auth).send(body);
  const at = (hours: number) => new Date(t0 + hours * HOUR).toISOString();

  beforeAll(async () => {
    clock = testClock();
    app = await startApp({ env: clock.env });
    auth = await adminToken(app);
    await adminToken(app); // the admin exists; the reader is the other owner
    await app.token('deals:read', { user: 'reader@example.com' });
    otherOwner = await userId(app, 'reader@example.com');
    companyId = (await createRecord(app, auth, '/api/companies', 'company', { name: 'Acme' })).id;
    const contactId = await createContact(app, auth, { email: uniqueEmail('reports.test') });
    const p = await createRecord<{ id: number; stages: { id: number; name: string }[] }>(app, auth, '/api/pipelines', 'pipeline', {
      name: 'Reports',
      stages: [
        { name: 'Lead', probability: 10 },
        { name: 'Proposal', probability: 50 },
        { name: 'Won', probability: 100, type: 'won' },
        { name: 'Lost', probability: 0, type: 'lost' },
      ],
    });
    pipelineId = p.id;
    stage = Object.fromEntries(p.stages.map((s) => [s.name, s.id]));
    const deal = (title: string, body: object) => createDeal(app, auth, contactId, { title, pipeline_id: pipelineId, ...body });
    t0 = clock.now().getTime();
    deals.A = await deal('A', { value: 1000, expected_close_date: '2027-01-05' });
    deals.B = await deal('B', { value: 2000 });
    deals.C = await deal('C', { value: 3000, probability: 80, expected_close_date: '2027-01-15' });
    deals.E = await deal('E', { value: 500, owner_id: otherOwner, expected_close_date: '2027-01-20' });
    clock.travel(HOUR);
    expect((await patch(deals.A.id, { stage: 'Proposal' })).status).toBe(200);
    expect((await patch(deals.C.id, { stage_id: stage.Proposal })).status).toBe(200);
    clock.travel(HOUR);
    expect((await patch(deals.B.id, { status: 'lost' })).body.deal).toMatchObject({ stage: 'Lost', status: 'lost' });
    clock.travel(HOUR);
    expect((await patch(deals.A.id, { status: 'won' })).body.deal).toMatchObject({ stage: 'Won', status: 'won' });
    clock.travel(2 * HOUR);
    deals.D = await deal('D', { value: 4000, stage: 'Proposal', expected_close_date: '2027-02-10', company_id: companyId });
    clock.travel(HOUR);
  });
  afterAll(async () => app?.stop());

  const minutes = (s: number | null) => (s === null ? null : Math.round(s / 60));

  it('the stage history of a deal moved to won: each stay and its time (the current one up to the clock)', async () => {
    const res = await get(`/api/deals/${deals.A.id}/stages`);
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(3);
    expect(res.body.stages.map((s: { stage: string; seconds: number }) => [s.stage, minutes(s.seconds)])).toEqual([
      ['Lead', 60],
      ['Proposal', 120],
      ['Won', 180],
    ]);
    expect(res.body.stages[2]).toMatchObject({ from_stage_id: stage.Proposal, stage_id: stage.Won, left_at: null, value: 1000, probability: 100 });
  });

  it('forecast by month and by owner, with owner and company filters', async () => {
    const res = await get(`/api/pipelines/${pipelineId}/forecast?from=2027-01-01&to=2027-12-31`);
    expect(res.status).toBe(200);
    expect(res.body.forecast).toMatchObject({
      pipelineId,
      from: '2027-01-01',
      to: '2027-12-31',
      groupBy: 'month',
      groups: [
        { month: '2027-01', count: 2, value: 3500, weightedValue: 2450 },
        { month: '2027-02', count: 1, value: 4000, weightedValue: 2000 },
      ],
      totals: { count: 3, value: 7500, weightedValue: 4450 },
    });
    const adminId = await userId(app);
    const byOwner = await get(`/api/pipelines/${pipelineId}/forecast?from=2027-01-01&to=2027-12-31&groupBy=owner`);
    expect(byOwner.body.forecast.groups).toEqual(
      [
        { ownerId: adminId, count: 2, value: 7000, weightedValue: 4400 },
        { ownerId: otherOwner, count: 1, value: 500, weightedValue: 50 },
      ].sort((a, b) => String(a.ownerId).localeCompare(String(b.ownerId))),
    );
    const owner = await get(`/api/pipelines/${pipelineId}/forecast?from=2027-01-01&to=2027-12-31&ownerId=${otherOwner}`);
    expect(owner.body.forecast.groups).toEqual([{ month: '2027-01', count: 1, value: 500, weightedValue: 50 }]);
    const company = await get(`/api/pipelines/${pipelineId}/forecast?from=2027-01-01&to=2027-12-31&companyId=${companyId}`);
    expect(company.body.forecast.totals).toEqual({ count: 1, value: 4000, weightedValue: 2000 });
  });

  it('funnel: entered, moved on, lost, conversions, median and p90 time per stage', async () => {
    const res = await get(`/api/pipelines/${pipelineId}/funnel?from=${encodeURIComponent(at(-1))}&to=${encodeURIComponent(at(10))}`);
    expect(res.status).toBe(200);
    const rows = res.body.funnel.stages.map((s: Record<string, number | null>) => ({
      ...s,
      medianSecondsInStage: minutes(s.medianSecondsInStage),
      p90SecondsInStage: minutes(s.p90SecondsInStage),
    }));
    expect(rows).toEqual([
      // Lead: A, B, C, E entered; A and C moved on, B was lost; A and C reached Proposal or later, A won; stays 1h, 2h, 1h.
      {
        stageId: stage.Lead,
        name: 'Lead',
        type: 'open',
        order: 0,
        entered: 4,
        movedOn: 2,
        lost: 1,
        conversionToNext: 0.5,
        conversionToWon: 0.25,
        medianSecondsInStage: 60,
        p90SecondsInStage: 108,
      },
      // Proposal: A, C, D entered; A moved on to Won after 2h.
      {
        stageId: stage.Proposal,
        name: 'Proposal',
        type: 'open',
        order: 1,
        entered: 3,
        movedOn: 1,
        lost: 0,
        conversionToNext: 0.3333,
        conversionToWon: 0.3333,
        medianSecondsInStage: 120,
        p90SecondsInStage: 120,
      },
      {
        stageId: stage.Won,
        name: 'Won',
        type: 'won',
        order: 2,
        entered: 1,
        movedOn: 0,
        lost: 0,
        conversionToNext: null,
        conversionToWon: 1,
        medianSecondsInStage: null,
        p90SecondsInStage: null,
      },
      {
        stageId: stage.Lost,
        name: 'Lost',
        type: 'lost',
        order: 3,
        entered: 1,
        movedOn: 0,
        lost: 0,
        conversionToNext: null,
        conversionToWon: 0,
        medianSecondsInStage: null,
        p90SecondsInStage: null,
      },
    ]);
    // A window after t0's entries: only D entered (Proposal), A's move to Won and B's loss.
    const late = await get(`/api/pipelines/${pipelineId}/funnel?from=${encodeURIComponent(at(1.5))}&to=${encodeURIComponent(at(10))}`);
    expect(late.body.funnel.stages.map((s: { entered: number }) => s.entered)).toEqual([0, 1, 1, 1]);
    const owner = await get(`/api/pipelines/${pipelineId}/funnel?from=${encodeURIComponent(at(-1))}&ownerId=${otherOwner}`);
    expect(owner.body.funnel.stages[0]).toMatchObject({ entered: 1, movedOn: 0, conversionToNext: 0 });
  });

  it('snapshot: as the pipeline stood before and after the moves, from the ledger', async () => {
    const snap = async (hours: number | null) => {
      const res = await get(`/api/pipelines/${pipelineId}/snapshot${hours === null ? '' : `?asOf=${encodeURIComponent(at(hours))}`}`);
      expect(res.status).toBe(200);
      return res.body.snapshot as { stages: { name: string; count: number; value: number; weightedValue: number }[]; totals: object };
    };
    const rows = (s: Awaited<ReturnType<typeof snap>>) => s.stages.map((x) => [x.name, x.count, x.value, x.weightedValue]);
    // t0.5: everyone in Lead (C at its own 80%); D absent.
    const early = await snap(0.5);
    expect(rows(early)).toEqual([
      ['Lead', 4, 6500, 2750],
      ['Proposal', 0, 0, 0],
      ['Won', 0, 0, 0],
      ['Lost', 0, 0, 0],
    ]);
    // t2.5: A in Proposal (before its move to Won), B lost.
    const middle = await snap(2.5);
    expect(rows(middle)).toEqual([
      ['Lead', 1, 500, 50],
      ['Proposal', 2, 4000, 2900],
      ['Won', 0, 0, 0],
      ['Lost', 1, 2000, 0],
    ]);
    expect(middle.totals).toEqual({ count: 4, value: 6500, weightedValue: 2950 });
    // Now: A won, D in Proposal.
    expect(rows(await snap(null))).toEqual([
      ['Lead', 1, 500, 50],
      ['Proposal', 2, 7000, 4400],
      ['Won', 1, 1000, 1000],
      ['Lost', 1, 2000, 0],
    ]);
    const owner = await get(`/api/pipelines/${pipelineId}/snapshot?asOf=${encodeURIComponent(at(2.5))}&ownerId=${otherOwner}`);
    expect(owner.body.snapshot.totals).toEqual({ count: 1, value: 500, weightedValue: 50 });
  });

  it('bad input: asOf in the future, a window over 5 years, from after to, unknown parameters, unknown pipeline', async () => {
    const base = `/api/pipelines/${pipelineId}`;
    expectError(await get(`${base}/snapshot?asOf=${encodeURIComponent(at(7))}`), 400, 'validation_failed');
    expectError(await get(`${base}/snapshot?asOf=yesterday`), 400, 'validation_failed');
    expectError(await get(`${base}/forecast?from=2027-01-01&to=2032-06-01`), 400, 'validation_failed');
    expectError(await get(`${base}/funnel?from=2020-01-01&to=2026-01-02`), 400, 'validation_failed');
    expectError(await get(`${base}/forecast?from=2027-02-01&to=2027-01-01`), 400, 'validation_failed');
    expectError(await get(`${base}/forecast?groupBy=week`), 400, 'validation_failed');
    expectError(await get(`${base}/funnel?owner=1`), 400, 'validation_failed');
    expectError(await get(`${base}/snapshot?ownerId=abc`), 400, 'validation_failed');
    expectError(await get(`/api/pipelines/987654/snapshot`), 404, 'not_found');
    const reader = await app.token('deals:read', { user: 'reader@example.com' });
    expect((await app.http.get(`${base}/snapshot`).set('Authorization', `Bearer ${reader}`)).status).toBe(200);
    const none = await app.token('pipelines:read', { user: 'other@example.com' });
    expect((await app.http.get(`${base}/funnel`).set('Authorization', `Bearer ${none}`)).status).toBe(403);
  });
});
