import { beforeAll, describe, expect, it } from '@jest/globals';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { Clock } from '../common/clock.js';
import { PipelinesService } from '../pipelines/pipelines.service.js';
import { DealReportsService, bucketPercentile } from './deal-reports.service.js';
import { DealsService } from './deals.service.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * What the reports read instead of the rows (migrations 1763700003700 and 1763700003710): the
 * ledger rows' links to their deal's later rows, deal_funnel_days, deal_stay_buckets and
 * deal_stage_totals, each checked against a recomputation from scratch after creates, parallel
 * stage changes, value / probability / owner / company changes and deletes; and the funnel read
 * from the rollups against the exact one.
 */
describe('pipeline report rollups (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let deals: DealsService;
  let reports: DealReportsService;
  let clock: Clock;
  let contactId: number;
  let pipelineId: number;

  beforeAll(async () => {
    deals = spec.ctx.get(DealsService);
    reports = spec.ctx.get(DealReportsService);
    clock = spec.ctx.get(Clock);
    contactId = await spec.ctx.contact('R', 'r');
    const p = await spec.ctx.get(PipelinesService).create(
      {
        name: 'Rollups',
        stages: [
          { name: 'Lead', probability: 10 },
          { name: 'Qualified', probability: 30 },
          { name: 'Proposal', probability: 50 },
          { name: 'Won', probability: 100, type: 'won' },
          { name: 'Lost', probability: 0, type: 'lost' },
        ],
      },
      spec.who,
    );
    pipelineId = p.id;
  });

  const create = (title: string, extra: object = {}) =>
    deals.create({ title, value: 1000, contact_id: contactId, pipeline_id: pipelineId, ...extra }, spec.who);
  const move = (id: number, name: string) => deals.patch(id, { stage: name }, spec.who);

  /** Rows of `a` EXCEPT rows of `b` and the reverse: both empty when the two queries answer the same multiset of groups. */
  async function differences(a: string, b: string): Promise<unknown[]> {
    return spec.ctx.query(`(${a} EXCEPT ALL ${b}) UNION ALL (${b} EXCEPT ALL ${a})`);
  }

  async function expectRollupsTrue() {
    const links = await spec.ctx.query(
      `SELECT x.id FROM deal_stage_changes x JOIN (
         SELECT id, left_at, next_stage_id, sf_int_set(later) AS later FROM (
           SELECT id, lead(at) OVER w AS left_at, lead(to_stage_id) OVER w AS next_stage_id,
                  array_agg(to_stage_id) OVER (w ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
           FROM deal_stage_changes WINDOW w AS (PARTITION BY deal_id ORDER BY at, id)) y
       ) c USING (id)
       WHERE x.left_at IS DISTINCT FROM c.left_at OR x.next_stage_id IS DISTINCT FROM c.next_stage_id OR x.later_stage_ids <> c.later`,
    );
    expect(links).toEqual([]);
    expect(
      await differences(
        `SELECT pipeline_id, day, stage_id, next_stage_id, later_stage_ids, sum(entries)::bigint FROM deal_funnel_days GROUP BY 1, 2, 3, 4, 5 HAVING sum(entries) <> 0`,
        `SELECT pipeline_id, (at AT TIME ZONE 'UTC')::date, to_stage_id, COALESCE(next_stage_id, 0), later_stage_ids, count(*) FROM deal_stage_changes GROUP BY 1, 2, 3, 4, 5`,
      ),
    ).toEqual([]);
    expect(
      await differences(
        `SELECT pipeline_id, day, stage_id, bucket, sum(stays)::bigint FROM deal_stay_buckets GROUP BY 1, 2, 3, 4 HAVING sum(stays) <> 0`,
        `SELECT pipeline_id, (at AT TIME ZONE 'UTC')::date, to_stage_id, sf_stay_bucket(extract(epoch FROM left_at - at)::float8), count(*)
         FROM deal_stage_changes WHERE left_at IS NOT NULL GROUP BY 1, 2, 3, 4`,
      ),
    ).toEqual([]);
    expect(
      await differences(
        `SELECT pipeline_id, stage_id, owner_id, company_id, sum(deals)::bigint, sum(value), sum(own_weighted), sum(stage_weighted_value)
         FROM deal_stage_totals GROUP BY 1, 2, 3, 4 HAVING sum(deals) <> 0`,
        `SELECT pipeline_id, stage_id, COALESCE(owner_id, 0), COALESCE(company_id, 0), count(*), sum(value), COALESCE(sum(value * probability), 0),
                COALESCE(sum(value) FILTER (WHERE probability IS NULL), 0)
         FROM deals GROUP BY 1, 2, 3, 4`,
      ),
    ).toEqual([]);
    expect(
      await differences(
        `SELECT pipeline_id, month, stage_id, owner_id, sum(deals)::bigint, sum(value), sum(own_weighted), sum(stage_weighted_value)
         FROM deal_forecast_months GROUP BY 1, 2, 3, 4 HAVING sum(deals) <> 0`,
        `SELECT pipeline_id, date_trunc('month', expected_close_date::timestamp)::date, stage_id, COALESCE(owner_id, 0), count(*), sum(value),
                COALESCE(sum(value * probability), 0), COALESCE(sum(value) FILTER (WHERE probability IS NULL), 0)
         FROM deals WHERE status = 'open' AND expected_close_date IS NOT NULL GROUP BY 1, 2, 3, 4`,
      ),
    ).toEqual([]);
    expect(
      await differences(
        `SELECT pipeline_id, day, stage_id, edge, sum(stays)::bigint, sum(value), sum(own_weighted) FROM deal_snapshot_days GROUP BY 1, 2, 3, 4 HAVING sum(stays) <> 0`,
        `SELECT pipeline_id, (e.t AT TIME ZONE 'UTC')::date, to_stage_id, e.edge, count(*), sum(value), sum(value * probability)
         FROM deal_stage_changes CROSS JOIN LATERAL (VALUES (0::smallint, at), (1::smallint, left_at)) e(edge, t) WHERE left_at IS NOT NULL GROUP BY 1, 2, 3, 4`,
      ),
    ).toEqual([]);
  }

  it('links, day rollups, stay buckets and stage totals equal a recomputation after parallel moves, edits and deletes', async () => {
    const other = await spec.ctx.principal();
    const [companyRow] = await spec.ctx.query<{ id: number }>(`INSERT INTO companies (name) VALUES ('Rollup Co') RETURNING id`);
    const made = await Promise.all(
      Array.from({ length: 6 }, (_, i) => create(`P${i}`, { expected_close_date: `2027-0${1 + (i % 3)}-1${i}`, ...(i % 2 ? { probability: 40 } : {}) })),
    );
    await expectRollupsTrue();
    clock.travel(3 * HOUR);
    // Parallel stage changes of one deal (each a ledger row, in order) and of several deals.
    await Promise.all(['Qualified', 'Proposal', 'Lead', 'Won'].map((name) => move(made[0].id, name)));
    await Promise.all(made.slice(1).map((d, i) => move(d.id, i % 2 ? 'Lost' : 'Proposal')));
    clock.travel(DAY);
    await Promise.all([
      deals.patch(made[1].id, { value: 2500.5, probability: 80 }, spec.who),
      deals.patch(made[2].id, { owner_id: other.userId, company_id: companyRow.id }, spec.who),
      deals.patch(made[3].id, { probability: null, expected_close_date: '2027-05-31' }, spec.who),
      move(made[4].id, 'Qualified'),
    ]);
    await expectRollupsTrue();
    await Promise.all([deals.remove(made[5].id), deals.remove(made[0].id), move(made[2].id, 'Won')]);
    await expectRollupsTrue();
    // A window cutting months: whole months from the rollup, the days at its ends from the deals.
    const forecast = (await reports.forecast(pipelineId, { from: '2027-01-12', to: '2027-05-30', groupBy: 'owner' })).forecast;
    const [direct] = await spec.ctx.query<{ count: number; value: string; weighted: string }>(
      `SELECT count(*)::int AS count, sum(d.value)::text AS value, round(sum(d.value * COALESCE(d.probability, s.probability) / 100.0), 2)::text AS weighted
       FROM deals d JOIN pipeline_stages s ON s.id = d.stage_id
       WHERE d.pipeline_id = $1 AND d.status = 'open' AND d.expected_close_date BETWEEN '2027-01-12' AND '2027-05-30'`,
      [pipelineId],
    );
    expect(forecast.totals).toEqual({ count: direct.count, value: Number(direct.value), weightedValue: Number(direct.weighted) });
    expect(direct.count).toBeGreaterThan(0);
  });

  it('the funnel read from the rollups counts as the exact one where no deal re-enters a stage; its median and p90 within 4.9%', async () => {
    clock.travel(DAY);
    const from = new Date(clock.now().getTime() - HOUR);
    const d = await Promise.all(['A', 'B', 'C', 'D', 'E', 'F'].map((t) => create(t)));
    clock.travel(DAY + 2 * HOUR);
    await Promise.all([move(d[0].id, 'Qualified'), move(d[1].id, 'Lost'), move(d[2].id, 'Qualified'), move(d[5].id, 'Proposal')]);
    clock.travel(DAY + 5 * HOUR);
    await Promise.all([move(d[0].id, 'Proposal'), move(d[2].id, 'Won'), move(d[3].id, 'Qualified')]);
    clock.travel(7 * HOUR);
    await Promise.all([move(d[0].id, 'Won'), move(d[3].id, 'Lost')]);
    clock.travel(HOUR);
    const query = { from: from.toISOString(), to: clock.now().toISOString() };
    const exact = (await reports.funnel(pipelineId, query)).funnel;
    reports.funnelExactRows = 0;
    let rolled;
    try {
      rolled = (await reports.funnel(pipelineId, query)).funnel;
    } finally {
      reports.funnelExactRows = Number.POSITIVE_INFINITY;
    }
    expect(exact.exact).toBe(true);
    expect(rolled.exact).toBe(false);
    const counts = (f: typeof exact) => f.stages.map(({ medianSecondsInStage: _m, p90SecondsInStage: _p, ...rest }) => rest);
    expect(counts(rolled)).toEqual(counts(exact));
    expect(exact.stages.find((s) => s.name === 'Lead')).toMatchObject({ entered: 6, movedOn: 4, lost: 1, conversionToNext: 0.6667, conversionToWon: 0.3333 });
    for (const [i, s] of exact.stages.entries()) {
      for (const key of ['medianSecondsInStage', 'p90SecondsInStage'] as const) {
        const want = s[key];
        const got = rolled.stages[i][key];
        if (want === null) expect(got).toBeNull();
        else expect(Math.abs((got ?? 0) - want) / want).toBeLessThanOrEqual(0.049);
      }
    }
    await expectRollupsTrue();
  });

  it('the snapshot from the totals and day rollups equals the per-deal computation at instants across days and within one', async () => {
    const now = clock.now().getTime();
    for (const back of [0, HOUR, 8 * HOUR, DAY, DAY + 3 * HOUR, 2 * DAY + 4 * HOUR, 3 * DAY + 1, 4 * DAY, 9 * DAY]) {
      const asOf = new Date(now - back);
      const got = (await reports.snapshot(pipelineId, { asOf: asOf.toISOString() })).snapshot.stages.map((x) => [x.stageId, x.count, x.value, x.weightedValue]);
      const want = await spec.ctx.query<{ id: number; count: number; value: string | null; weighted: string | null }>(
        `WITH stayed AS (
           SELECT d.stage_id, d.value, COALESCE(d.probability, s.probability) AS p FROM deals d JOIN pipeline_stages s ON s.id = d.stage_id
           WHERE d.pipeline_id = $1 AND d.entered_stage_at <= $2
         ), moved AS (
           SELECT l.to_stage_id AS stage_id, l.value, l.probability AS p FROM deals d
           CROSS JOIN LATERAL (SELECT x.* FROM deal_stage_changes x WHERE x.deal_id = d.id AND x.at <= $2 ORDER BY x.at DESC, x.id DESC LIMIT 1) l
           WHERE d.entered_stage_at > $2 AND l.pipeline_id = $1
         )
         SELECT s.id, count(x.stage_id)::int AS count, sum(x.value)::text AS value, round(sum(x.value * x.p / 100.0), 2)::text AS weighted
         FROM pipeline_stages s LEFT JOIN (SELECT * FROM stayed UNION ALL SELECT * FROM moved) x ON x.stage_id = s.id
         WHERE s.pipeline_id = $1 GROUP BY s.id, s.position ORDER BY s.position`,
        [pipelineId, asOf],
      );
      expect(got).toEqual(want.map((w) => [w.id, w.count, Number(w.value ?? 0), Number(w.weighted ?? 0)]));
    }
  });

  it('percentiles from length buckets interpolate as percentile_cont does, within the bucket width', () => {
    expect(bucketPercentile([], 0.5)).toBeNull();
    const oneHour = Math.floor(Math.log(3600) / Math.log(1.1));
    const twoHours = Math.floor(Math.log(7200) / Math.log(1.1));
    // Exact: median of [3600, 7200] is 5400, p90 6840.
    const median = bucketPercentile(
      [
        { bucket: oneHour, n: 1 },
        { bucket: twoHours, n: 1 },
      ],
      0.5,
    );
    expect(Math.abs((median ?? 0) - 5400) / 5400).toBeLessThanOrEqual(0.049);
    expect(bucketPercentile([{ bucket: -1, n: 3 }], 0.9)).toBe(0.5);
  });
});
