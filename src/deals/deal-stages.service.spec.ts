import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Clock } from '../common/clock.js';
import { PipelinesService } from '../pipelines/pipelines.service.js';
import { DealsService } from './deals.service.js';

describe('deals in pipeline stages, and the stage ledger (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let pipelines: PipelinesService;
  let deals: DealsService;
  let clock: Clock;
  let contactId: number;

  beforeAll(async () => {
    pipelines = spec.ctx.get(PipelinesService);
    deals = spec.ctx.get(DealsService);
    clock = spec.ctx.get(Clock);
    contactId = await spec.ctx.contact('S', 's');
  });

  const strict = () =>
    pipelines.create(
      {
        name: `Strict ${Date.now()}`,
        stages: [
          { name: 'Lead', probability: 10 },
          { name: 'Proposal', probability: 50 },
          { name: 'Won', probability: 100, type: 'won' },
          { name: 'Lost', probability: 0, type: 'lost' },
        ],
      },
      spec.who,
    );
  const base = (extra: object = {}) => ({ title: 'D', value: 100, contact_id: contactId, ...extra });
  const ledger = (dealId: number) =>
    spec.ctx.query<{ from_stage_id: number | null; to_stage_id: number; value: string; probability: number }>(
      `SELECT from_stage_id, to_stage_id, value::text, probability FROM deal_stage_changes WHERE deal_id = $1 ORDER BY id`,
      [dealId],
    );

  it("a new deal goes to the default pipeline's first open stage, with one ledger row; its record names pipeline, stage and entry time", async () => {
    const d = await deals.create(base(), spec.who);
    const def = (await pipelines.list({ isDefault: 'true' })).pipelines[0];
    expect(d).toMatchObject({
      pipeline_id: def.id,
      stage_id: def.stages[0].id,
      stage: def.stages[0].name,
      status: 'open',
      entered_stage_at: expect.any(String),
    });
    expect(await ledger(d.id)).toEqual([{ from_stage_id: null, to_stage_id: d.stage_id, value: '100.00', probability: d.probability }]);
  });

  it('strict pipelines refuse an unknown stage name listing the stages; the default pipeline adds it as an open stage', async () => {
    const p = await strict();
    const e = await spec.ctx.failure(deals.create(base({ pipeline_id: p.id, stage: 'Nope' }), spec.who));
    expect(e.details?.[0]).toMatchObject({ field: 'stage' });
    expect(e.message).toMatch(/Lead .*Proposal .*Won .*Lost/);
    const d = await deals.create(base({ stage: `free text ${Date.now()}` }), spec.who);
    const def = await pipelines.get(d.pipeline_id);
    expect(def.stages.at(-1)).toMatchObject({ id: d.stage_id, name: d.stage, type: 'open', probability: 0 });
    // Parallel writers of one new name share the one stage.
    const name = `parallel ${Date.now()}`;
    const made = await Promise.all(Array.from({ length: 5 }, () => deals.create(base({ stage: name }), spec.who)));
    expect(new Set(made.map((m) => m.stage_id)).size).toBe(1);
  });

  it('status won|lost moves to the first stage of that type; status follows the stage; mismatches and missing types are 400s', async () => {
    const p = await strict();
    const [lead, proposal, won, lost] = p.stages;
    const d = await deals.create(base({ pipeline_id: p.id, stage: 'Proposal', probability: 70 }), spec.who);
    expect(d).toMatchObject({ stage_id: proposal.id, probability: 70, status: 'open' });
    expect(await deals.patch(d.id, { status: 'won' }, spec.who)).toMatchObject({
      stage_id: won.id,
      stage: 'Won',
      status: 'won',
      closed_at: expect.any(String),
    });
    expect(await deals.patch(d.id, { stage_id: lost.id }, spec.who)).toMatchObject({ status: 'lost' });
    expect(await deals.patch(d.id, { status: 'open' }, spec.who)).toMatchObject({ stage_id: lead.id, status: 'open', closed_at: null });
    expect((await spec.ctx.failure(deals.patch(d.id, { stage_id: proposal.id, status: 'won' }, spec.who))).details?.[0].field).toBe('status');
    const other = await strict();
    expect((await spec.ctx.failure(deals.patch(d.id, { stage_id: other.stages[0].id }, spec.who))).details?.[0].field).toBe('stage_id');
    expect((await spec.ctx.failure(deals.create(base({ pipeline_id: 987654 }), spec.who))).details?.[0].field).toBe('pipeline_id');
    const noLost = await pipelines.create({ name: `NoLost ${Date.now()}`, stages: [{ name: 'Only', probability: 5 }] }, spec.who);
    expect((await spec.ctx.failure(deals.create(base({ pipeline_id: noLost.id, status: 'lost' }), spec.who))).details?.[0].field).toBe('status');
    // Moving to another pipeline without a stage: its first stage of the deal's status.
    expect(await deals.patch(d.id, { pipeline_id: other.id }, spec.who)).toMatchObject({ pipeline_id: other.id, stage_id: other.stages[0].id });
    expect((await ledger(d.id)).map((r) => r.to_stage_id)).toEqual([proposal.id, won.id, lost.id, lead.id, other.stages[0].id]);
  });

  it('events: deal.stage_changed with the previous stage, deal.won, in the transaction of the change', async () => {
    const p = await strict();
    const d = await deals.create(base({ pipeline_id: p.id }), spec.who);
    await deals.patch(d.id, { stage: 'Won' }, spec.who);
    const events = await spec.ctx.query<{ type: string; previous: Record<string, unknown> | null }>(
      `SELECT type, previous FROM events WHERE (data->>'id')::int = $1 AND type LIKE 'deal.%' ORDER BY insert_order`,
      [d.id],
    );
    expect(events.map((e) => e.type)).toEqual(['deal.created', 'deal.updated', 'deal.stage_changed', 'deal.won']);
    expect(events[2].previous).toEqual({ stage: 'Lead', stage_id: p.stages[0].id, pipeline_id: p.id });
  });

  it("GET stages: each stay with its time, the current one up to the clock's now", async () => {
    const p = await strict();
    const d = await deals.create(base({ pipeline_id: p.id }), spec.who);
    clock.travel(3_600_000);
    await deals.patch(d.id, { stage: 'Proposal' }, spec.who);
    clock.travel(90_000);
    const history = await deals.stageHistory(d.id);
    expect(history.map((h) => [h.stage, h.from_stage_id, h.seconds])).toEqual([
      ['Lead', null, 3600],
      ['Proposal', p.stages[0].id, 90],
    ]);
    expect(history[0].left_at).toBe(history[1].entered_at);
    expect(history[1].left_at).toBeNull();
    await expect(deals.stageHistory(987654)).rejects.toMatchObject({ status: 404 });
    await expect(deals.stageHistory(d.id, { orderBy: 'id; DROP TABLE deals' })).rejects.toMatchObject({ status: 400 });
  });

  it('parallel stage changes of one deal: one ledger row each, chained in order, none lost', async () => {
    const p = await strict();
    const d = await deals.create(base({ pipeline_id: p.id }), spec.who);
    const targets = ['Proposal', 'Lead', 'Proposal', 'Lead', 'Proposal', 'Lead', 'Proposal', 'Lead'];
    await Promise.all(targets.map((stage, i) => deals.patch(d.id, { stage, title: `t${i}` }, spec.who)));
    const rows = await ledger(d.id);
    // Each patch that changed the stage wrote one row; each row starts where the previous one ended.
    for (let i = 1; i < rows.length; i++) expect(rows[i].from_stage_id).toBe(rows[i - 1].to_stage_id);
    const changed = await spec.ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'deal.stage_changed' AND (data->>'id')::int = $1`, [
      d.id,
    ]);
    expect(rows.length - 1).toBe(changed[0].n);
    expect(rows.at(-1)?.to_stage_id).toBe((await deals.get(d.id)).stage_id);
    expect(rows.length).toBeGreaterThan(1);
  });
});
