import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, startApp, type TestApp } from './support/app.js';
import {
  createContact,
  createDeal,
  createRecord,
  expectDeletedInBothStyles,
  expectRoutes,
  feedHead,
  feedSince,
  resourceTokens,
  uniqueEmail,
} from './support/fixtures.js';

interface Stage {
  id: number;
  name: string;
  order: number;
  probability: number;
  type: string;
}
interface Pipeline {
  id: number;
  name: string;
  isDefault: boolean;
  strictStages: boolean;
  stages: Stage[];
}

const STAGES = [
  { name: 'Lead', probability: 10 },
  { name: 'Proposal', probability: 50 },
  { name: 'Won', probability: 100, type: 'won' },
  { name: 'Lost', probability: 0, type: 'lost' },
];

describe('pipelines', () => {
  let app: TestApp;
  let auth: string;
  let readOnly: string;
  let noPipelines: string;
  let contactId: number;

  beforeAll(async () => {
    app = await startApp();
    ({ auth, readOnly, none: noPipelines } = await resourceTokens(app, 'pipelines', 'deals:read'));
    contactId = await createContact(app, auth, { email: uniqueEmail('pipelines.test') });
  });
  afterAll(async () => app?.stop());

  const send = (method: 'post' | 'patch' | 'put' | 'delete', path: string, body?: object) => app.http[method](path).set('Authorization', auth).send(body);
  const get = (path: string, token = auth) => app.http.get(path).set('Authorization', token);
  const newPipeline = (body: object = {}, path = '/api/pipelines') =>
    createRecord<Pipeline & { [k: string]: unknown }>(app, auth, path, 'pipeline', { name: `P ${Date.now()}`, stages: STAGES, ...body });

  it('serves every route form with pipelines:read|write|delete, the reports with deals:read', async () => {
    await expectRoutes(app, auth, '/api/pipelines', [
      ['GET', '/api/pipelines', 'pipelines:read'],
      ['POST', '/api/pipelines/search', 'pipelines:read'],
      ['POST', '/api/pipelines/new', 'pipelines:write'],
      ['POST', '/api/pipelines', 'pipelines:write'],
      ['GET', '/api/pipelines/:id', 'pipelines:read'],
      ['PATCH', '/api/pipelines/:id/edit', 'pipelines:write'],
      ['PATCH', '/api/pipelines/:id', 'pipelines:write'],
      ['PUT', '/api/pipelines/:id/edit', 'pipelines:write'],
      ['PUT', '/api/pipelines/:id', 'pipelines:write'],
      ['DELETE', '/api/pipelines/:id/delete', 'pipelines:delete'],
      ['DELETE', '/api/pipelines/:id', 'pipelines:delete'],
      ['POST', '/api/pipelines/:id/stages', 'pipelines:write'],
      ['PATCH', '/api/pipelines/:id/stages/:stageId', 'pipelines:write'],
      ['DELETE', '/api/pipelines/:id/stages/:stageId', 'pipelines:write'],
      ['GET', '/api/pipelines/:id/forecast', 'deals:read'],
      ['GET', '/api/pipelines/:id/funnel', 'deals:read'],
      ['GET', '/api/pipelines/:id/snapshot', 'deals:read'],
    ]);
    expect((await get('/api/pipelines', readOnly)).status).toBe(200);
    expect((await get('/api/pipelines', noPipelines)).status).toBe(403);
    expect((await app.http.post('/api/pipelines').set('Authorization', readOnly).send({ name: 'x', stages: STAGES })).status).toBe(403);
  });

  it('a fresh install has the default pipeline (free-text stages) that new deals go to', async () => {
    const res = await get('/api/pipelines?isDefault=true');
    expect(res.body.pipelines).toHaveLength(1);
    const def = res.body.pipelines[0] as Pipeline;
    expect(def).toMatchObject({ name: 'Sales', isDefault: true, strictStages: false });
    expect(def.stages.map((s) => [s.name, s.type])).toEqual([
      ['New', 'open'],
      ['Won', 'won'],
      ['Lost', 'lost'],
    ]);
    const deal = await createDeal(app, auth, contactId, { stage: 'negotiation' });
    expect(deal).toMatchObject({ pipeline_id: def.id, stage: 'negotiation', status: 'open', probability: 0 });
  });

  it('creates in both path styles, reads, lists, searches, edits (PATCH and PUT in both styles) and deletes in both styles', async () => {
    const a = await newPipeline({ name: 'Alpha pipeline' }, '/api/pipelines/new');
    const b = await newPipeline({ name: 'Beta pipeline', strictStages: false });
    expect(a).toMatchObject({ name: 'Alpha pipeline', isDefault: false, strictStages: true, createdAt: expect.any(String) });
    expect(a.stages.map((s) => [s.name, s.order, s.probability, s.type])).toEqual([
      ['Lead', 0, 10, 'open'],
      ['Proposal', 1, 50, 'open'],
      ['Won', 2, 100, 'won'],
      ['Lost', 3, 0, 'lost'],
    ]);
    expect((await get(`/api/pipelines/${a.id}`)).body).toEqual({ pipeline: a });
    expect((await get('/api/pipelines?search=alpha')).body.pipelines.map((p: Pipeline) => p.id)).toEqual([a.id]);
    const searched = await send('post', '/api/pipelines/search', { filter: { field: 'strictStages', op: 'eq', value: false }, orderBy: 'id' });
    expect(searched.body.pipelines.map((p: Pipeline) => p.id)).toContain(b.id);
    const patched = await send('patch', `/api/pipelines/${a.id}/edit`, { name: 'Alpha 2' });
    expect(patched.body.pipeline).toMatchObject({ name: 'Alpha 2', stages: a.stages });
    const put = await send('put', `/api/pipelines/${a.id}`, { name: 'Alpha 3', stages: [{ id: a.stages[0].id, name: 'Lead', probability: 20 }] });
    expect(put.status).toBe(200);
    expect(put.body.pipeline).toMatchObject({ name: 'Alpha 3', strictStages: true, stages: [{ id: a.stages[0].id, name: 'Lead', probability: 20, order: 0 }] });
    const created = await send('put', '/api/pipelines/987654/edit', { name: 'Put new', stages: STAGES });
    expect(created.status).toBe(201);
    expectError(await send('patch', '/api/pipelines/987654', { name: 'x' }), 404, 'not_found');
    await expectDeletedInBothStyles(app, auth, '/api/pipelines', 'pipeline', (await get(`/api/pipelines/${b.id}`)).body.pipeline, created.body.pipeline);
  });

  it('bad input is a 400: probability outside 0..100, no open stage, two stages with one name, a stage of another pipeline', async () => {
    const bad = async (body: object, field: string) => {
      const res = await send('post', '/api/pipelines', { name: 'Bad', ...body });
      expectError(res, 400, 'validation_failed');
      expect(JSON.stringify(res.body.error.details)).toContain(field);
    };
    await bad({ stages: [{ name: 'A', probability: 101 }] }, 'probability');
    await bad({ stages: [{ name: 'A', probability: -1 }] }, 'probability');
    await bad({ stages: [{ name: 'W', probability: 100, type: 'won' }] }, 'at least one open stage');
    await bad(
      {
        stages: [
          { name: 'A', probability: 1 },
          { name: 'A', probability: 2 },
        ],
      },
      'two stages are named',
    );
    await bad({ stages: [] }, 'stages');
    await bad({ stages: [{ name: 'A', probability: 1, type: 'maybe' }] }, 'type');
    await bad({ stages: [{ name: 'A', probability: 1 }], extra: 1 }, 'extra');
    const p = await newPipeline();
    const other = await newPipeline();
    expectError(
      await send('post', '/api/deals', { title: 'x', value: 1, contact_id: contactId, pipeline_id: p.id, stage_id: other.stages[0].id }),
      400,
      'validation_failed',
    );
    const strict = await send('post', '/api/deals', { title: 'x', value: 1, contact_id: contactId, pipeline_id: p.id, stage: 'Unknown' });
    expectError(strict, 400, 'validation_failed');
    expect(strict.body.error.message).toContain('Lead');
    expectError(await send('post', `/api/pipelines/${p.id}/stages`, { name: 'Lead', probability: 5 }), 400, 'validation_failed');
    expectError(await send('patch', `/api/pipelines/${p.id}/stages/${p.stages[0].id}`, { probability: 150 }), 400, 'validation_failed');
    expectError(await send('delete', `/api/pipelines/${p.id}/stages/${p.stages[0].id}?moveDealsTo=x`), 400, 'validation_failed');
  });

  it('stages through the pipeline: add, rename, reorder, remove with moveDealsTo; deals follow, each move in the ledger', async () => {
    const p = await newPipeline();
    const [lead, proposal, won] = p.stages;
    const deal = await createDeal(app, auth, contactId, { pipeline_id: p.id, stage_id: lead.id });
    const added = await send('post', `/api/pipelines/${p.id}/stages`, { name: 'Demo', probability: 30, order: 1 });
    expect(added.status).toBe(201);
    const demo = (added.body.pipeline as Pipeline).stages.find((s) => s.name === 'Demo');
    expect(demo?.order).toBe(1);
    const renamed = await send('patch', `/api/pipelines/${p.id}/stages/${lead.id}`, { name: 'Inbound', order: 2 });
    expect((renamed.body.pipeline as Pipeline).stages.map((s) => s.name)).toEqual(['Demo', 'Proposal', 'Inbound', 'Won', 'Lost']);
    expect((await get(`/api/deals/${deal.id}`)).body.deal).toMatchObject({ stage: 'Inbound', stage_id: lead.id });
    expectError(await send('delete', `/api/pipelines/${p.id}/stages/${lead.id}`), 409, 'conflict');
    const removed = await send('delete', `/api/pipelines/${p.id}/stages/${lead.id}?moveDealsTo=${proposal.id}`);
    expect(removed.status).toBe(200);
    expect((removed.body.pipeline as Pipeline).stages.map((s) => s.name)).toEqual(['Demo', 'Proposal', 'Won', 'Lost']);
    expect((await get(`/api/deals/${deal.id}`)).body.deal).toMatchObject({ stage: 'Proposal', stage_id: proposal.id, probability: 50 });
    const history = (await get(`/api/deals/${deal.id}/stages`)).body.stages as { stage: string; stage_id: number }[];
    expect(history.map((h) => [h.stage, h.stage_id])).toEqual([
      ['Inbound', lead.id],
      ['Proposal', proposal.id],
    ]);
    expectError(await send('delete', `/api/pipelines/${p.id}/stages/${won.id}?moveDealsTo=${won.id}`), 400, 'validation_failed');
    expectError(await send('delete', `/api/pipelines/${p.id}`), 409, 'conflict');
  });

  it('deals: won and lost through status, then through stage names; 400 for a pipeline without that type', async () => {
    const p = await newPipeline();
    const deal = await createDeal(app, auth, contactId, { pipeline_id: p.id });
    const won = await send('patch', `/api/deals/${deal.id}`, { status: 'won' });
    expect(won.body.deal).toMatchObject({ stage: 'Won', status: 'won', probability: 100, closed_at: expect.any(String) });
    const lost = await send('patch', `/api/deals/${deal.id}`, { stage: 'Lost' });
    expect(lost.body.deal).toMatchObject({ stage: 'Lost', status: 'lost', closed_at: won.body.deal.closed_at });
    const single = await newPipeline({ stages: [{ name: 'Only', probability: 40 }] });
    expectError(
      await send('post', '/api/deals', { title: 'x', value: 1, contact_id: contactId, pipeline_id: single.id, status: 'won' }),
      400,
      'validation_failed',
    );
  });

  it('parallel stage changes of one deal: one ledger row each, in order, none lost', async () => {
    const p = await newPipeline();
    const deal = await createDeal(app, auth, contactId, { pipeline_id: p.id });
    const stages = ['Proposal', 'Lead', 'Proposal', 'Lead', 'Proposal', 'Lead', 'Proposal', 'Lead', 'Proposal', 'Lead'];
    const results = await Promise.all(stages.map((stage) => send('patch', `/api/deals/${deal.id}`, { stage })));
    expect(results.map((r) => r.status)).toEqual(stages.map(() => 200));
    const history = (await get(`/api/deals/${deal.id}/stages`)).body.stages as { stage_id: number; from_stage_id: number | null }[];
    // Every request that found the deal in the other stage moved it: one row each (one deal.stage_changed each), each starting where the previous ended.
    const changes = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'deal.stage_changed' AND (data->>'id')::int = $1`, [
      deal.id,
    ]);
    expect(history.length).toBeGreaterThan(1);
    expect(history.length).toBe(changes[0].n + 1);
    for (let i = 1; i < history.length; i++) expect(history[i].from_stage_id).toBe(history[i - 1].stage_id);
    const rows = await app.sql<{ n: number }>(`SELECT count(*)::int AS n FROM deal_stage_changes WHERE deal_id = $1`, [deal.id]);
    expect(rows[0].n).toBe(history.length);
    expect(history.at(-1)?.stage_id).toBe((await get(`/api/deals/${deal.id}`)).body.deal.stage_id);
  });

  it('parallel deletes of a pipeline: exactly one succeeds', async () => {
    const p = await newPipeline();
    const results = await Promise.all(Array.from({ length: 6 }, () => send('delete', `/api/pipelines/${p.id}`)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 404)).toHaveLength(5);
  });

  it('filters: the deals list by pipeline.id, stage.id and status; contacts and companies by deals.status and deals.stage.id', async () => {
    const p = await newPipeline();
    const company = await createRecord(app, auth, '/api/companies', 'company', { name: `Filter Co ${Date.now()}` });
    const withWon = await createContact(app, auth, { email: uniqueEmail('pipelines.test', 'won') });
    const withOpen = await createContact(app, auth, { email: uniqueEmail('pipelines.test', 'open') });
    const wonDeal = await createDeal(app, auth, withWon, { pipeline_id: p.id, status: 'won', company_id: company.id });
    const openDeal = await createDeal(app, auth, withOpen, { pipeline_id: p.id, stage: 'Proposal' });
    const ids = async (path: string) => ((await get(path)).body.deals as { id: number }[]).map((d) => d.id).sort((a, b) => a - b);
    expect(await ids(`/api/deals?filter=pipeline.id[eq]:${p.id}`)).toEqual([wonDeal.id, openDeal.id]);
    expect(await ids(`/api/deals?pipeline_id=${p.id}&status=won`)).toEqual([wonDeal.id]);
    expect(await ids(`/api/deals?filter=stage.id[eq]:${p.stages[1].id}`)).toEqual([openDeal.id]);
    expect(await ids(`/api/deals?stage_id=${p.stages[1].id}`)).toEqual([openDeal.id]);
    const contacts = async (filter: string) =>
      ((await get(`/api/contacts?filter=${encodeURIComponent(filter)}`)).body.contacts as { id: number }[]).map((c) => c.id).sort((a, b) => a - b);
    expect(await contacts(`deals.stage.id[eq]:${p.stages[2].id}`)).toEqual([withWon]);
    expect(await contacts(`and(deals.status[eq]:open,deals.stage.id[in]:[${p.stages[0].id},${p.stages[1].id}])`)).toEqual([withOpen]);
    expect(await contacts(`and(deals.status[eq]:won,deals.stage.id[eq]:${p.stages[2].id})`)).toEqual([withWon]);
    expectError(await get(`/api/contacts?filter=deals.status[eq]:pending`), 400, 'validation_failed');
    const companies = await get(`/api/companies?filter=${encodeURIComponent(`deals.status[eq]:won`)}`);
    expect(companies.body.companies.map((c: { id: number }) => c.id)).toContain(company.id);
    const none = await get(`/api/companies?filter=${encodeURIComponent(`deals.stage.id[eq]:${p.stages[1].id}`)}`);
    expect(none.body.companies.map((c: { id: number }) => c.id)).not.toContain(company.id);
    // A dynamic segment cannot use them (deal changes do not re-evaluate segments).
    expectError(await send('post', '/api/segments', { name: 'S', type: 'dynamic', filter: `deals.status[eq]:won` }), 400, 'validation_failed');
  });

  it('writes pipeline.created / updated / deleted to the change feed', async () => {
    const cursor = await feedHead(app, auth);
    const p = await newPipeline();
    await send('patch', `/api/pipelines/${p.id}`, { name: 'Renamed' });
    await send('delete', `/api/pipelines/${p.id}`);
    const events = await feedSince(app, auth, cursor, 'pipeline.created,pipeline.updated,pipeline.deleted');
    expect(events.map((e) => e.type)).toEqual(['pipeline.created', 'pipeline.updated', 'pipeline.deleted']);
    expect(events[1].previous).toEqual({ name: p.name });
  });
});
