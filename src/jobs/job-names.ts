/**
 * Every queue and job the service runs, each job with its typed payload, and the one place that
 * sets how jobs are retried, kept and de-duplicated. Callers only ever see
 * JobQueue.enqueue(name, payload, options); the processors register handlers by name.
 */
export const QUEUES = {
  maintenance: 'maintenance',
  reports: 'reports',
  sms: 'sms',
  webhooks: 'webhooks',
  imports: 'imports',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export interface JobPayloads {
  /** Marks campaigns whose endDate has passed as completed. */
  'campaigns.complete-expired': Record<string, never>;
  /** Computes and stores a report's result. */
  'reports.run': { reportId: number; trigger: 'manual' | 'schedule' };
  /** Re-creates the job schedulers of all reports from the database (worker start and periodically). */
  'reports.sync-schedules': Record<string, never>;
  /**
   * Hands one text message to the SMS provider. `generation` is the message's send counter when
   * the job was queued: a job whose generation is no longer current does nothing. `queuedAt`
   * (epoch ms) bounds how long a job waits for the queueing transaction to become visible.
   */
  'sms.send': { messageId: number; generation: number; queuedAt: number };
  /**
   * One lane of a broadcast's sending: claims batches of its queued messages and hands them to the
   * provider until none is left (several lanes per broadcast); for a `scheduled` broadcast, starts it when due.
   */
  'sms.broadcast': { broadcastId: number; lane: number };
  /** Queues again the lanes of sending broadcasts and the start of scheduled ones (worker start and every RECOVERY_EVERY_MS). */
  'sms.broadcast-recover': Record<string, never>;
  /** Re-queues text messages left `queued` without a job (worker start and periodically). */
  'sms.recover': Record<string, never>;
  /**
   * Sends a webhook's due deliveries: claims them in batches (sequence order), POSTs each over a
   * kept-alive connection with a bounded number in flight, records the outcomes batch by batch. One
   * job id per webhook (JOB_IDS.webhookDrain), queued with `rerun` so new work is never missed.
   */
  'webhooks.drain': { webhookId: number };
  /** Deletes events older than EVENT_RETENTION_DAYS from the event feed (hourly). */
  'events.prune': Record<string, never>;
  /** Creates companies from the contacts' company strings and links the contacts (one company_backfills run). */
  'companies.backfill': { runId: number };
  /** Deletes Idempotency-Key records past their retention (hourly). */
  'idempotency.prune': Record<string, never>;
  /**
   * Runs an import from its checkpoint: chunk by chunk, each chunk's writes committed with the
   * checkpoint (so a run killed mid-import resumes after the last committed chunk).
   */
  'imports.run': { importId: number };
  /** Streams an export's records into storage. */
  'exports.run': { exportId: number };
  /** Queues again every unfinished import and export whose job is gone (worker start and every RECOVERY_EVERY_MS). */
  'imports.recover': Record<string, never>;
  /** Applies the scoring decay periods that have ended (each contact once per period; scheduled every SCORING_DECAY_CHECK_MS). */
  'scoring.decay': Record<string, never>;
  /** Runs a scoring recompute or what-if job (a scoring_jobs row). */
  'scoring.run': { jobId: number };
  /** Creates tracked_events' monthly partitions ahead and drops those past TRACKING_RETENTION_DAYS (hourly). */
  'tracking.partitions': Record<string, never>;
  /**
   * Enrols the members of an activated segment_entered workflow's segment, chunk by chunk from its
   * cursor (workflow_segment_enrolments). `queuedAt` (epoch ms) bounds how long a job waits for the
   * activating transaction to become visible.
   */
  'workflows.enrol-segment': { workflowId: number; queuedAt: number };
  /** Queues again every unfinished segment enrolment whose job is gone (worker start and every RECOVERY_EVERY_MS). */
  'workflows.enrol-segment-recover': Record<string, never>;
}
export type JobName = keyof JobPayloads;

export const JOB_QUEUE: Record<JobName, QueueName> = {
  'campaigns.complete-expired': QUEUES.maintenance,
  'reports.run': QUEUES.reports,
  'reports.sync-schedules': QUEUES.maintenance,
  'sms.send': QUEUES.sms,
  'sms.broadcast': QUEUES.sms,
  'sms.broadcast-recover': QUEUES.maintenance,
  'sms.recover': QUEUES.maintenance,
  'webhooks.drain': QUEUES.webhooks,
  'events.prune': QUEUES.maintenance,
  'companies.backfill': QUEUES.maintenance,
  'idempotency.prune': QUEUES.maintenance,
  'imports.run': QUEUES.imports,
  'exports.run': QUEUES.imports,
  'imports.recover': QUEUES.maintenance,
  'scoring.decay': QUEUES.maintenance,
  'scoring.run': QUEUES.reports,
  'tracking.partitions': QUEUES.maintenance,
  // Bulk data work, beside imports and exports.
  'workflows.enrol-segment': QUEUES.imports,
  'workflows.enrol-segment-recover': QUEUES.maintenance,
};

export interface JobPolicy {
  /** Runs of a job before it counts as failed (the first run included). */
  attempts: number;
  /** Exponential backoff base: retry n waits backoffMs * 2^(n-1), unless the error names a delay. */
  backoffMs: number;
}

/** Attempts and backoff per job. */
export const JOB_POLICY: Record<JobName, JobPolicy> = {
  'campaigns.complete-expired': { attempts: 3, backoffMs: 5_000 },
  'reports.run': { attempts: 3, backoffMs: 5_000 },
  'reports.sync-schedules': { attempts: 3, backoffMs: 5_000 },
  // 2 s, 4 s, 8 s, 16 s, 32 s: a gateway answering 429/5xx gets about a minute before the message fails.
  'sms.send': { attempts: 6, backoffMs: 2_000 },
  // A lane that fails (database error) runs again; what it had claimed is resolved by the stale-claim sweep.
  'sms.broadcast': { attempts: 10, backoffMs: 2_000 },
  'sms.broadcast-recover': { attempts: 2, backoffMs: 5_000 },
  'sms.recover': { attempts: 2, backoffMs: 5_000 },
  // HTTP failures are retried by each delivery's own schedule (webhook-retry.ts); these attempts only cover database errors.
  'webhooks.drain': { attempts: 3, backoffMs: 1_000 },
  'events.prune': { attempts: 2, backoffMs: 60_000 },
  // One transaction; a run that failed for good is marked failed (GET /api/companies/backfill/{id}).
  'companies.backfill': { attempts: 3, backoffMs: 10_000 },
  'idempotency.prune': { attempts: 2, backoffMs: 60_000 },
  // A failed run resumes from the checkpoint; after the last attempt the import is marked failed.
  'imports.run': { attempts: 5, backoffMs: 2_000 },
  'exports.run': { attempts: 3, backoffMs: 2_000 },
  'imports.recover': { attempts: 2, backoffMs: 2_000 },
  // Each period's rows are unique per contact, so a retried run only finishes what is left.
  'scoring.decay': { attempts: 3, backoffMs: 10_000 },
  // A retried run starts over (a recompute repairs only what differs; a what-if writes nothing).
  'scoring.run': { attempts: 3, backoffMs: 5_000 },
  'tracking.partitions': { attempts: 3, backoffMs: 60_000 },
  // A failed run resumes from the cursor; the recovery queues it again after the last attempt.
  'workflows.enrol-segment': { attempts: 5, backoffMs: 2_000 },
  'workflows.enrol-segment-recover': { attempts: 2, backoffMs: 2_000 },
};

/**
 * How often the recovery sweeps of long-running work (broadcast lanes, imports, exports) queue again
 * what is open in the database but has no job left. A job whose worker died is run again by BullMQ
 * once its lock expires (JOB_LOCK_MS) — but only once (maxStalledCount 1): a second death fails the
 * job, and from then on only this sweep brings the work back, so it runs every few seconds, not every
 * minute. A sweep is a few indexed reads and one duplicate-suppressed enqueue per open item (a job
 * that is still waiting, delayed or running is left alone).
 */
export const RECOVERY_EVERY_MS = 5_000;

/** Retention of finished jobs in Redis: bounded by count and age so the queue never grows without end. */
export const JOB_RETENTION = {
  removeOnComplete: { count: 1_000, age: 24 * 3600 },
  removeOnFail: { count: 5_000, age: 7 * 24 * 3600 },
} as const;

/** Duplicate-suppressing job ids and scheduler ids, in one place. */
export const JOB_IDS = {
  /** One job per message and send: a message re-sent after failing gets a new generation. */
  smsSend: (messageId: number, generation: number) => `sms:${messageId}:${generation}`,
  /** One job per lane of a broadcast's sending (re-queued by the recovery while it is sending). */
  broadcastLane: (broadcastId: number, lane: number) => `broadcast:${broadcastId}:${lane}`,
  /** The start of a scheduled broadcast, per scheduled time. */
  broadcastStart: (broadcastId: number, at: number) => `broadcast-start:${broadcastId}:${at}`,
  reportSchedule: (reportId: number) => `report-schedule:${reportId}`,
  reportsSyncSchedule: 'reports-sync-schedules',
  smsRecoverSchedule: 'sms-recover',
  /** One drain job per webhook (plus at most one follow-up queued while it runs, see EnqueueOptions.rerun). */
  webhookDrain: (webhookId: number) => `webhook-drain:${webhookId}`,
  broadcastRecoverSchedule: 'sms-broadcast-recover',
  eventsPruneSchedule: 'events-prune',
  /** One job per backfill run. */
  companiesBackfill: (runId: number) => `companies-backfill:${runId}`,
  idempotencyPruneSchedule: 'idempotency-prune',
  /** One job per import (re-queued by the recovery while it is unfinished). */
  importRun: (importId: number) => `import:${importId}`,
  exportRun: (exportId: number) => `export:${exportId}`,
  importsRecoverSchedule: 'imports-recover',
  scoringDecaySchedule: 'scoring-decay',
  /** One job per scoring recompute or what-if run. */
  scoringRun: (jobId: number) => `scoring:${jobId}`,
  trackingPartitionsSchedule: 'tracking-partitions',
  /** One job per workflow's segment enrolment (re-queued by the recovery while it is unfinished). */
  workflowEnrolSegment: (workflowId: number) => `workflow-enrol-segment:${workflowId}`,
  workflowEnrolSegmentRecoverSchedule: 'workflow-enrol-segment-recover',
};
