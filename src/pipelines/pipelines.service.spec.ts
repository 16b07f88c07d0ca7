import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { DealsService } from '../deals/deals.service.js';
import { PipelinesService } from './pipelines.service.js';

describe('PipelinesService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let pipelines: PipelinesService;
  let deals: DealsService;
  let contactId: number;

  beforeAll(async () => {
    pipelines = spec.ctx.get(PipelinesService);
    deals = spec.ctx.get(DealsService);
    contactId = await spec.ctx.contact('P', 'p');
  });

  const stages = () => [
    { name: 'Lead', probability: 10 },
    { name: 'Proposal', probability: 50 },
    { name: 'Won', probability: 100, type: 'won' as const },
    { name: 'Lost', probability: 0, type: 'lost' as const },
  ];
  const newPipeline = (name = `P${Date.now()}`) => pipelines.create({ name, stages: stages() }, spec.who);
  const fields = async (call: Promise<unknown>) => (await spec.ctx.failure(call)).details?.map((d) => d.field);

  it('creates a strict pipeline with its stages in order, reads and lists it', async () => {
    const p = await newPipeline('Enterprise');
    expect(p).toMatchObject({ name: 'Enterprise', isDefault: false, strictStages: true, createdBy: spec.who.userId });
    expect(p.stages.map((s) => [s.name, s.order, s.probability, s.type])).toEqual([
      ['Lead', 0, 10, 'open'],
      ['Proposal', 1, 50, 'open'],
      ['Won', 2, 100, 'won'],
      ['Lost', 3, 0, 'lost'],
    ]);
    expect(await pipelines.get(p.id)).toEqual(p);
    const listed = await pipelines.list({ search: 'Enterprise' });
    expect(listed.pipelines).toEqual([p]);
    expect((await pipelines.list({ isDefault: 'true' })).pipelines.map((x) => x.name)).toEqual(['Sales']);
    await expect(pipelines.get(987654)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a pipeline without an open stage, two stages with one name, a probability outside 0..100', async () => {
    expect(await fields(pipelines.create({ name: 'x', stages: [{ name: 'W', probability: 100, type: 'won' }] }, spec.who))).toEqual(['stages']);
    const dup = await spec.ctx.failure(
      pipelines.create(
        {
          name: 'x',
          stages: [
            { name: 'A', probability: 1 },
            { name: ' A', probability: 2 },
          ],
        },
        spec.who,
      ),
    );
    expect(dup).toMatchObject({ status: 400 });
    expect(dup.details?.[0].message).toMatch(/two stages are named "A"/);
    expect(await fields(pipelines.create({ name: 'x', stages: [{ name: 'A', probability: 101 }] }, spec.who))).toEqual(['probability']);
  });

  it('adds, renames, reorders and re-probabilities stages; the deals in a renamed stage follow its name', async () => {
    const p = await newPipeline();
    const [lead, proposal] = p.stages;
    const deal = await deals.create({ title: 'D', value: 10, contact_id: contactId, pipeline_id: p.id, stage_id: proposal.id }, spec.who);
    let next = await pipelines.addStage(p.id, { name: 'Demo', probability: 30, order: 1 }, spec.who);
    expect(next.stages.map((s) => s.name)).toEqual(['Lead', 'Demo', 'Proposal', 'Won', 'Lost']);
    next = await pipelines.updateStage(p.id, proposal.id, { name: 'Offer', probability: 60, order: 0 }, spec.who);
    expect(next.stages.map((s) => [s.name, s.order, s.probability])).toEqual([
      ['Offer', 0, 60],
      ['Lead', 1, 10],
      ['Demo', 2, 30],
      ['Won', 3, 100],
      ['Lost', 4, 0],
    ]);
    expect(await deals.get(deal.id)).toMatchObject({ stage: 'Offer', stage_id: proposal.id, probability: 60 });
    expect(await fields(pipelines.addStage(p.id, { name: 'Lead', probability: 5 }, spec.who))).toEqual(['name']);
    expect(await fields(pipelines.updateStage(p.id, lead.id, { name: 'Demo' }, spec.who))).toEqual(['stages']);
    await expect(pipelines.updateStage(p.id, 987654, { name: 'x' }, spec.who)).rejects.toMatchObject({ status: 404 });
  });

  it('removes a stage: 409 while it holds deals, moveDealsTo moves them (ledger rows, status), never the last open stage', async () => {
    const p = await newPipeline();
    const [lead, proposal, won] = p.stages;
    const other = await newPipeline();
    const d1 = await deals.create({ title: 'A', value: 10, contact_id: contactId, pipeline_id: p.id, stage_id: proposal.id }, spec.who);
    const d2 = await deals.create({ title: 'B', value: 20, contact_id: contactId, pipeline_id: p.id, stage_id: proposal.id }, spec.who);
    expect((await spec.ctx.failure(pipelines.removeStage(p.id, proposal.id, undefined, spec.who))).status).toBe(409);
    expect(await fields(pipelines.removeStage(p.id, proposal.id, other.stages[0].id, spec.who))).toEqual(['moveDealsTo']);
    const after = await pipelines.removeStage(p.id, proposal.id, won.id, spec.who);
    expect(after.stages.map((s) => s.name)).toEqual(['Lead', 'Won', 'Lost']);
    for (const id of [d1.id, d2.id]) {
      expect(await deals.get(id)).toMatchObject({ stage_id: won.id, stage: 'Won', status: 'won', closed_at: expect.any(String) });
      const history = await deals.stageHistory(id);
      expect(history.map((h) => [h.from_stage_id, h.stage_id])).toEqual([
        [null, proposal.id],
        [proposal.id, won.id],
      ]);
      // The removed stage keeps its name in the history.
      expect(history[0].stage).toBe('Proposal');
    }
    expect(await fields(pipelines.removeStage(p.id, lead.id, undefined, spec.who))).toEqual(['stages']);
    // A deal cannot be written into a removed stage.
    expect(await fields(deals.create({ title: 'C', value: 1, contact_id: contactId, pipeline_id: p.id, stage_id: proposal.id }, spec.who))).toEqual([
      'stage_id',
    ]);
  });

  it('PUT and PATCH stages: kept by id, added without, removed when left out (409 when it holds deals)', async () => {
    const p = await newPipeline();
    const [lead, proposal, won, lost] = p.stages;
    await deals.create({ title: 'A', value: 1, contact_id: contactId, pipeline_id: p.id, stage_id: lead.id }, spec.who);
    const r = await pipelines.put(
      p.id,
      {
        name: 'Renamed',
        stages: [
          { id: lead.id, name: 'Lead', probability: 15 },
          { name: 'Qualified', probability: 40 },
          { id: won.id, name: 'Won', probability: 100, type: 'won' },
          { id: lost.id, name: 'Lost', probability: 0, type: 'lost' },
        ],
      },
      spec.who,
    );
    expect(r.created).toBe(false);
    expect(r.pipeline.stages.map((s) => s.name)).toEqual(['Lead', 'Qualified', 'Won', 'Lost']);
    expect(r.pipeline.stages.some((s) => s.id === proposal.id)).toBe(false);
    const swapped = await pipelines.patch(
      p.id,
      {
        stages: [
          { id: lead.id, name: 'Qualified', probability: 15 },
          { id: r.pipeline.stages[1].id, name: 'Lead', probability: 40 },
          { id: won.id, name: 'Won', probability: 100, type: 'won' },
          { id: lost.id, name: 'Lost', probability: 0, type: 'lost' },
        ],
      },
      spec.who,
    );
    expect(swapped.stages.map((s) => [s.id, s.name])).toEqual([
      [lead.id, 'Qualified'],
      [r.pipeline.stages[1].id, 'Lead'],
      [won.id, 'Won'],
      [lost.id, 'Lost'],
    ]);
    const patched = await spec.ctx.failure(pipelines.patch(p.id, { stages: [{ name: 'Only', probability: 5 }] }, spec.who));
    expect(patched.status).toBe(409);
    const created = await pipelines.put(987654, { name: 'Fresh', stages: stages() }, spec.who);
    expect(created.created).toBe(true);
    expect(created.pipeline.id).not.toBe(987654);
  });

  it('moves the default mark; the default pipeline cannot be unmarked or deleted', async () => {
    const before = (await pipelines.list({ isDefault: 'true' })).pipelines[0];
    expect(await fields(pipelines.patch(before.id, { isDefault: false }, spec.who))).toEqual(['isDefault']);
    await expect(pipelines.remove(before.id)).rejects.toMatchObject({ status: 409 });
    const p = await pipelines.create({ name: 'New default', isDefault: true, stages: stages() }, spec.who);
    expect((await pipelines.list({ isDefault: 'true' })).pipelines.map((x) => x.id)).toEqual([p.id]);
    const deal = await deals.create({ title: 'Default', value: 1, contact_id: contactId }, spec.who);
    expect(deal).toMatchObject({ pipeline_id: p.id, stage: 'Lead' });
    await pipelines.patch(before.id, { isDefault: true }, spec.who);
    expect((await pipelines.get(p.id)).isDefault).toBe(false);
  });

  it('DELETE: 409 while it holds deals; exactly one of parallel deletes succeeds', async () => {
    const p = await newPipeline();
    const d = await deals.create({ title: 'A', value: 1, contact_id: contactId, pipeline_id: p.id }, spec.who);
    await expect(pipelines.remove(p.id)).rejects.toMatchObject({ status: 409 });
    await deals.remove(d.id);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => pipelines.remove(p.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 404 });
  });

  it('parallel stage additions and edits all land, one pipeline.updated each', async () => {
    const p = await newPipeline();
    const names = Array.from({ length: 6 }, (_, i) => `S${i}`);
    await Promise.all([
      ...names.map((name) => pipelines.addStage(p.id, { name, probability: 20 }, spec.who)),
      pipelines.patch(p.id, { name: 'Busy' }, spec.who),
    ]);
    const after = await pipelines.get(p.id);
    expect(after.name).toBe('Busy');
    expect(after.stages.map((s) => s.name).sort()).toEqual([...names, 'Lead', 'Lost', 'Proposal', 'Won'].sort());
    expect(after.stages.map((s) => s.order)).toEqual([...after.stages.keys()]);
    const events = await spec.ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'pipeline.updated' AND (data->>'id')::int = $1`, [
      p.id,
    ]);
    expect(events[0].n).toBe(7);
  });
});
