import { Injectable } from '@nestjs/common';
import type { Tx } from '../database/transactions.js';

/** The delivery a webhook step run waits for, as its history row (outcome `waiting`) notes it. */
export interface AwaitedDelivery {
  stepKey: string;
  webhookId: number;
  eventId: string;
}

/**
 * The queries of a workflow's webhook step waiting for its delivery's outcome (workflow-webhook-step.ts,
 * workflow-webhook-waits.ts): the delivery an enrollment waits for is the one named by the history
 * row of its waiting step run (seq = the enrollment's step_seq), so nothing is added to the
 * enrollment's row.
 */
@Injectable()
export class WebhookWaitsRepository {
  /** The delivery the enrollment's step run `seq` waits for (null: that run is not a webhook step's wait). */
  async awaitedAt(enrollmentId: number, seq: number, tx: Tx): Promise<AwaitedDelivery | null> {
    const rows: { step_key: string; webhook_id: string | null; event_id: string | null }[] = await tx.query(
      `SELECT step_key, detail->>'webhookId' AS webhook_id, detail->>'webhookEventId' AS event_id FROM workflow_step_runs
        WHERE enrollment_id = $1 AND seq = $2 AND step_type = 'webhook' AND outcome = 'waiting'`,
      [enrollmentId, seq],
    );
    const r = rows[0];
    if (!r || r.webhook_id === null || r.event_id === null) return null;
    return { stepKey: r.step_key, webhookId: Number(r.webhook_id), eventId: r.event_id };
  }

  /** awaitedAt for many step runs at once (one statement): by enrollment id, those that wait for a delivery. */
  async awaitedAtMany(runs: { enrollmentId: number; seq: number }[], tx: Tx): Promise<Map<number, AwaitedDelivery>> {
    if (!runs.length) return new Map();
    const rows: { id: string; step_key: string; webhook_id: string; event_id: string }[] = await tx.query(
      `SELECT r.enrollment_id AS id, r.step_key, r.detail->>'webhookId' AS webhook_id, r.detail->>'webhookEventId' AS event_id
         FROM workflow_step_runs r JOIN unnest($1::bigint[], $2::int[]) AS w(id, seq) ON r.enrollment_id = w.id AND r.seq = w.seq
        WHERE r.step_type = 'webhook' AND r.outcome = 'waiting' AND r.detail->>'webhookId' IS NOT NULL AND r.detail->>'webhookEventId' IS NOT NULL`,
      [runs.map((r) => r.enrollmentId), runs.map((r) => r.seq)],
    );
    return new Map(rows.map((r) => [Number(r.id), { stepKey: r.step_key, webhookId: Number(r.webhook_id), eventId: r.event_id }]));
  }

  /**
   * Of `ids`, the enrollments waiting now, locked until `tx` ends (in id order), with the delivery
   * each waits for at a webhook step (read after the lock, so a step run that committed meanwhile is seen).
   */
  async lockWaiting(ids: number[], tx: Tx): Promise<Map<number, string>> {
    if (!ids.length) return new Map();
    const locked: { id: string; step_seq: number }[] = await tx.query(
      `SELECT id, step_seq FROM workflow_enrollments WHERE id = ANY($1::bigint[]) AND status = 'waiting' ORDER BY id FOR UPDATE`,
      [ids],
    );
    if (!locked.length) return new Map();
    const rows: { id: string; event_id: string }[] = await tx.query(
      `SELECT r.enrollment_id AS id, r.detail->>'webhookEventId' AS event_id
         FROM workflow_step_runs r JOIN unnest($1::bigint[], $2::int[]) AS w(id, seq) ON r.enrollment_id = w.id AND r.seq = w.seq
        WHERE r.step_type = 'webhook' AND r.outcome = 'waiting' AND r.detail->>'webhookEventId' IS NOT NULL`,
      [locked.map((l) => l.id), locked.map((l) => l.step_seq)],
    );
    return new Map(rows.map((r) => [Number(r.id), r.event_id]));
  }

  /** Makes the (locked, waiting) enrollments due at `at`. */
  async wake(ids: number[], at: Date, tx: Tx): Promise<void> {
    if (!ids.length) return;
    await tx.query(`UPDATE workflow_enrollments SET next_at = $2 WHERE id = ANY($1::bigint[]) AND status = 'waiting'`, [ids, at]);
  }
}
