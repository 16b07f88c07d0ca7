import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';

/**
 * The counts a workflow's record and its stats answer (GET /api/workflows, /{id}, /{id}/stats), read
 * from the enrollments and their step runs; the enrollments' writes and the runner's claims are
 * EnrollmentsRepository's.
 */
@Injectable()
export class EnrollmentStatsRepository {
  constructor(private readonly transactions: Transactions) {}

  async countRunning(workflowId: number, tx?: Tx): Promise<number> {
    const rows: { n: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT count(*) AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status IN ('active', 'waiting')`, [workflowId]);
    return Number(rows[0].n);
  }

  /** Enrollments by status of each workflow among `ids` (the `stats` of their records). */
  async countsByWorkflow(ids: number[], tx?: Tx): Promise<Map<number, Record<string, number>>> {
    const out = new Map<number, Record<string, number>>(ids.map((id) => [id, {}]));
    if (!ids.length) return out;
    const rows: { workflow_id: number; status: string; n: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT workflow_id, status, count(*) AS n FROM workflow_enrollments WHERE workflow_id = ANY($1::int[]) GROUP BY workflow_id, status`, [ids]);
    for (const r of rows) (out.get(r.workflow_id) as Record<string, number>)[r.status] = Number(r.n);
    return out;
  }

  /** Enrollments by status, and the median time from entry to conversion (seconds). */
  async statusCounts(workflowId: number): Promise<{ counts: Record<string, number>; medianConvertSeconds: number | null }> {
    const rows: { status: string; n: string; median: number | null }[] = await this.transactions.db.query(
      `SELECT status, count(*) AS n,
              CASE WHEN status = 'converted' THEN percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - entered_at)) END AS median
         FROM workflow_enrollments WHERE workflow_id = $1 GROUP BY status`,
      [workflowId],
    );
    const counts: Record<string, number> = {};
    let median: number | null = null;
    for (const r of rows) {
      counts[r.status] = Number(r.n);
      if (r.status === 'converted' && r.median !== null) median = r.median;
    }
    return { counts, medianConvertSeconds: median };
  }

  /** Per step key: enrollments waiting or due there now, step runs completed (a run that began a wait is not one) and failed there. */
  async stepCounts(workflowId: number): Promise<{ step_key: string; at: string; completed: string; failed: string }[]> {
    return this.transactions.db.query(
      `WITH here AS (SELECT step_key, count(*) AS n FROM workflow_enrollments WHERE workflow_id = $1 AND status IN ('active', 'waiting') GROUP BY step_key),
            runs AS (SELECT r.step_key, count(*) FILTER (WHERE r.outcome NOT IN ('failed', 'waiting')) AS completed, count(*) FILTER (WHERE r.outcome = 'failed') AS failed
                       FROM workflow_step_runs r JOIN workflow_enrollments e ON e.id = r.enrollment_id WHERE e.workflow_id = $1 GROUP BY r.step_key)
       SELECT coalesce(here.step_key, runs.step_key) AS step_key, coalesce(here.n, 0) AS at, coalesce(runs.completed, 0) AS completed, coalesce(runs.failed, 0) AS failed
         FROM here FULL JOIN runs ON runs.step_key = here.step_key`,
      [workflowId],
    );
  }
}
